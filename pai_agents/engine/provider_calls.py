"""Provider-executed tool calls in a step stream: validated, recorded, never run here (LC-127).

A provider tool runs on the provider's side; its call, and usually its result, arrive in the
step stream marked ``providerExecuted: true``. PAI validates such a call once, on the stream
transform_step_stream returned, like its own calls (LC-122): the name must be a provider tool
the attempt advertised (``ModelStepRequest.provider_tools``) unless the call is ``dynamic``
(a tool the provider resolved itself, e.g. a remote MCP server), and the input must be JSON
that matches the definition's input model when it declares one (``inputSchema`` key or
``input_schema`` attribute holding a pydantic model). An invalid call is recorded as a
``tool-input-error`` even though the provider may already have run it: validation after the
stream cannot undo a remote effect, but the transcript never shows that call as a success,
so a result following it is ignored (as for LC-126).

Valid or not, the runtime never executes such a call, routes it to a client, makes it a
pending action or waits for its result: a result that arrives in the stream is recorded; a
missing one leaves the part as the provider left it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from pai_agents.messages.types import UIMessageChunk
from pai_agents.models.base import StepStreamPart

__all__ = ["ProviderCalls", "json_safe"]

_NOT_JSON: Final = object()


def json_safe(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _input_model(definition: Any) -> type[BaseModel] | None:
    schema = (
        definition.get("inputSchema")
        if isinstance(definition, Mapping)
        else getattr(definition, "input_schema", None)
    )
    return schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None


def _error_text(error: Any) -> str:
    if isinstance(error, str):
        return error
    return json.dumps(error) if json_safe(error) else str(error)


class ProviderCalls:
    """The provider-executed calls of one step: which are valid and may still get a result."""

    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self._definitions = definitions
        self._awaiting: set[str] = set()  # valid calls whose (final) result may still arrive
        self.count = 0

    def is_dynamic(self, name: str, dynamic: bool) -> bool:
        """A call of an undeclared name is recorded as a ``dynamic-tool`` part."""
        return dynamic or name not in self._definitions

    def call(
        self, call_id: str, name: str, raw_input: Any, *, dynamic: bool, as_dynamic: bool
    ) -> UIMessageChunk:
        """The chunk recording a completed call: ``tool-input-available`` or, when invalid,
        ``tool-input-error`` (its input kept only when it is JSON, as for LC-124).
        ``dynamic``: the stream marked the call dynamic; ``as_dynamic``: the part kind its
        first chunk chose (an undeclared name is recorded as a ``dynamic-tool`` too)."""
        self.count += 1
        value, error = self._validate(name, raw_input, dynamic=dynamic)
        chunk: UIMessageChunk
        if error is None:
            self._awaiting.add(call_id)
            chunk = {"type": "tool-input-available", "toolCallId": call_id, "toolName": name}
            chunk["input"] = value
        else:
            chunk = {
                "type": "tool-input-error",
                "toolCallId": call_id,
                "toolName": name,
                "errorText": error,
            }
            if value is not _NOT_JSON:
                chunk["input"] = value
        chunk["providerExecuted"] = True
        if as_dynamic:
            chunk["dynamic"] = True
        return chunk

    def result(self, part: StepStreamPart) -> list[UIMessageChunk]:
        """A canonical ``tool-result`` / ``tool-error`` of a valid call, as its output chunk;
        nothing for an unknown, invalid, local or already settled call."""
        call_id = str(part.get("toolCallId"))
        if call_id not in self._awaiting:
            return []
        chunk: UIMessageChunk
        output = part.get("output")
        if part.get("type") == "tool-error":
            chunk = {
                "type": "tool-output-error",
                "toolCallId": call_id,
                "errorText": _error_text(part.get("error")),
            }
        elif not json_safe(output):
            chunk = {
                "type": "tool-output-error",
                "toolCallId": call_id,
                "errorText": "The provider returned a result that is not JSON.",
            }
        else:
            chunk = {"type": "tool-output-available", "toolCallId": call_id, "output": output}
            if part.get("preliminary") is True:
                chunk["preliminary"] = True
        if chunk.get("preliminary") is not True:
            self._awaiting.discard(call_id)
        chunk["providerExecuted"] = True
        metadata = part.get("providerMetadata")
        if isinstance(metadata, Mapping) and json_safe(metadata):
            chunk["providerMetadata"] = dict(metadata)
        return [chunk]

    def _validate(self, name: str, raw_input: Any, *, dynamic: bool) -> tuple[Any, str | None]:
        """``(input value or _NOT_JSON, error text or None)``."""
        if isinstance(raw_input, str):
            try:
                value = json.loads(raw_input) if raw_input.strip() else {}
            except json.JSONDecodeError as exc:
                return raw_input, f"Invalid JSON input for provider tool '{name}': {exc.msg}"
        else:
            value = {} if raw_input is None else raw_input
            if not json_safe(value):
                return _NOT_JSON, f"Input for provider tool '{name}' is not JSON."
        if name not in self._definitions:
            if dynamic:
                return value, None
            return value, f"Model tried to call unavailable provider tool '{name}'."
        model = _input_model(self._definitions[name])
        if model is not None:
            try:
                model.model_validate(value)
            except ValidationError as exc:
                details = "; ".join(
                    f"{'.'.join(str(p) for p in error['loc']) or '(input)'}: {error['msg']}"
                    for error in exc.errors()
                )
                return value, f"Invalid input for provider tool '{name}': {details}"
        return value, None

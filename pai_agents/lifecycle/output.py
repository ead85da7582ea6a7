"""Structured output (TH-021): the schema a provider is asked for and the final-text check.

A run asks for it with ``RunPatch(output=SomeModel)`` from prepare_run. It is a run-level
setting, as in the peer: step and call patches cannot set or clear it. Tools are disabled
for the episode (see :func:`~pai_agents.lifecycle.patches.apply_patch`), the provider gets
:func:`json_response_format`, and the text of the step that completes the run must validate
(:func:`validate_output`), otherwise the run fails with :class:`StructuredOutputError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pai_agents.models.base import ResponseFormat

__all__ = ["StructuredOutputError", "json_response_format", "output_text", "validate_output"]

_M = TypeVar("_M", bound=BaseModel)


class StructuredOutputError(ValueError):
    """The final text of a structured-output run is not valid JSON for its schema."""

    def __init__(self, message: str, *, schema: str, text: str) -> None:
        super().__init__(message)
        self.schema = schema
        self.text = text


def json_response_format(output: type[BaseModel]) -> ResponseFormat:
    """The AI SDK ``responseFormat`` for ``output``: JSON matching its JSON schema."""
    return {"type": "json", "schema": output.model_json_schema(), "name": output.__name__}


def output_text(message: Mapping[str, Any]) -> str:
    """The text the model answered in ``message`` (its text parts, joined)."""
    return "".join(
        str(p.get("text", "")) for p in message.get("parts") or () if p.get("type") == "text"
    )


def validate_output(output: type[_M], message: Mapping[str, Any]) -> _M:
    """Parse the message's text as ``output``; :class:`StructuredOutputError` if it is not."""
    text = output_text(message)
    try:
        return output.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(output)'}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise StructuredOutputError(
            f"the final answer is not a valid {output.__name__}: {problems}",
            schema=output.__name__,
            text=text,
        ) from None

"""Request bodies of the HTTP API, described as precisely as the OpenAPI document can say
what the API accepts (a client generator or a fuzzer relies on it).

Optional fields are *omitted*, never ``null``: the schema lists only their real type, and an
explicit ``null`` is a 422 like any other wrong type; types are strict JSON types. Message
parts and the agent name are documented with the shapes and values the services accept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from pai_threads.execution import registry

__all__ = [
    "ActionIn",
    "AiSdkChatIn",
    "CreateThreadIn",
    "MessageIn",
    "SendIn",
    "ThreadPatchIn",
]

# JSON Schema of the parts a client sends (the services check the same rules).
USER_PART_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "required": ["type", "text"],
            "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
        },
        {
            "type": "object",
            "required": ["type", "url", "mediaType"],
            "properties": {
                "type": {"const": "file"},
                "url": {"type": "string"},
                "mediaType": {"type": "string"},
                "filename": {"type": "string"},
            },
        },
        {
            "type": "object",
            "required": ["type", "fileId"],
            "description": "A PAI file (POST /api/pai/files) of the caller's scope.",
            "properties": {
                "type": {"const": "attachment"},
                "fileId": {"type": "string"},
                "id": {"type": "string", "minLength": 1, "maxLength": 100},
            },
        },
        {
            "type": "object",
            "required": ["type"],
            "description": "Application data; data-pai-* is reserved for the runtime.",
            "properties": {
                "type": {"type": "string", "pattern": "^data-", "not": {"pattern": "^data-pai-"}},
                "id": {"type": "string"},
                "data": {},
            },
        },
    ]
}


class _Omitted:
    """``json_schema_extra`` of :func:`optional`: the field's schema without ``null`` (nor
    the ``None`` default), then ``also``; marks the field for :class:`InputSchema`."""

    def __init__(self, also: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.also = also

    def __call__(self, schema: dict[str, Any]) -> None:
        schema.pop("default", None)
        options = schema.pop("anyOf", None)
        if options is not None:
            kept = [option for option in options if option.get("type") != "null"]
            if len(kept) == 1:
                schema.update(kept[0])
            else:
                schema["anyOf"] = kept
        if self.also is not None:
            self.also(schema)


def optional(also: Callable[[dict[str, Any]], None] | None = None, **kwargs: Any) -> Any:
    """A field clients may leave out, but not send as ``null``."""
    return Field(default=None, json_schema_extra=_Omitted(also), **kwargs)


class InputSchema(Schema):
    """Strict JSON types (``0`` is not ``false``), no unknown keys, no ``null`` for an
    omitted field: what the document says is exactly what is accepted."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True
    )

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                if not isinstance(field.json_schema_extra, _Omitted):
                    continue
                for key in {name, field.alias or name}:
                    if key in data and data[key] is None:
                        raise ValueError(f"'{key}' must not be null: leave it out instead")
        return data


def _agent_names(schema: dict[str, Any]) -> None:
    """The registered agents, read when the document is generated."""
    schema["enum"] = sorted(registry.agents())


def _public_metadata(schema: dict[str, Any]) -> None:
    schema["propertyNames"] = {"not": {"const": "pai"}}


class CreateThreadIn(InputSchema):
    agent: str | None = optional(_agent_names, description="Default: the first agent.")
    title: str = Field(default="", max_length=200)


class ThreadPatchIn(InputSchema):
    """Rename (``title``; whitespace folded) and/or archive or restore (``archived``); an
    empty body changes nothing."""

    title: str | None = optional(max_length=200)
    archived: bool | None = optional()


def _user_parts(schema: dict[str, Any]) -> None:
    schema["items"] = USER_PART_SCHEMA


class MessageIn(InputSchema):
    """A user UIMessage; ``id`` makes the send idempotent."""

    id: str | None = optional(min_length=1, max_length=100)
    role: Literal["user"] = "user"
    parts: list[dict[str, Any]] = Field(min_length=1, max_length=100, json_schema_extra=_user_parts)
    metadata: dict[str, Any] | None = optional(
        _public_metadata, description="Public metadata; metadata.pai is the runtime's."
    )


def _one_form(schema: dict[str, Any]) -> None:
    schema["oneOf"] = [{"required": ["text"]}, {"required": ["message"]}]


class SendIn(InputSchema):
    """Either ``message`` (a UIMessage) or ``text`` (shorthand for one text part).

    ``policy`` overrides the agent's choice of what happens while a run is active.
    """

    model_config = ConfigDict(json_schema_extra=_one_form)

    message: MessageIn | None = optional()
    text: str | None = optional(min_length=1)
    client_data: dict[str, Any] | None = optional()
    policy: Literal["queue", "reject", "interrupt", "steer"] | None = optional()


class ActionIn(InputSchema):
    """An approval (``approved``, ``reason``), a client tool result (``output`` or
    ``errorText``), or the answer to a suspension the tool declared (``answer``, validated
    against its schema: docs/suspensions.md); ``output`` is any JSON, ``null`` included."""

    approved: bool | None = optional()
    reason: str | None = optional(max_length=2000)
    output: Any = None
    error_text: str | None = optional(max_length=10_000)
    answer: Any = Field(
        default=None,
        description="An input suspension's answer: matches the action's answerSchema.",
    )


class AiSdkChatIn(InputSchema):
    """``DefaultChatTransport``'s body (documents ``POST /api/pai/ai-sdk/chat``; the view
    reads the body itself, keeping unknown keys the SDK may add)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, description="A PAI thread id of the caller's scope.")
    messages: list[dict[str, Any]] = Field(
        min_length=1, description="The chat's UIMessages; the last one is sent."
    )
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = optional(min_length=1)
    client_data: dict[str, Any] | None = optional()

"""PAI's NinjaAPI: the guarded body parser and an OpenAPI document precise enough for a
client generator or a fuzzer.

django-ninja documents what it serves; this adds what it cannot know: the API's
description, that the session cookie is optional (the default identity resolver makes an
anonymous session for a caller without one), and the AI SDK endpoints, which are plain
Django views (they stream SSE) documented here by hand.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from ninja import NinjaAPI
from ninja.openapi.schema import OpenAPISchema

from pai_threads.api.parser import GuardedParser
from pai_threads.api.schemas import AiSdkChatIn, errors

__all__ = ["DESCRIPTION", "PaiNinjaAPI"]

_GUIDES = (
    ("Quickstart", "docs/quickstart.md", "install, settings, the first agent"),
    ("Concepts", "docs/concepts.md", "threads, runs, messages, queued input, pending actions"),
    ("Realtime", "docs/realtime.md", "the websocket protocol and the AI SDK endpoint"),
    ("Files", "docs/reference/files.md", "uploads and attachment parts"),
    ("Client", "docs/reference/client.md", "the browser client"),
    ("Settings", "docs/reference/settings.md", "every `PAI` setting"),
    ("Operations", "docs/operations.md", "deployment, workers, what to supervise"),
)

DESCRIPTION = "\n".join(
    [
        "Durable AI-agent threads over HTTP: create a thread, send messages (AI SDK "
        "UIMessages, camelCase JSON), follow runs, answer approvals and client tools, "
        "upload files. Live events stream over the websocket `/ws/pai/threads/{id}/` or, "
        "for `useChat`, as SSE from `/api/pai/ai-sdk/chat`.",
        "",
        '**Identity.** The project\'s `PAI["IDENTITY_RESOLVER"]` decides who calls; the '
        "default gives each browser session its own scope, and makes the session when a "
        "request has no cookie, so the cookie is optional. Requests that carry the session "
        "cookie must send the CSRF token from `GET /api/pai/session` as `X-CSRFToken`. "
        "Another scope's thread, run, action or file is 404, exactly like a missing one.",
        "",
        '**Errors.** Every 4xx and 5xx is `{"error": {"code", "message", '
        '"details"?}}` with a stable `code` (`bad_request`, `unauthenticated`, `forbidden`, '
        "`not_found`, `method_not_allowed`, `thread_busy`, `action_conflict`, "
        "`payload_too_large`, `unsupported_media_type`, `invalid_input`, `server_error`, "
        "`service_unavailable` with `Retry-After`, ...). Text must not contain NUL "
        "characters; JSON nests at most 64 levels.",
        "",
        "**Guides** (Markdown, in the project's `docs/` folder):",
        "",
        *(f"* {title}: `{path}` ({summary})" for title, path, summary in _GUIDES),
    ]
)

_SECURITY_SCHEME = "sessionCookie"
_SSE = {"text/event-stream": {"schema": {"type": "string"}}}


def _error_responses(*extra: int) -> dict[str, Any]:
    return {
        str(status): {
            "description": "Error",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
        }
        for status in errors(*extra)
    }


def _ai_sdk_paths(prefix: str) -> dict[str, Any]:
    optional_session: list[dict[str, list[str]]] = [{}, {_SECURITY_SCHEME: []}]
    return {
        f"{prefix}ai-sdk/chat": {
            "post": {
                "operationId": "pai_ai_sdk_chat",
                "summary": "AI SDK chat (useChat's DefaultChatTransport)",
                "description": (
                    "Sends the last message of `messages` to thread `id` (idempotent on the "
                    "message id; an assistant message answers tool approvals) and streams "
                    "the run as the AI SDK UI-message stream: `data: <chunk>` lines ending "
                    "with `data: [DONE]`. See `docs/realtime.md`."
                ),
                "tags": ["ai-sdk"],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/AiSdkChatIn"}}
                    },
                },
                "responses": {
                    "200": {"description": "The run's UI-message stream (SSE).", "content": _SSE},
                    **_error_responses(405, 409, 413),
                },
                "security": optional_session,
            }
        },
        f"{prefix}ai-sdk/chat/{{chat_id}}/stream": {
            "get": {
                "operationId": "pai_ai_sdk_resume_stream",
                "summary": "Resume the thread's active AI SDK stream",
                "description": (
                    "The active run's current message from its first chunk, then live; "
                    "204 when nothing is streaming."
                ),
                "tags": ["ai-sdk"],
                "parameters": [
                    {
                        "in": "path",
                        "name": "chat_id",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "The thread id.",
                    }
                ],
                "responses": {
                    "200": {"description": "The active stream (SSE).", "content": _SSE},
                    "204": {"description": "Nothing is streaming."},
                    **_error_responses(405),
                },
                "security": optional_session,
            }
        },
    }


def complete_schema(schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Make the session cookie optional and add the AI SDK endpoints."""
    components = schema.setdefault("components", {})
    components["securitySchemes"] = {
        _SECURITY_SCHEME: {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "Optional: the default identity resolver makes a session.",
        }
    }
    for operations in schema["paths"].values():
        for operation in operations.values():
            if "security" in operation:
                operation["security"] = [{}, {_SECURITY_SCHEME: []}]
    components.setdefault("schemas", {})["AiSdkChatIn"] = AiSdkChatIn.model_json_schema(
        by_alias=True, ref_template="#/components/schemas/{model}"
    )
    schema["paths"].update(_ai_sdk_paths(prefix))
    return schema


class PaiNinjaAPI(NinjaAPI):
    """NinjaAPI with :class:`GuardedParser` and the completed OpenAPI document."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("parser", GuardedParser())
        kwargs.setdefault("description", DESCRIPTION)
        super().__init__(**kwargs)

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        prefix = path_prefix if path_prefix is not None else self.get_root_path(path_params or {})
        complete_schema(schema, prefix)
        return schema

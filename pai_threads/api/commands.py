"""``POST /threads/{id}/commands/{name}``: call one of the thread agent's exposed commands.

The caller's identity comes from the identity resolver, never from the body. A server-only
command is 404 exactly like a missing one; a body or input that does not fit is 422 with
the errors; ``execute`` refusing is ``command_failed`` (docs/commands.md).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from pai_threads import services
from pai_threads.api.auth import IdentityAuth, request_identity
from pai_threads.api.inputs import InputSchema, optional
from pai_threads.api.schemas import QueueItemOut, RunOut, UIMessageOut, errors
from pai_threads.conf import pai_settings
from pai_threads.errors import PayloadTooLarge
from pai_threads.events.projections import CamelSchema, queue_item_out, run_out

__all__ = ["CommandIn", "CommandOut", "router"]

router = Router(tags=["commands"])


class CommandIn(InputSchema):
    """``input`` is validated by the command's own input model (omitted: ``{}``)."""

    input: dict[str, Any] | None = optional()
    client_data: dict[str, Any] | None = optional()


class CommandOut(CamelSchema):
    """``output`` of a command that answers; ``run`` (and the stored ``message``) of one
    that started a run, or ``queued`` with the active ``run`` it waits behind."""

    command: str
    output: Any = None
    run: RunOut | None = None
    message: UIMessageOut | None = None
    queued: QueueItemOut | None = None


@router.post(
    "/threads/{thread_id}/commands/{name}",
    response={200: CommandOut, 202: CommandOut, **errors(409, 413)},
    by_alias=True,
    auth=IdentityAuth(),
)
def invoke_command(
    request: HttpRequest, thread_id: str, name: str, body: CommandIn
) -> Status[dict[str, Any]]:
    """Call an exposed command: 200 with its output, or 202 when it started (or queued) a
    run; 404 for a missing or server-only command."""
    if len(request.body) > pai_settings.MAX_MESSAGE_BYTES:
        raise PayloadTooLarge(f"The body is larger than {pai_settings.MAX_MESSAGE_BYTES} bytes.")
    result = services.invoke_command(
        request_identity(request),
        thread_id,
        name,
        body.input,
        body.client_data,
        exposed_only=True,
    )
    payload: dict[str, Any] = {"command": result.command, "output": result.output}
    if result.run is None and result.queue_item is None:
        return Status(200, payload)
    payload["run"] = run_out(result.run) if result.run else None
    payload["message"] = result.message_public
    payload["queued"] = queue_item_out(result.queue_item) if result.queue_item else None
    return Status(202, payload)

"""A sub-agent's progress on its parent's tool part (ToolData, docs/subagents.md).

While the child runs, the parent waits: no engine of the parent streams. So the store
writes the child's progress as one durable ToolData record (channel ``subagent``, id
``run``) on the parent's stored tool part, replaced in place at each change, and announces
the parent's message (``message.committed``) to the parent thread's subscribers. Clients
read it as ``part["data"]["subagent"][0]``: the child's run and thread ids (open the
child's thread to watch its tokens live), its status, how many steps it took, and the last
text it wrote. The record is written when the child starts (in the parent's suspending
transaction), after each committed step of the child, and in the child's ending
transaction, before the parent's call is answered: every write precedes the parent's
resumption, so the resumed parent keeps the final record.
"""

from __future__ import annotations

from typing import Any, Final

from django.db import transaction

from pai_agents.messages.tool_data import tool_data_chunk
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import stored_message_committed
from pai_threads.models import Message, PendingAction, Run
from pai_threads.store.rows import fold_chunks

__all__ = [
    "PROGRESS_CHANNEL",
    "PROGRESS_RECORD",
    "child_progressed",
    "glimpse",
    "last_text",
    "progress_value",
    "write_progress",
]

PROGRESS_CHANNEL: Final = "subagent"
PROGRESS_RECORD: Final = "run"
# The progress record carries a glimpse of the child's text, never a transcript: the
# whole text is the call's result, the transcript is on the child's thread.
TEXT_LIMIT: Final = 500


def glimpse(text: str) -> str:
    """``text`` stripped and cut to :data:`TEXT_LIMIT` characters."""
    text = text.strip()
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


def last_text(parts: Any) -> str:
    """A :func:`glimpse` of the last non-empty text part of a stored message."""
    for part in reversed(parts or ()):
        if isinstance(part, dict) and part.get("type") == "text":
            text = glimpse(str(part.get("text") or ""))
            if text:
                return text
    return ""


def progress_value(child: Run, *, text: str = "") -> dict[str, Any]:
    return {
        "runId": child.id,
        "threadId": child.thread_id,
        "status": child.status,
        "steps": int(child.step_count or 0),
        "text": text,
    }


def write_progress(
    parent_run_id: str,
    tool_call_id: str,
    value: dict[str, Any],
    *,
    lock_parent: bool = True,
    announce: bool = True,
    message_id: str | None = None,
) -> bool:
    """Replace the progress record on the parent's tool part while its call still waits,
    and announce the parent's message after commit. False when the parent no longer waits
    on that call (answered, cancelled, deleted): nothing is written then.

    ``lock_parent``: take the parent's run row first (the order the submit path takes, so
    an answer of another call of the same step never interleaves with this update); False
    when the caller's transaction already holds it. ``announce``: False when the caller
    announces the parent's message itself (the suspending and the answering transaction).
    ``message_id``: the waiting action's message, when the caller holds that action locked
    (the answering transaction); otherwise the pending action is read here."""
    with transaction.atomic():
        if lock_parent:
            Run.objects.select_for_update().filter(pk=parent_run_id).values_list("pk").first()
        message_id = message_id or (
            PendingAction.objects.filter(
                run_id=parent_run_id,
                tool_call_id=tool_call_id,
                kind=PendingAction.Kind.SUBAGENT,
                status=PendingAction.Status.PENDING,
            )
            .values_list("message_id", flat=True)
            .first()
        )
        if message_id is None:
            return False
        row = Message.objects.filter(run_id=parent_run_id, message_id=message_id).first()
        if row is None:
            return False
        fold_chunks(row, [tool_data_chunk(tool_call_id, PROGRESS_CHANNEL, PROGRESS_RECORD, value)])
        if announce:
            publish_after_commit(row.thread_id, lambda: [stored_message_committed(row)])
    return True


def child_progressed(child: Run, parts: Any) -> None:
    """After a committed step (or suspension) of ``child``: its progress on the parent."""
    write_progress(
        str(child.parent_run_id),
        child.parent_tool_call_id,
        progress_value(child, text=last_text(parts)),
    )

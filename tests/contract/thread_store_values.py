"""Values and scenes shared by the ThreadStore contract cases (one backend each)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pai_agents.engine.store import ActionRequest, ClaimedRun, RunOutcome, StepRecord, ThreadStore
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import Usage
from tests.contract.thread_store_backends import StoreBackend

__all__ = [
    "APPROVAL",
    "CALL",
    "COMPLETED",
    "LEASE",
    "ORM_DB",
    "USAGE",
    "claimed",
    "ids",
    "memory_xfail",
    "step",
    "text_message",
    "tool_message",
    "with_result",
]

LEASE = 30.0
USAGE: Usage = {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}


# Runs write from worker threads (as in production): the ORM cases need a real transaction.
ORM_DB = pytest.mark.django_db(transaction=True)


def memory_xfail(reason: str) -> Any:
    """A case the in-memory store fails today (it is fixed there, not here)."""
    return pytest.param("memory", marks=pytest.mark.xfail(strict=True, reason=reason))


def text_message(message_id: str, text: str) -> UIMessage:
    return UIMessage(id=message_id, role="assistant", parts=[{"type": "text", "text": text}])


def tool_message(message_id: str, call_id: str = "call-1", **part: Any) -> UIMessage:
    tool: dict[str, Any] = {"type": "tool-calculator", "toolCallId": call_id}
    tool |= {"state": "input-available", "input": {"expression": "6*7"}, **part}
    return UIMessage(id=message_id, role="assistant", parts=[tool])


def with_result(message: UIMessage, output: Any) -> UIMessage:
    parts = [{**p, "state": "output-available", "output": output} for p in message["parts"]]
    return UIMessage(id=message["id"], role="assistant", parts=parts)


def step(index: int, message_id: str, finish_reason: str = "stop") -> StepRecord:
    now = datetime.now(UTC)
    return StepRecord(
        index=index,
        message_id=message_id,
        request={"provider": "scripted", "modelId": "contract"},
        usage=USAGE,
        finish_reason=finish_reason,
        started_at=now,
        finished_at=now,
    )


COMPLETED = RunOutcome(status="completed", usage=USAGE)


async def claimed(
    backend: StoreBackend, store: ThreadStore | None = None
) -> tuple[str, ClaimedRun]:
    """A new thread whose run a worker claimed: (thread id, claim)."""
    thread_id, run_id = await backend.start_run()
    store = store or backend.worker()
    return thread_id, await store.claim_run(run_id, owner="worker-a", lease_seconds=LEASE)


async def ids(backend: StoreBackend, thread_id: str) -> list[tuple[str, str]]:
    return [(m.id, m.status) for m in await backend.messages(thread_id)]


CALL = tool_message("a-0")
APPROVAL = ActionRequest(
    tool_call_id="call-1", tool_name="calculator", kind="approval", input={}, approval_id="apr-1"
)

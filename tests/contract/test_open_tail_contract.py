"""The open tail and the lifecycle facade, on every store (MF-043 with LC-011 and LC-032).

A hook may append a message through ``thread.messages.append()`` while a step streams into
the thread's open assistant message (a ``transform_step_stream`` or a client object kept from
an earlier hook). The runtime keeps the tail invariant itself: the appended message is
stored, the open message moves behind it, and the step's next checkpoint and its commit go
on as if nothing had been appended.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests.contract.thread_store_backends import MemoryBackend, ORMBackend, StoreBackend
from tests.contract.thread_store_values import ORM_DB, claimed, ids, step, text_message


@pytest.fixture(params=["memory", pytest.param("orm", marks=ORM_DB)])
def backend(request: pytest.FixtureRequest) -> StoreBackend:
    return ORMBackend() if request.param == "orm" else MemoryBackend()


async def test_mf_043_append_during_a_streaming_step_keeps_the_open_message_last(
    backend: StoreBackend,
) -> None:
    """MF-043, LC-011, LC-032: a facade append between two checkpoints of the open step
    message is stored before it; the later checkpoint and the commit succeed, and the thread
    ends with the appended message followed by the step's committed message."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.checkpoint_message(lease, message=text_message("a-0", "He"), step_index=0)

    thread = cast(Any, store).lifecycle_thread(lease)  # the facade hooks get
    note = await thread.messages.append(role="system", parts=[{"type": "text", "text": "note"}])
    assert note.role == "system"
    assert await ids(backend, thread_id) == [
        ("user-1", "committed"),
        (note.id, "committed"),
        ("a-0", "open"),
    ]

    await store.checkpoint_message(lease, message=text_message("a-0", "Hello"), step_index=0)
    await store.commit_step(
        lease, message=text_message("a-0", "Hello!"), step=step(0, "a-0"), replace_open=True
    )
    messages = await backend.messages(thread_id)
    assert [(m.id, m.status) for m in messages] == [
        ("user-1", "committed"),
        (note.id, "committed"),
        ("a-0", "committed"),
    ]
    assert messages[-1].parts == [{"type": "text", "text": "Hello!"}]
    assert await backend.steps(lease.run_id) == [0]

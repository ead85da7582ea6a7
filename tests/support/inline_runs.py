"""Send a user message and execute its run in this process (the embedded executor's path,
without dispatch): what many Django-side tests need before they look at the rows."""

from __future__ import annotations

import asyncio

from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Run

__all__ = ["send_and_execute", "send_text"]


def send_text(identity: Identity, thread_id: str, text: str, *, dispatch: bool = False) -> str:
    """Send ``text`` on the thread (not dispatched unless asked); the id of the run it
    started."""
    sent = services.send(
        identity,
        thread_id,
        {"role": "user", "parts": [{"type": "text", "text": text}]},
        dispatch=dispatch,
    )
    assert sent.run is not None, "the send was queued behind an active run"
    return sent.run.id


def send_and_execute(identity: Identity, thread_id: str, text: str) -> Run:
    """Send ``text`` on the thread, execute the run it started, return the run as stored."""
    run_id = send_text(identity, thread_id, text)
    asyncio.run(aexecute_run(run_id))
    return Run.objects.get(id=run_id)

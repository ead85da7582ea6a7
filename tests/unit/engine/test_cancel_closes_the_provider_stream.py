"""A cancel (or a policy abort, LC-116) closes the provider's stream at once, whichever side
of it notices.

The engine notices a cancel in two places: inside the model's stream (the abort interrupts
its network wait) and between parts (the consumer checks the signal after each one). In
the second case the model's generator is suspended at a ``yield``: the engine must close
it before it writes the cancelled ending, or the provider connection stays open (and the
provider goes on generating) until the garbage collector finalizes the generator, which
with PAI's GC tuning can take many seconds (CI saw a run's HTTP stream outlive its cancel).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pai_agents import (
    AbortSignal,
    InMemoryThreadStore,
    RecordingSink,
    RunEngine,
    ScriptedModel,
    ScriptedStep,
    define_agent,
)
from tests.support.engine_harness import harness


class CancelledBetweenParts(ScriptedModel):
    """Fires the run's signal just before yielding its third text delta, so the engine sees
    the cancel after that part, with this generator suspended at its ``yield``."""

    def __init__(self, store: InMemoryThreadStore, *, cancel: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store = store
        self.cancel = cancel
        self.run_id = ""
        self.closed_while: list[str] = []  # the run's status when the stream was closed

    async def stream(
        self, request: Any, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[Any]:
        deltas = 0
        try:
            async for part in super().stream(request, signal=signal):
                if part.get("type") == "text-delta":
                    deltas += 1
                    if deltas == 3 and self.cancel and signal is not None:
                        signal.abort("cancelled")
                yield part
        finally:
            self.closed_while.append(self.store.runs[self.run_id].status)


async def test_a_cancel_seen_between_parts_closes_the_stream_before_the_run_ends() -> None:
    store = InMemoryThreadStore()
    model = CancelledBetweenParts(store, steps=[ScriptedStep.reply("word " * 50, chunk_size=5)])
    agent = define_agent("c", instructions="x", model=model)
    thread_id = store.create_thread(scope_key="s", agent_name="c")
    model.run_id = store.send(
        thread_id, {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    )
    claim = await store.claim_run(model.run_id, owner="w", lease_seconds=30)

    outcome = await RunEngine(agent=agent, store=store, sink=RecordingSink()).run_episode(
        claim, signal=AbortSignal()
    )

    assert outcome.status == "cancelled"
    # Closed once, while the run was still running: before the cancelled ending was written.
    assert model.closed_while == ["running"]
    text = next(
        p for m in store.thread_messages(thread_id)[1:] for p in m["parts"] if p["type"] == "text"
    )
    assert text["text"] == "word " * 3 and text["state"] == "done"


async def test_lc_116_a_policy_abort_closes_the_upstream_stream_before_the_run_ends() -> None:
    """LC-116: ``abort()`` in transform_step_stream cancels the upstream provider stream."""

    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                if part["type"] == "text-delta" and "forb" in part["delta"]:
                    await input.abort("leak")
                yield part

        return stream()

    model = CancelledBetweenParts(
        InMemoryThreadStore(), cancel=False, steps=[ScriptedStep.reply("ok then forbidden " * 9)]
    )
    h = harness(parts=[{"transform_step_stream": transform}], model=model)
    model.store, model.run_id = h.store, h.run_id
    assert (await h.run()).status == "blocked"
    assert model.closed_while == ["running"]

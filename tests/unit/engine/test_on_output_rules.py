"""When a configured tool's ``on_output`` runs relative to the model and the store.

``on_output`` is the place for side effects that must happen before the model builds on a
result (send the mail, then let the model say it was sent), so the runtime awaits it and
stores the result only after it returns. The earlier AD-064..AD-068 tests live in
test_tool_configs.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pai_agents import ScriptedStep
from pai_agents.agent import ToolConfig
from tests.support.engine_harness import Harness, harness, typed

pytestmark = pytest.mark.filterwarnings("error")


def _stored_part(h: Harness, call_id: str) -> dict[str, Any]:
    """The tool part of ``call_id`` as the store holds it now (a copy)."""
    parts = [p for m in h.assistant() for p in m["parts"] if p.get("toolCallId") == call_id]
    assert len(parts) == 1
    return parts[0]


def _model_saw_output(request: Any, call_id: str) -> bool:
    """Whether a model request carries the tool result of ``call_id``."""
    contents = [m["content"] for m in request.messages if isinstance(m["content"], list)]
    return any(
        c.get("type") == "tool-result" and c.get("toolCallId") == call_id
        for content in contents
        for c in content
    )


async def test_ad_069_on_output_is_awaited_before_the_model_and_the_store_see_the_output() -> None:
    """AD-069: while an async ``on_output`` is suspended, the run waits: the next model step
    has not been requested, the stored tool part is still without its output, and no client
    saw the output; once it returns, the output is stored and the model's next request
    carries it."""
    entered, release = asyncio.Event(), asyncio.Event()
    seen: dict[str, Any] = {}

    async def on_output(input: Any) -> None:
        entered.set()
        await release.wait()
        seen["returned"] = True

    h = harness(
        [ScriptedStep.call("typed", {"q": "a"}, id="t1"), ScriptedStep.reply("sent")],
        tools=[ToolConfig(tool=typed, on_output=on_output)],
    )
    run = asyncio.create_task(h.run())
    await asyncio.wait_for(entered.wait(), timeout=30)
    for _ in range(200):  # an engine that did not await on_output would move on meanwhile
        await asyncio.sleep(0)
    assert len(h.model.requests) == 1, "the next model step waits for on_output"
    assert _stored_part(h, "t1")["state"] == "input-available", "stored only after it returns"
    assert not any(
        e.get("chunk", {}).get("type") == "tool-output-available" for e in map(dict, h.sink.events)
    ), "no client saw the output before on_output returned"
    assert not run.done()

    release.set()
    outcome = await asyncio.wait_for(run, timeout=30)
    assert outcome.status == "completed" and seen == {"returned": True}
    part = _stored_part(h, "t1")
    assert (part["state"], part["output"]) == ("output-available", {"value": "a"})
    first, second = h.model.requests
    assert not _model_saw_output(first, "t1") and _model_saw_output(second, "t1")


async def test_ad_069_on_output_side_effects_stay_when_storing_the_result_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AD-069: ``on_output`` ran before the result was stored; when storing it then fails,
    the run fails without storing the output, and nothing undoes or repeats what
    ``on_output`` did (its side effect happened exactly once)."""
    sent: list[str] = []
    h = harness(
        [ScriptedStep.call("typed", {"q": "mail"}, id="t1"), ScriptedStep.reply("sent")],
        tools=[ToolConfig(tool=typed, on_output=lambda i: sent.append(i.output.value))],
    )
    calls: list[bool] = []

    async def failing_update(lease: Any, **kwargs: Any) -> None:
        calls.append(bool(sent))  # on_output had already run when storing began
        raise RuntimeError("the database went away")

    monkeypatch.setattr(h.store, "update_message", failing_update)
    outcome = await h.run()

    assert calls == [True]
    assert outcome.status == "failed"
    assert sent == ["mail"], "the side effect is neither rolled back nor repeated"
    assert _stored_part(h, "t1")["state"] == "input-available"
    assert len(h.model.requests) == 1

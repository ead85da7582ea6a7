"""Tool hooks and after_step in the engine (LC-131..LC-152)."""

from __future__ import annotations

from typing import Any

import pytest

from pai_agents import RunEngine, ScriptedStep
from pai_agents.lifecycle import (
    AgentLifecycle,
    Complete,
    NextStep,
    NextStepPatch,
    Reject,
    ReplaceInput,
    ReplaceMessage,
    ReplaceOutput,
    Skip,
)
from tests.support.engine_harness import executed, harness, request_texts, text_of


def _tool_parts(h: Any) -> list[dict[str, Any]]:
    return [p for m in h.assistant() for p in m["parts"] if p.get("toolCallId")]


class Recorder(AgentLifecycle):
    def __init__(self, before: Any = None, after: Any = None) -> None:
        self.before_result = before
        self.after_result = after
        self.before: list[Any] = []
        self.after: list[Any] = []

    def before_tool_call(self, input: Any) -> Any:
        self.before.append(input)
        return self.before_result

    def after_tool_result(self, input: Any) -> Any:
        self.after.append(input)
        return self.after_result


async def test_lc_131_lc_132_before_tool_call_gets_the_validated_call() -> None:
    """LC-131, LC-132, LC-133, TH-031: tool info, call id, step, entry initial, input."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}, id="c1"), ScriptedStep.reply("ok")],
        parts=[rec],
    )
    await h.run()
    [seen] = rec.before
    assert (seen.tool.name, seen.tool.source, seen.call.tool_call_id) == ("lookup", "backend", "c1")
    assert seen.input == {"q": "a"} and seen.entry.type == "initial" and seen.step.index == 0
    assert executed == [("lookup", "a")]
    assert [r.result.source for r in rec.after] == ["execute"]


async def test_lc_134_replace_input_is_what_executes() -> None:
    """LC-134, TH-032: the tool runs with the replaced input."""
    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")],
        parts=[Recorder(before=ReplaceInput({"q": "clamped"}))],
    )
    await h.run()
    assert executed == [("lookup", "clamped")]
    assert _tool_parts(h)[0]["output"] == "found clamped"


async def test_lc_135_skip_validates_output_and_reports_source_skip() -> None:
    """LC-135, TH-034: skip does not execute; output validated; after_tool_result source."""
    rec = Recorder(before=Skip({"value": "cached"}))
    h = harness([ScriptedStep.call("typed", {"q": "a"}), ScriptedStep.reply("ok")], parts=[rec])
    await h.run()
    assert executed == []
    assert _tool_parts(h)[0]["output"] == {"value": "cached"}
    [after] = rec.after
    assert (after.result.status, after.result.source) == ("output-available", "skip")


async def test_lc_135_invalid_skip_output_fails_the_run() -> None:
    """LC-135, LC-158: a skip output that does not match the output schema fails the run."""
    h = harness([ScriptedStep.call("typed", {"q": "a"})], parts=[Recorder(before=Skip({"bad": 1}))])
    assert (await h.run()).status == "failed"


async def test_lc_136_reject_is_a_model_visible_error() -> None:
    """LC-136, TH-033, TH-036: reject skips execution; the model sees the message."""
    rec = Recorder(before=Reject("not allowed today"))
    h = harness([ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")], parts=[rec])
    await h.run()
    assert executed == []
    part = _tool_parts(h)[0]
    assert (part["state"], part["errorText"]) == ("output-error", "not allowed today")
    assert (rec.after[0].result.status, rec.after[0].result.source) == ("output-error", "reject")
    second = h.model.requests[1]
    assert any("not allowed today" in str(c) for m in second.messages for c in m["content"])


async def test_lc_139_a_raising_tool_is_source_throw() -> None:
    """LC-139, LC-138: a tool that raises reaches after_tool_result as throw/output-error."""
    rec = Recorder()
    h = harness([ScriptedStep.call("boom", {"q": "a"}), ScriptedStep.reply("ok")], parts=[rec])
    await h.run()
    assert (rec.after[0].result.status, rec.after[0].result.source) == ("output-error", "throw")


async def test_lc_141_replace_output_and_replace_message() -> None:
    """LC-141, AD-065: replace_output changes what is stored and what the model sees;
    replace_message replaces the error text."""
    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")],
        parts=[Recorder(after=ReplaceOutput("redacted"))],
    )
    await h.run()
    assert _tool_parts(h)[0]["output"] == "redacted"
    assert "redacted" in str(h.model.requests[1].messages)

    h = harness(
        [ScriptedStep.call("boom", {"q": "a"}), ScriptedStep.reply("ok")],
        parts=[Recorder(after=ReplaceMessage("Try again later."))],
    )
    await h.run()
    assert _tool_parts(h)[0]["errorText"] == "Try again later."


async def test_lc_154_lc_157_before_tool_call_composition() -> None:
    """LC-154, LC-157: a later part sees the replaced input; the first skip decides."""
    seen: list[Any] = []

    def second(input: Any) -> Any:
        seen.append(input.input)
        return Skip("skipped")

    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")],
        parts=[
            {"before_tool_call": lambda i: ReplaceInput({"q": "b"}), "name": "one"},
            {"before_tool_call": second, "name": "two"},
            {"before_tool_call": lambda i: seen.append("third"), "name": "three"},
        ],
    )
    await h.run()
    assert seen == [{"q": "b"}]
    assert executed == []


async def test_lc_137_recovery_and_resumed_results_pass_after_tool_result() -> None:
    """LC-137, LC-133: an approved call resumes with entry=resume; denied calls settle."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w1"), ScriptedStep.reply("done")],
        parts=[rec],
    )
    assert (await h.run()).status == "waiting"
    assert rec.after == []  # LC-140: nothing final yet
    assert rec.before[0].entry.type == "initial"
    h.store.respond(h.run_id, "w1", approved=True)
    assert (await h.run()).status == "completed"
    assert rec.before[1].entry.type == "resume" and rec.before[1].entry.name == "wire"
    assert [(a.result.source, a.result.status) for a in rec.after] == [
        ("resume", "output-available")
    ]
    assert rec.after[0].entry.type == "resume"
    assert executed == [("wire", "1")]


async def test_lc_142_client_results_are_validated_then_after_tool_result() -> None:
    """LC-142, LC-137, LC-138: a client-submitted result runs after_tool_result (client)."""
    from pydantic import BaseModel

    from pai_agents import tool
    from pai_agents.engine.memory import InMemoryThreadStore

    class Pick(BaseModel):
        color: str = ""

    picker = tool("picker", input=Pick, output=Pick)
    rec = Recorder(after=ReplaceOutput({"color": "blue"}))
    h = harness(
        [ScriptedStep.call("picker", {}, id="p1"), ScriptedStep.reply("thanks")],
        parts=[rec],
        tools=[picker],
    )
    assert (await h.run()).status == "waiting"
    store: InMemoryThreadStore = h.store
    # What the service layer does on a client submission: the result lands in the message.
    for stored in store.messages:
        for part in stored.message["parts"]:
            if part.get("toolCallId") == "p1":
                part.update(state="output-available", output={"color": "red"})
    store.actions[(h.run_id, "p1")]["status"] = "submitted"
    store.runs[h.run_id].status = "queued"
    assert (await h.run()).status == "completed"
    assert [(a.result.source, a.result.output) for a in rec.after] == [("client", {"color": "red"})]
    assert _tool_parts(h)[0]["output"] == {"color": "blue"}
    assert "blue" in str(h.model.requests[1].messages)


@pytest.mark.parametrize(
    ("submitted", "state"),
    [({"color": "red"}, "output-available"), ({"color": ["not", "a", "string"]}, "output-error")],
    ids=["valid-kept-as-submitted", "invalid-becomes-an-error"],
)
async def test_lc_142_a_plain_agent_validates_client_results_too(
    submitted: dict[str, Any], state: str
) -> None:
    """LC-142 without a lifecycle (one run loop): a valid client result stays as submitted
    (not re-serialized, not republished); one that fails the tool's output schema becomes a
    model-visible error of source client."""
    from pydantic import BaseModel

    from pai_agents import tool
    from pai_agents.engine.memory import InMemoryThreadStore

    class Pick(BaseModel):
        color: str = ""
        shade: str | None = None

    picker = tool("picker", input=Pick, output=Pick)
    h = harness(
        [ScriptedStep.call("picker", {}, id="p1"), ScriptedStep.reply("thanks")],
        tools=[picker],
    )
    assert h.agent.lifecycle is None
    assert (await h.run()).status == "waiting"
    store: InMemoryThreadStore = h.store
    for stored in store.messages:
        for part in stored.message["parts"]:
            if part.get("toolCallId") == "p1":
                part.update(state="output-available", output=submitted)
    store.actions[(h.run_id, "p1")]["status"] = "submitted"
    store.runs[h.run_id].status = "queued"
    assert (await h.run()).status == "completed"
    [part] = _tool_parts(h)
    assert part["state"] == state
    if state == "output-available":
        assert part["output"] == submitted  # no "shade": None added
    else:
        assert part["errorText"].startswith("Invalid result for tool picker")
        assert part["toolMetadata"]["pai"]["source"] == "client"


async def test_lc_143_lc_149_after_step_input_and_frozen_message() -> None:
    """LC-143, LC-149: after_step sees the assembled message (results in), the effective
    request; editing step.message changes nothing stored."""
    seen: list[Any] = []

    def after(input: Any) -> Any:
        seen.append(input)
        parts = input.step.message.parts
        if parts and isinstance(parts[0], dict):
            parts[0]["text"] = "tampered"
        return None

    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("fine")],
        parts=[{"after_step": after}],
    )
    await h.run()
    first = seen[0].step
    assert first.index == 0 and first.finish_reason == "tool-calls"
    assert [c.tool_name for c in first.tool_calls] == ["lookup"]
    assert any(p.get("state") == "output-available" for p in first.message.parts)
    assert seen[0].request.tools == ("lookup", "typed", "boom", "wire")
    assert "tampered" not in str(h.messages())


async def test_lc_144_none_keeps_the_default_transition() -> None:
    """LC-144: None -> tool step continues, text step completes."""
    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("fine")],
        parts=[{"after_step": lambda i: None}],
    )
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 2


async def test_lc_145_lc_150_next_step_continues_with_an_overlay() -> None:
    """LC-145, LC-150, LC-152: next_step adds a step after a text answer; its overlay
    messages reach the next request and are never stored."""

    def after(input: Any) -> Any:
        if input.step.index == 0:
            return NextStep(
                patch=NextStepPatch(
                    append_model_messages=[{"role": "user", "content": "now double-check"}]
                )
            )
        return None

    h = harness(
        [ScriptedStep.reply("draft"), ScriptedStep.reply("checked")],
        parts=[{"after_step": after}],
    )
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 2
    assert request_texts(h.model.requests[1])[-1] == "user:now double-check"
    assert [text_of(m) for m in h.assistant()] == ["draft", "checked"]
    assert "double-check" not in str(h.messages())


async def test_lc_147_complete_ends_the_run_after_a_tool_step() -> None:
    """LC-147, TH-015: complete finishes even though the model asked for another step."""
    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("never")],
        parts=[{"after_step": lambda i: Complete()}],
    )
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 1 and executed == [("lookup", "a")]


async def test_lc_146_lc_148_waiting_wins_over_next_step_complete_cancels_waiting() -> None:
    """LC-146: a pending approval wins over next_step. LC-148: complete cancels it in the
    completing write, and no pending action stays open."""
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"})], parts=[{"after_step": lambda i: NextStep()}]
    )
    assert (await h.run()).status == "waiting"

    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w9")],
        parts=[{"after_step": lambda i: Complete()}],
    )
    assert (await h.run()).status == "completed"
    part = _tool_parts(h)[0]
    assert part["state"] == "output-error"
    assert part["toolMetadata"]["pai"]["source"] == "cancel"
    assert h.store.actions == {}
    assert executed == []


async def test_th_015_stop_when_has_tool_call_combines_with_max_steps() -> None:
    """TH-015: define_agent(stop_when=...) ends the loop once the named tool was called."""
    from pai_agents.lifecycle import has_tool_call

    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.call("typed", {"q": "b"})]
        + [ScriptedStep.call("lookup", {"q": "c"})] * 3,
        stop_when=[has_tool_call("typed")],
    )
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 2


async def test_plain_agent_runs_the_one_loop_with_no_lifecycle_cost() -> None:
    """No lifecycle: the one run loop makes only the plain store calls (one context read per
    episode, no facade bound, no extra reads)."""
    calls: list[str] = []
    h = harness([ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")])
    assert h.agent.lifecycle is None
    store = h.store
    for name in ("load_context", "commit_step", "update_message", "finish_run", "heartbeat"):
        original = getattr(store, name)

        def spy(*args: Any, __name: str = name, __orig: Any = original, **kw: Any) -> Any:
            calls.append(__name)
            return __orig(*args, **kw)

        setattr(store, name, spy)
    claim = await store.claim_run(h.run_id, owner="w", lease_seconds=30)
    await RunEngine(agent=h.agent, store=store).run_episode(claim)
    assert calls == ["load_context", "commit_step", "update_message", "commit_step"]
    assert "_lifecycle" not in store.__dict__


async def test_lc_146_lc_151_steering_joins_the_next_step_and_discards_the_overlay() -> None:
    """LC-146, LC-151: steered input reaches the next step; the overlay is dropped."""

    def after(input: Any) -> Any:
        if input.step.index == 0:
            h.store.steer(
                h.thread_id,
                {
                    "id": "s1",
                    "role": "user",
                    "parts": [{"type": "text", "text": "actually, in French"}],
                },
            )
            return NextStep(
                patch=NextStepPatch(append_model_messages=[{"role": "user", "content": "ovl"}])
            )
        return None

    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("fini")],
        parts=[{"after_step": after}],
    )
    assert (await h.run()).status == "completed"
    texts = request_texts(h.model.requests[1])
    assert "user:actually, in French" in texts
    assert "user:ovl" not in texts

"""Every ``after_tool_result`` source has a path that produces it (LC-137..LC-139).

execute, skip, reject, throw, fail, client, manual, resume, cancel and recovery: one test
each here (some also elsewhere, e.g. ``test_tool_hooks.py``), all through the engine.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel

from pai_agents import ScriptedStep, ToolContext, tool
from pai_agents.lifecycle import AgentLifecycle, Complete, Reject, Skip, ToolResultSource
from pai_agents.messages.reducer import MessageReducer
from tests.support.engine_harness import ALL_TOOLS, Args, harness


class Recorder(AgentLifecycle):
    def __init__(self, before: Any = None) -> None:
        self.before_result = before
        self.after: list[Any] = []

    def before_tool_call(self, input: Any) -> Any:
        return self.before_result

    def after_tool_result(self, input: Any) -> None:
        self.after.append(input)


def _results(rec: Recorder) -> list[tuple[str, str]]:
    return [(a.result.source, a.result.status) for a in rec.after]


@tool(input=Args)
def refuse(args: Args, ctx: ToolContext) -> Any:
    """Refuses on purpose: returns ctx.fail(...)."""
    return ctx.fail(f"out of stock: {args.q}")


class Pick(BaseModel):
    color: str = ""


picker = tool("picker", input=Pick, output=Pick)  # a client tool


def _answer(h: Any, call_id: str, chunk: dict[str, Any]) -> None:
    """What the service layer does for a client submission or a manual fulfilment."""
    for stored in h.store.messages:
        if any(p.get("toolCallId") == call_id for p in stored.message["parts"]):
            reducer = MessageReducer(stored.message)
            reducer.apply(chunk)
            stored.message = reducer.message
    h.store.actions[(h.run_id, call_id)]["status"] = "submitted"
    h.store.runs[h.run_id].status = "queued"


async def test_lc_138_execute_skip_reject_throw_sources() -> None:
    """LC-138: a backend execution is execute, a before_tool_call skip is skip, a reject is
    reject, a raising tool is throw (LC-139)."""
    for before, name, expected in (
        (None, "lookup", ("execute", "output-available")),
        (Skip("cached"), "lookup", ("skip", "output-available")),
        (Reject("no"), "lookup", ("reject", "output-error")),
        (None, "boom", ("throw", "output-error")),
    ):
        rec = Recorder(before)
        h = harness([ScriptedStep.call(name, {"q": "a"}), ScriptedStep.reply("ok")], parts=[rec])
        assert (await h.run()).status == "completed"
        assert _results(rec) == [expected], name


async def test_lc_139_a_returned_ctx_fail_is_source_fail() -> None:
    """LC-139: a tool that returns ctx.fail(...) fails the call deliberately: status
    output-error, source fail, its message model-visible and stored."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("refuse", {"q": "tea"}, id="r1"), ScriptedStep.reply("sorry")],
        parts=[rec],
        tools=[*ALL_TOOLS, refuse],
    )
    assert (await h.run()).status == "completed"
    assert _results(rec) == [("fail", "output-error")]
    assert rec.after[0].result.message == "out of stock: tea"
    [part] = [p for m in h.assistant() for p in m["parts"] if p.get("toolCallId") == "r1"]
    assert (part["state"], part["errorText"]) == ("output-error", "out of stock: tea")
    assert part["toolMetadata"] == {"pai": {"source": "fail"}}
    assert "out of stock: tea" in str(h.model.requests[1].messages)


async def test_lc_139_ctx_fail_without_hooks_is_stored_as_fail() -> None:
    """LC-139: the hook-free loop stores the same output-error, source fail."""
    h = harness(
        [ScriptedStep.call("refuse", {"q": "tea"}, id="r1"), ScriptedStep.reply("sorry")],
        tools=[refuse],
    )
    assert (await h.run()).status == "completed"
    [part] = [p for m in h.assistant() for p in m["parts"] if p.get("toolCallId") == "r1"]
    assert part["state"] == "output-error"
    assert part["toolMetadata"] == {"pai": {"source": "fail"}}


async def test_lc_137_lc_138_client_and_manual_results_keep_their_source() -> None:
    """LC-137, LC-138, LC-142: a client submission reaches after_tool_result as client, a
    trusted manual fulfilment as manual (both validated first), before the model sees it."""
    for source in ("client", "manual"):
        rec = Recorder()
        h = harness(
            [ScriptedStep.call("picker", {}, id="p1"), ScriptedStep.reply("thanks")],
            parts=[rec],
            tools=[picker],
        )
        assert (await h.run()).status == "waiting"
        _answer(
            h,
            "p1",
            {
                "type": "tool-output-available",
                "toolCallId": "p1",
                "output": {"color": "red"},
                "toolMetadata": {"pai": {"source": source}},
            },
        )
        assert (await h.run()).status == "completed"
        assert _results(rec) == [(source, "output-available")]
        [part] = [p for m in h.assistant() for p in m["parts"] if p.get("toolCallId") == "p1"]
        assert part["toolMetadata"] == {"pai": {"source": source}}


async def test_lc_138_an_approved_suspended_call_resumes_as_source_resume() -> None:
    """LC-138, LC-133, LC-140: nothing runs while the call waits; once approved it runs
    and after_tool_result sees source resume with the resume entry."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w1"), ScriptedStep.reply("done")],
        parts=[rec],
    )
    assert (await h.run()).status == "waiting"
    assert rec.after == []
    h.store.respond(h.run_id, "w1", approved=True)
    assert (await h.run()).status == "completed"
    assert _results(rec) == [("resume", "output-available")]
    assert rec.after[0].entry.type == "resume" and rec.after[0].entry.name == "wire"


async def test_lc_137_cancelled_waiting_calls_pass_after_tool_result_as_cancel() -> None:
    """LC-137, LC-148: after_step complete cancels a waiting call; its final result is
    seen as cancel."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w1")],
        parts=[rec, {"after_step": lambda i: Complete()}],
    )
    assert (await h.run()).status == "completed"
    assert _results(rec) == [("cancel", "output-error")]


async def test_lc_137_an_interrupted_approved_call_is_settled_as_recovery() -> None:
    """LC-137: an approved call whose execution had begun when its worker died is not run
    again (at most once): it settles as a recovery error that after_tool_result sees."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w1"), ScriptedStep.reply("done")],
        parts=[rec],
    )
    assert (await h.run()).status == "waiting"
    h.store.respond(h.run_id, "w1", approved=True)
    h.store.actions[(h.run_id, "w1")]["status"] = "executing"  # begun, then the crash
    assert (await h.run()).status == "completed"
    assert _results(rec) == [("recovery", "output-error")]


def test_lc_138_every_source_is_covered_here() -> None:
    """LC-138: the sources tested in this module are exactly ToolResultSource."""
    covered = {"execute", "skip", "reject", "throw", "fail", "client", "manual", "resume"}
    covered |= {"cancel", "recovery"}
    assert covered == set(typing.get_args(ToolResultSource))

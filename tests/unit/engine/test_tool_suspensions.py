"""Declared tool suspensions in the engine, on the in-memory store (docs/suspensions.md).

A tool declares ``suspends={name: AnswerModel}`` and returns ``ctx.suspend(name, payload)``:
the call waits as an ``input`` pending action, re-enters ``execute`` with the answer, may
suspend again, and only its final result passes after_tool_result (LC-132, LC-133, LC-140).
The ORM twins are in tests/integration/test_tool_suspensions.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import ScriptedStep, ToolContext, tool
from pai_agents.lifecycle import AgentLifecycle
from pai_agents.suspensions import Suspend
from tests.support.engine_harness import harness


class Order(BaseModel):
    order_id: str


class Address(BaseModel):
    street: str
    city: str


class Confirm(BaseModel):
    ok: bool


shipped: list[str] = []
entries: list[Any] = []


@tool(input=Order, suspends={"address": Address, "confirm": Confirm})
def ship(args: Order, ctx: ToolContext) -> dict[str, str]:
    """Ship an order after asking for the address and a confirmation."""
    entries.append((ctx.entry, tuple(ctx.suspend_history)))
    address = ctx.answer("address")
    if address is None:
        return ctx.suspend("address", payload={"prompt": f"Where should {args.order_id} go?"})
    confirm = ctx.answer("confirm")
    if confirm is None:
        return ctx.suspend("confirm", payload={"to": address.city})
    if not confirm.ok:
        return ctx.fail("cancelled by the person")
    shipped.append(args.order_id)
    return {"shipped": args.order_id, "to": address.city}


class Recorder(AgentLifecycle):
    def __init__(self) -> None:
        self.before: list[Any] = []
        self.after: list[Any] = []

    def before_tool_call(self, input: Any) -> Any:
        self.before.append(input)

    def after_tool_result(self, input: Any) -> Any:
        self.after.append(input)


@pytest.fixture(autouse=True)
def _clear() -> None:
    shipped.clear()
    entries.clear()


def _ship_harness(rec: Recorder) -> Any:
    return harness(
        [ScriptedStep.call("ship", {"order_id": "o-1"}, id="s1"), ScriptedStep.reply("done")],
        parts=[rec],
        tools=[ship],
    )


async def test_two_episode_collection_completes_once_and_hooks_see_the_history() -> None:
    """LC-132, LC-133, LC-140: two durable episodes of one call; after_tool_result runs once,
    for the final output, with the resume entry and both episodes."""
    rec = Recorder()
    h = _ship_harness(rec)
    assert (await h.run()).status == "waiting"
    first = h.store.actions[(h.run_id, "s1")]
    assert first["request"].kind == "input" and first["request"].suspension == "address"
    assert first["request"].input == {"prompt": "Where should o-1 go?"}
    assert first["request"].answer_schema["required"] == ["street", "city"]
    assert rec.after == []  # LC-140: a suspended call has no result yet
    assert rec.before[0].entry.type == "initial"

    h.store.answer(h.run_id, "s1", {"street": "1 Main St", "city": "Lyon"})
    assert (await h.run()).status == "waiting"
    second = h.store.actions[(h.run_id, "s1")]
    assert (second["request"].suspension, second["request"].sequence) == ("confirm", 1)
    assert rec.after == [] and shipped == []
    resumed = rec.before[1]
    assert resumed.entry.type == "resume" and resumed.entry.name == "ship"
    assert resumed.entry.suspension == "address"
    assert resumed.entry.resume == {"street": "1 Main St", "city": "Lyon"}
    assert resumed.entry.action["kind"] == "input"
    assert [e.name for e in resumed.suspend_history] == ["address"]

    h.store.answer(h.run_id, "s1", {"ok": True})
    assert (await h.run()).status == "completed"
    assert shipped == ["o-1"]
    [after] = rec.after
    assert after.result.source == "resume"
    assert after.result.output == {"shipped": "o-1", "to": "Lyon"}
    assert after.entry.suspension == "confirm"
    assert [(e.name, e.kind) for e in after.suspend_history] == [
        ("address", "input"),
        ("confirm", "input"),
    ]
    # ctx.entry / ctx.suspend_history: what execute saw on each of its three entries.
    assert [e[0] is None for e in entries] == [True, False, False]
    assert [len(e[1]) for e in entries] == [0, 1, 2]
    [part] = [p for p in h.messages()[-2]["parts"] if p.get("toolCallId") == "s1"]
    assert part["state"] == "output-available"


async def test_a_worker_dying_in_the_resumed_execute_does_not_run_it_again() -> None:
    """At most once: an answered episode marked executing whose worker died ends the call
    with a recovery error instead of re-entering execute."""
    rec = Recorder()
    h = _ship_harness(rec)
    assert (await h.run()).status == "waiting"
    h.store.answer(h.run_id, "s1", {"street": "x", "city": "y"})
    h.store.actions[(h.run_id, "s1")]["status"] = "executing"  # as a dead worker left it
    assert (await h.run()).status == "completed"
    [after] = rec.after
    assert after.result.source == "recovery" and after.result.status == "output-error"
    assert len(entries) == 1  # only the initial execution


def test_declaration_is_checked_when_the_tool_is_defined() -> None:
    """Names are checked, reserved kinds refused, answers must be pydantic models, and a
    tool without execute cannot suspend."""
    with pytest.raises(ValueError, match="reserved"):
        tool("t", input=Order, execute=lambda a: 1, suspends={"approval": Confirm})
    with pytest.raises(ValueError, match="letters"):
        tool("t", input=Order, execute=lambda a: 1, suspends={"a b": Confirm})
    with pytest.raises(TypeError, match="pydantic"):
        tool("t", input=Order, execute=lambda a: 1, suspends={"x": dict})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="without execute"):
        tool("t", input=Order, suspends={"x": Confirm})
    assert ship.manifest()["suspends"]["confirm"]["properties"]["ok"]["type"] == "boolean"


def test_ctx_suspend_checks_the_name_and_the_payload() -> None:
    ctx = ToolContext(
        tool_call_id="c",
        tool_name="ship",
        run_id="r",
        thread_id="t",
        identity={},
        runtime_context=None,
        signal=None,  # type: ignore[arg-type]
        suspends=ship.suspends,
    )
    assert ctx.suspend("address", payload={"a": 1}) == Suspend("address", {"a": 1})
    with pytest.raises(ValueError, match="declared: address, confirm"):
        ctx.suspend("phone")
    with pytest.raises(ValueError):
        ctx.suspend("address", payload={"bad": {1, 2}})
    assert ctx.answer("address") is None
    with pytest.raises(ValueError, match="no suspension"):
        ctx.answer("phone")


class Note(BaseModel):
    text: str


@tool(input=Order, suspends={"note": Note}, needs_approval=True)
def approved_note(args: Order, ctx: ToolContext) -> str:
    """Needs an approval, then asks for a note: the built-in kind and a declared one."""
    note = ctx.answer("note")
    if not isinstance(note, Note):
        return ctx.suspend("note", payload={"order": args.order_id})
    shipped.append(note.text)
    return f"noted {note.text}"


async def test_an_approved_call_may_then_suspend_for_data() -> None:
    """LC-133: approval and a declared suspension are episodes of one call, in order: the
    approval resumes the call, whose execute then asks for a note (episode 1)."""
    rec = Recorder()
    h = harness(
        [
            ScriptedStep.call("approved_note", {"order_id": "o-5"}, id="n1"),
            ScriptedStep.reply("ok"),
        ],
        parts=[rec],
        tools=[approved_note],
    )
    assert (await h.run()).status == "waiting"
    assert h.store.actions[(h.run_id, "n1")]["request"].kind == "approval"
    h.store.respond(h.run_id, "n1", approved=True)
    assert (await h.run()).status == "waiting"
    note = h.store.actions[(h.run_id, "n1")]["request"]
    assert (note.kind, note.suspension, note.sequence) == ("input", "note", 1)
    h.store.answer(h.run_id, "n1", {"text": "fragile"})
    assert (await h.run()).status == "completed"
    assert shipped == ["fragile"]
    [after] = rec.after
    assert after.result.output == "noted fragile" and after.entry.suspension == "note"
    assert [e.kind for e in after.suspend_history] == ["approval", "input"]


@tool(input=Order, suspends={"address": Address})
def undeclared(args: Order, ctx: ToolContext) -> Any:
    """Suspends under a name it did not declare."""
    return ctx.suspend("phone")


async def test_suspending_under_an_undeclared_name_is_a_model_visible_error() -> None:
    h = harness(
        [ScriptedStep.call("undeclared", {"order_id": "o"}, id="u1"), ScriptedStep.reply("ok")],
        tools=[undeclared],
    )
    assert (await h.run()).status == "completed"
    [part] = [p for p in h.messages()[-2]["parts"] if p.get("toolCallId") == "u1"]
    assert part["state"] == "output-error"
    assert part["errorText"] == "Tool undeclared failed (ValueError)."
    assert h.store.actions == {}


@tool(input=Order, suspends={"address": Address}, idempotent=True)
def again(args: Order, ctx: ToolContext) -> Any:
    """Idempotent: may run again after a crash."""
    entries.append(ctx.entry)
    address = ctx.answer("address")
    if not isinstance(address, Address):
        return ctx.suspend("address")
    return address.city


async def test_an_idempotent_tool_runs_again_with_the_same_entry_after_a_crash() -> None:
    h = harness(
        [ScriptedStep.call("again", {"order_id": "o"}, id="a1"), ScriptedStep.reply("ok")],
        tools=[again],
    )
    assert (await h.run()).status == "waiting"
    h.store.answer(h.run_id, "a1", {"street": "s", "city": "Rome"})
    h.store.actions[(h.run_id, "a1")]["status"] = "executing"  # as a dead worker left it
    assert (await h.run()).status == "completed"
    assert entries[-1] is not None and entries[-1].resume == {"street": "s", "city": "Rome"}
    [part] = [p for p in h.messages()[-2]["parts"] if p.get("toolCallId") == "a1"]
    assert part["output"] == "Rome"


def _guide_example() -> dict[str, Any]:
    """The first Python block of docs/suspensions.md, executed as a module."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "suspensions.md").read_text("utf-8")
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {"__name__": "suspensions_guide"}
    exec(compile(code, "docs/suspensions.md", "exec"), namespace)
    return namespace


async def test_the_guide_example_ships_once() -> None:
    """docs/suspensions.md's example: two answers, one shipment, the final output."""
    guide = _guide_example()
    h = harness(
        [ScriptedStep.call("ship", {"order_id": "o-9"}, id="g1"), ScriptedStep.reply("done")],
        tools=[guide["ship"]],
    )
    assert (await h.run()).status == "waiting"
    assert h.store.actions[(h.run_id, "g1")]["request"].input == {"prompt": "Where should o-9 go?"}
    h.store.answer(h.run_id, "g1", {"street": "5 Quai", "city": "Nantes"})
    assert (await h.run()).status == "waiting"
    h.store.answer(h.run_id, "g1", {"ok": True})
    assert (await h.run()).status == "completed"
    assert guide["shipments"] == ["o-9"]
    [part] = [p for p in h.messages()[-2]["parts"] if p.get("toolCallId") == "g1"]
    assert part["output"] == {"shipped": "o-9", "to": "5 Quai, Nantes"}


def test_a_typed_answer_must_name_the_declared_model() -> None:
    ctx = ToolContext(
        tool_call_id="c",
        tool_name="ship",
        run_id="r",
        thread_id="t",
        identity={},
        runtime_context=None,
        signal=None,  # type: ignore[arg-type]
        suspends=ship.suspends,
    )
    assert ctx.answer("address", Address) is None
    with pytest.raises(TypeError, match="answers Address, not Confirm"):
        ctx.answer("address", Confirm)

"""LC-069: prepare_run's ``input`` is the operation input that created or resumed the run
(it was None for every operation)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pai_agents import ScriptedStep, ScriptedToolCall, ToolContext, tool
from pai_agents.lifecycle import OperationInput
from tests.support.engine_harness import harness


async def test_lc_069_prepare_run_gets_the_send_input_then_the_resume_answers() -> None:
    """LC-069: a send's input names the operation, the client data and the user message it
    appended; the resume after an approval names the answered approval."""
    seen: list[Any] = []

    def prepare_run(input: Any) -> None:
        seen.append((input.input, input.latest_user_message))

    call = ScriptedToolCall(name="wire", input={"q": "pay"})
    h = harness(
        [ScriptedStep(tool_calls=[call]), ScriptedStep.reply("done")],
        parts=[{"prepare_run": prepare_run}],
    )
    assert (await h.run()).status == "waiting"
    sent, latest = seen[0]
    assert isinstance(sent, OperationInput)
    assert sent.operation == "send" and sent.message == latest and latest is not None
    assert sent.client_data == {} and sent.answers == ()

    [part] = [p for p in h.assistant()[0]["parts"] if p.get("toolCallId")]
    h.store.respond(h.run_id, part["toolCallId"], approved=True)
    assert (await h.run()).status == "completed"
    resumed, latest = seen[1]
    assert resumed.operation == "resume" and resumed.message is None and latest is None
    [answer] = resumed.answers
    assert answer["toolCallId"] == part["toolCallId"]
    assert answer["state"] == "approval-responded" and answer["approval"]["approved"] is True


class Address(BaseModel):
    city: str


@tool(input=Address, suspends={"address": Address})
def ship(args: Address, ctx: ToolContext) -> dict[str, str]:
    """Ship after asking a person for the address."""
    address = ctx.answer("address")
    if address is None:
        return ctx.suspend("address", payload={"prompt": "Where to?"})
    return {"to": address.city}


async def test_lc_069_a_resume_names_an_answered_input_suspension_once() -> None:
    """LC-069: a declared suspension's answer leaves the tool part input-available; the
    resume's input still names the call, with the suspension and the answer. The episodes
    prepare_run's input read are the ones the resume uses (LC-133: one read)."""
    seen: list[Any] = []
    reads: list[Any] = []

    def prepare_run(input: Any) -> None:
        seen.append(input.input)

    h = harness(
        [ScriptedStep.call("ship", {"city": "?"}, id="s1"), ScriptedStep.reply("done")],
        parts=[{"prepare_run": prepare_run}],
        tools=[ship],
    )
    assert (await h.run()).status == "waiting"
    h.store.answer(h.run_id, "s1", {"city": "Lyon"})
    history = h.store.suspend_history

    async def counted(lease: Any, *, tool_call_ids: Any) -> Any:
        reads.append(sorted(tool_call_ids))
        return await history(lease, tool_call_ids=tool_call_ids)

    h.store.suspend_history = counted  # type: ignore[method-assign]
    assert (await h.run()).status == "completed"
    [answer] = seen[1].answers
    assert answer["toolCallId"] == "s1" and answer["state"] == "input-available"
    assert (answer["suspension"], answer["answer"]) == ("address", {"city": "Lyon"})
    assert reads == [["s1"]]
    [part] = [p for p in h.assistant()[0]["parts"] if p.get("toolCallId") == "s1"]
    assert part["output"] == {"to": "Lyon"}

"""LC-069: prepare_run's ``input`` is the operation input that created or resumed the run
(it was None for every operation)."""

from __future__ import annotations

from typing import Any

from pai_agents import ScriptedStep, ScriptedToolCall
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

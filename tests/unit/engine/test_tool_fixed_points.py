"""MF-046: a schema-parsed tool output persisted in a message is a fixed point of its
schema; one that changes when parsed again is refused (an error the model sees). Tool inputs
are persisted as the model sent them (parsed once, LC-121), so no reparse applies to them."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, PlainSerializer

from pai_agents import ScriptedModel, ScriptedStep, ScriptedToolCall, define_agent, tool
from pai_agents.engine.memory import InMemoryThreadStore
from pai_agents.engine.runner import RunEngine
from pai_agents.tools import ToolError

Drifting = Annotated[int, PlainSerializer(lambda v: v + 1, return_type=int)]


class Args(BaseModel):
    q: str = ""


class Stable(BaseModel):
    n: int = 0


class DriftingOut(BaseModel):
    n: Drifting = 0


@tool(input=Args, output=DriftingOut)
def drifting_output(args: Args) -> DriftingOut:
    """Its output grows by one on every parse."""
    return DriftingOut(n=1)


@tool(input=Args, output=Stable)
def stable(args: Args) -> Stable:
    """A stable output."""
    return Stable(n=int("3"))


def test_mf_046_tool_outputs_must_be_fixed_points() -> None:
    """MF-046: serialize_output refuses an output that changes on reparse."""
    with pytest.raises(ToolError, match="MF-046"):
        drifting_output.serialize_output(DriftingOut(n=1))
    assert stable.serialize_output({"n": "3"}) == {"n": 3}


async def _run(tool_name: str, input: dict[str, Any]) -> list[dict[str, Any]]:
    model = ScriptedModel(
        steps=[
            ScriptedStep(tool_calls=[ScriptedToolCall(name=tool_name, input=input)]),
            ScriptedStep.reply("ok"),
        ]
    )
    agent = define_agent("mf046", instructions="x", model=model, tools=[drifting_output, stable])
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name="mf046")
    run_id = store.send(
        thread_id, {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    )
    claim = await store.claim_run(run_id, owner="w", lease_seconds=30)
    assert (await RunEngine(agent=agent, store=store).run_episode(claim)).status == "completed"
    return [p for m in store.thread_messages(thread_id) for p in m["parts"] if p.get("toolCallId")]


async def test_mf_046_a_drifting_output_is_not_persisted() -> None:
    """MF-046: in a run, the call ends as an error the model sees; nothing unstable is
    stored as the call's output."""
    [part] = await _run("drifting_output", {"q": "x"})
    assert part["state"] in ("output-error",), part
    assert "output" not in part

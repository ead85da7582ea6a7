"""The agents of the golden scenarios (tests/golden): deterministic, and quick.

Every model is scripted and answers from the request alone, tool call ids are fixed, and
nothing waits on a clock. Where a scenario needs the run to stop at a known point (a
cancel mid-stream, a worker that dies inside a tool call), it stops there until the test
acts, never for a fixed time:

* ``golden_hang`` streams three words, then waits for the run's cancel signal; once
  cancelled it also waits for the gate file ``<run id>.cancel`` (in ``$PAI_GOLDEN_GATES``),
  so the run's own end comes after everything the cancel request published.
* ``golden_crash``'s tool publishes a transient ToolData record, then never returns: the
  test kills the server that runs it. The recovered attempt settles the call as a recovery
  error (the tool is not idempotent) and answers.
* ``golden_lifecycle`` overrides every lifecycle phase, each with an effect the recording
  shows (the settings the model got, changed tool input and output, metadata, a UI data part,
  shouted text).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pai_agents import (
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    Tool,
    ToolContext,
    define_agent,
    tool,
)
from pai_agents.abort import Aborted, AbortSignal
from pai_agents.agent import AgentBehaviorInput
from pai_agents.models.base import StepStreamPart
from pai_agents.models.scripted import Responder, last_user_text
from tests.support.agents import add, ask_user, transfer
from tests.support.golden_lifecycle import EveryPhase, GoldenNote

__all__ = [
    "HANG_WORDS",
    "golden_approval",
    "golden_client",
    "golden_crash",
    "golden_hang",
    "golden_lifecycle",
    "golden_plain",
    "golden_tools",
]

GATES_ENV = "PAI_GOLDEN_GATES"
HANG_WORDS = ("Working ", "on ", "it ")
# A run that is never cancelled (a broken test) still ends, instead of holding the server.
_HANG_LIMIT = 60.0


def _scripted(respond: Responder, name: str) -> ScriptedModel:
    return ScriptedModel(respond=respond, model_name=name, record_requests=False)


def _last(request: ModelRequest) -> dict[str, Any]:
    return dict(request.messages[-1]) if request.messages else {"role": "user", "content": []}


def _tool_output(request: ModelRequest) -> Any:
    """The output of the latest tool result the model was given."""
    for part in _last(request).get("content", []):
        if part.get("type") == "tool-result":
            return part.get("output")
    return None


# -- plain answer (also the regenerate scenario) ---------------------------------------------


def _plain(request: ModelRequest) -> ScriptedStep:
    text = last_user_text(request)
    return ScriptedStep(
        reasoning="A short, friendly reply.",
        text=f"You said: {text} Here is a plain answer.",
        chunk_size=12,
    )


golden_plain = define_agent(
    "golden_plain",
    instructions="Answer plainly.",
    model=_scripted(_plain, "golden-plain"),
)


# -- tool round trip, approval, client tool ---------------------------------------------------


def call_then_answer(call: ScriptedToolCall, text: str, answer: str) -> Responder:
    """Step 0 says ``text`` and makes ``call``; the next step formats the tool's output (as
    the model got it, JSON) into ``answer``."""

    def respond(request: ModelRequest) -> ScriptedStep:
        if _last(request)["role"] == "tool":
            output = json.dumps(_tool_output(request))
            return ScriptedStep(text=answer.format(output), chunk_size=8)
        return ScriptedStep(text=text, tool_calls=[call], chunk_size=8)

    return respond


def tool_agent(name: str, tool: Tool, call: dict[str, Any], text: str, answer: str) -> Any:
    """An agent whose model calls ``tool`` once (``call``: its input and id), then answers."""
    scripted = ScriptedToolCall(name=tool.name, input=call["input"], id=call["id"])
    return define_agent(
        name,
        instructions=f"Use {tool.name}.",
        model=_scripted(call_then_answer(scripted, text, answer), name.replace("_", "-")),
        tools=[tool],
    )


golden_tools = tool_agent(
    "golden_tools",
    add,
    {"input": {"a": 2, "b": 40}, "id": "call_add"},
    "Let me add that.",
    "The sum is {}.",
)
# transfer needs a person's approval; ask_user has no execute: a client answers it.
golden_approval = tool_agent(
    "golden_approval",
    transfer,
    {"input": {"amount": 42}, "id": "call_transfer"},
    "This needs your approval.",
    "Done: {}.",
)
golden_client = tool_agent(
    "golden_client",
    ask_user,
    {"input": {"question": "Which one?"}, "id": "call_ask"},
    "I need to ask you.",
    "You chose {}.",
)


# -- cancel mid-stream ----------------------------------------------------------------------------


def gate_path(name: str) -> Path | None:
    directory = os.environ.get(GATES_ENV)
    return Path(directory) / name if directory else None


async def wait_for_gate(name: str, limit: float = _HANG_LIMIT) -> None:
    """Until the test creates the gate file ``name`` (at once without a gate directory)."""
    path = gate_path(name)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while path is not None and not path.exists() and loop.time() < deadline:
        await asyncio.sleep(0.005)


class HangingModel:
    """Streams :data:`HANG_WORDS`, then hangs until the run is cancelled."""

    provider = "scripted"
    model_id = "golden-hang"

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        yield {"type": "response-metadata", "id": "golden-hang", "modelId": self.model_id}
        yield {"type": "text-start", "id": "t"}
        for word in HANG_WORDS:
            yield {"type": "text-delta", "id": "t", "delta": word}
        if signal is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(signal.wait(), _HANG_LIMIT)
        if signal is not None and signal.aborted:
            await wait_for_gate(f"{self.run_id}.cancel")
            raise Aborted(signal.reason or "aborted")
        yield {"type": "text-end", "id": "t"}
        yield {"type": "finish", "finishReason": "stop", "usage": {}}


def _hanging(behavior: AgentBehaviorInput) -> HangingModel:
    return HangingModel(behavior.run_id)


golden_hang = define_agent("golden_hang", instructions="Take your time.", model=_hanging)


# -- crash recovery ------------------------------------------------------------------------------


class WorkInput(BaseModel):
    job: str


@tool(input=WorkInput)
async def slow_work(args: WorkInput, ctx: ToolContext) -> dict[str, Any]:
    """Work that never finishes in the first worker (the test kills it meanwhile)."""
    await ctx.data.write("progress", {"job": args.job, "pct": 50}, id="main", transient=True)
    await asyncio.Event().wait()
    return {"done": args.job}


golden_crash = tool_agent(
    "golden_crash",
    slow_work,
    {"input": {"job": "report"}, "id": "call_work"},
    "Starting the work.",
    "The work was interrupted; try again later.",
)


# -- every lifecycle phase -------------------------------------------------------------------------


def _lifecycle(request: ModelRequest) -> ScriptedStep:
    settings = json.dumps(dict(request.settings), sort_keys=True)
    seen = f"{len(request.messages)} messages, settings {settings}"
    if _last(request)["role"] == "tool":
        text = f"The sum is {json.dumps(_tool_output(request))}; I saw {seen}."
        return ScriptedStep(text=text, chunk_size=10)
    call = ScriptedToolCall(name="add", input={"a": 2, "b": 3}, id="call_lc_add")
    return ScriptedStep(text=f"Adding; I saw {seen}.", tool_calls=[call], chunk_size=10)


golden_lifecycle = define_agent(
    "golden_lifecycle",
    instructions="Add with every hook.",
    model=_scripted(_lifecycle, "golden-lifecycle"),
    tools=[add],
    lifecycle=EveryPhase(),
    ui_data_schemas={"golden": GoldenNote},
)

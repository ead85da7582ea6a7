"""Agents that call agents (docs/subagents.md), for the ORM and worker tests of sub-agents
(tests/integration/test_subagents*.py).

``planner`` reads ``delegate <topic> <path>`` and calls its ``searcher`` tool (a sub-agent
on a hidden thread) with the task ``<topic> <path>``; ``own_planner`` does the same with
the child on a thread of its own. ``searcher`` calls ``dig``, which appends ``dig <topic>``
to ``path`` (a topic starting with ``slow`` then sleeps, so a test can kill the worker mid
call) and ``dug`` when done, then answers ``Found: <topic>``. ``recursor`` delegates to
itself until the depth limit answers its call with an error.
After tool results every agent answers ``Tool results: <json>``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pai_agents import (
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    define_agent,
    subagent,
    tool,
)
from pai_agents.lifecycle import AgentLifecycle
from pai_agents.lifecycle.inputs import BeforeToolCallInput, PrepareRunInput
from pai_agents.models.scripted import last_user_text

__all__ = ["AGENTS", "own_planner", "planner", "recursor", "searcher"]

SLOW_SECONDS = 20.0


class DigInput(BaseModel):
    topic: str
    path: str


def _append(path: str, line: str) -> None:
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@tool(input=DigInput)
def dig(args: DigInput) -> str:
    """Dig through the archive for a topic."""
    _append(args.path, f"dig {args.topic}")
    if args.topic.startswith("slow"):
        time.sleep(SLOW_SECONDS)  # long enough for a test to kill the worker here
    _append(args.path, "dug")
    return f"3 papers on {args.topic}"


def _tool_results(request: ModelRequest) -> ScriptedStep | None:
    last = request.messages[-1] if request.messages else None
    if last is not None and last["role"] == "tool":
        outputs = [p.get("output") for p in last["content"] if p.get("type") == "tool-result"]
        return ScriptedStep(text=f"Tool results: {json.dumps(outputs)}")
    return None


def _searcher(request: ModelRequest) -> ScriptedStep:
    done = _tool_results(request)
    if done is not None:
        return ScriptedStep(
            text=f"Found: {done.text}",
            usage={"inputTokens": 7, "outputTokens": 5, "totalTokens": 12},
        )
    words = last_user_text(request).split()
    if len(words) == 2:
        return ScriptedStep(
            tool_calls=[ScriptedToolCall(name="dig", input={"topic": words[0], "path": words[1]})],
            usage={"inputTokens": 11, "outputTokens": 3, "totalTokens": 14},
        )
    return ScriptedStep(text="Give me '<topic> <path>'.")


searcher = define_agent(
    "searcher",
    instructions="Searches the archive.",
    model=ScriptedModel(respond=_searcher, record_requests=False),
    tools=[dig],
)


def _delegating(tool_name: str) -> Callable[[ModelRequest], ScriptedStep]:
    def respond(request: ModelRequest) -> ScriptedStep:
        done = _tool_results(request)
        if done is not None:
            return done
        words = last_user_text(request).split()
        if len(words) == 3 and words[0] == "delegate":
            task = f"{words[1]} {words[2]}"
            return ScriptedStep(tool_calls=[ScriptedToolCall(name=tool_name, input={"task": task})])
        return ScriptedStep(text="Say 'delegate <topic> <path>'.")

    return respond


class SeesSources(AgentLifecycle):
    """Records the source each tool hook saw (ToolInfo.source) and the answers each resume
    of the run was given (prepare_run's ``input.answers``, LC-069)."""

    seen: list[str] = []
    answers: list[Any] = []

    def prepare_run(self, input: PrepareRunInput) -> None:
        if input.input is not None and input.input.operation == "resume":
            SeesSources.answers.append(input.input.answers)

    def before_tool_call(self, input: BeforeToolCallInput) -> None:
        SeesSources.seen.append(input.tool.source)


planner = define_agent(
    "planner",
    instructions="Delegates research.",
    model=ScriptedModel(respond=_delegating("searcher"), record_requests=False),
    tools=[subagent(searcher, description="Search the archive for a topic.")],
    lifecycle=SeesSources(),
)

own_planner = define_agent(
    "own_planner",
    instructions="Delegates research on a thread of its own.",
    model=ScriptedModel(respond=_delegating("research"), record_requests=False),
    tools=[subagent("searcher", name="research", description="Research a topic.", thread="own")],
)


def _recursor(request: ModelRequest) -> ScriptedStep:
    done = _tool_results(request)
    if done is not None:
        return done
    return ScriptedStep(tool_calls=[ScriptedToolCall(name="recursor", input={"task": "again"})])


recursor = define_agent(
    "recursor",
    instructions="Delegates to itself.",
    model=ScriptedModel(respond=_recursor, record_requests=False),
    tools=[subagent("recursor", description="Ask yourself.")],
)

AGENTS = {a.name: a for a in (planner, own_planner, searcher, recursor)}

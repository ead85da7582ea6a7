"""Agents for the durable-run acceptance tests (tests/integration/test_durable_*.py).

They run in Celery worker processes as well as in the test process, so everything a test
needs to observe leaves the process: tools append lines to a file named in their input (a
side-effect counter), and answers spell out what the model saw in its request.

``durable`` reads the last user text:

* ``stream <seconds>``: a plain answer streamed over about that many seconds;
* ``fail <seconds>``: the same, then the model fails (a provider error mid-stream);
* ``tool <seconds> <path>``: calls ``slow_tool``, which appends ``start`` to ``path``, sleeps,
  then appends ``end``; the next step answers with what the tool returned;
* anything else: ``Echo: <text> (answer <n>; context answers: [<ns>])``, fast. ``n`` is a
  per-process serial, ``ns`` the serials of the earlier answers in the request's context.

``approver``: ``transfer <amount> <path>`` calls ``transfer`` (needs approval; appends a line to
``path`` when it executes); ``color`` calls the client tool ``pick_color``. After a tool result
it answers ``Tool results: <json of the tool results it was given>``.

``remote``: a real :class:`OpenAIChatModel` against ``PAI_TEST_OPENAI_BASE_URL`` (the fake
OpenAI server of the test process).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pai_agents import (
    AgentBehaviorInput,
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    define_agent,
    tool,
)
from pai_agents.models import OpenAIChatModel

__all__ = ["approver", "durable", "remote"]

STREAM_DELAY = 0.05
STREAM_CHUNK = 4
_serials = itertools.count(1)
_ANSWER_SERIAL = re.compile(r"\(answer (\d+);")


def last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    return ""


def _assistant_texts(request: ModelRequest) -> list[str]:
    texts = []
    for message in request.messages:
        if message["role"] != "assistant":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.append("".join(p.get("text", "") for p in content if p.get("type") == "text"))
    return texts


def tool_results(request: ModelRequest) -> list[Any]:
    """The outputs of the trailing tool message (what the model is told the tools returned)."""
    last = request.messages[-1] if request.messages else None
    if last is None or last["role"] != "tool":
        return []
    return [p.get("output") for p in last["content"] if p.get("type") == "tool-result"]


def _append(path: str, line: str) -> None:
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


# -- durable ------------------------------------------------------------------------------------


class SlowInput(BaseModel):
    seconds: float
    path: str


@tool(input=SlowInput)
async def slow_tool(args: SlowInput) -> dict[str, Any]:
    """Sleep, recording start and end in a file (a side effect the test can count)."""
    _append(args.path, f"start {os.getpid()}")
    await asyncio.sleep(args.seconds)
    _append(args.path, f"end {os.getpid()}")
    return {"slept": args.seconds}


def stream_text(seconds: float) -> str:
    pieces = max(1, int(seconds / STREAM_DELAY))
    words = ("lorem", "ipsum", "dolor", "sitam")
    return "".join(words[i % len(words)][:STREAM_CHUNK] for i in range(pieces))


def _durable(request: ModelRequest) -> ScriptedStep:
    if request.messages and request.messages[-1]["role"] == "tool":
        return ScriptedStep(text=f"Tool results: {json.dumps(tool_results(request))}")
    text = last_user_text(request).strip()
    words = text.split()
    if len(words) == 2 and words[0] == "stream":
        return ScriptedStep(
            text=stream_text(float(words[1])), chunk_size=STREAM_CHUNK, delay=STREAM_DELAY
        )
    if len(words) == 2 and words[0] == "fail":
        return ScriptedStep(
            text=stream_text(float(words[1])),
            chunk_size=STREAM_CHUNK,
            delay=STREAM_DELAY,
            fail_with=RuntimeError("the provider broke mid-stream"),
        )
    if len(words) == 3 and words[0] == "tool":
        return ScriptedStep(
            text="Running the slow tool.",
            tool_calls=[
                ScriptedToolCall(
                    name="slow_tool", input={"seconds": float(words[1]), "path": words[2]}
                )
            ],
        )
    seen = [m.group(1) for t in _assistant_texts(request) if (m := _ANSWER_SERIAL.search(t))]
    return ScriptedStep(
        text=f"Echo: {text} (answer {next(_serials)}; context answers: [{','.join(seen)}])"
    )


durable = define_agent(
    "durable",
    instructions="Durable-run test agent.",
    model=ScriptedModel(respond=_durable, record_requests=False),
    tools=[slow_tool],
)


# -- approver -----------------------------------------------------------------------------------


class TransferInput(BaseModel):
    amount: int
    path: str


@tool(input=TransferInput, needs_approval=True)
def transfer(args: TransferInput) -> dict[str, Any]:
    """Send money (a person approves every call)."""
    _append(args.path, f"transfer {args.amount}")
    return {"sent": args.amount}


class ColorInput(BaseModel):
    question: str


# No execute: the client answers it.
pick_color = tool("pick_color", input=ColorInput, description="Ask the user for a color.")


def _approver(request: ModelRequest) -> ScriptedStep:
    if request.messages and request.messages[-1]["role"] == "tool":
        return ScriptedStep(text=f"Tool results: {json.dumps(tool_results(request))}")
    words = last_user_text(request).split()
    if words and words[0] == "color":
        return ScriptedStep(
            tool_calls=[ScriptedToolCall(name="pick_color", input={"question": "Which color?"})]
        )
    if len(words) == 3 and words[0] == "transfer":
        return ScriptedStep(
            text="I will transfer it once approved.",
            tool_calls=[
                ScriptedToolCall(name="transfer", input={"amount": int(words[1]), "path": words[2]})
            ],
        )
    return ScriptedStep(text="Say 'transfer <amount> <path>' or 'color'.")


approver = define_agent(
    "approver",
    instructions="Approval test agent.",
    model=ScriptedModel(respond=_approver, record_requests=False),
    tools=[transfer, pick_color],
)


# -- remote -------------------------------------------------------------------------------------


@cache
def _openai_model(base_url: str) -> OpenAIChatModel:
    return OpenAIChatModel(model="fake-model", base_url=base_url, max_retries=0, timeout=30)


def _remote_model(behavior: AgentBehaviorInput) -> OpenAIChatModel:
    return _openai_model(os.environ["PAI_TEST_OPENAI_BASE_URL"])


remote = define_agent("remote", instructions="Be brief.", model=_remote_model)

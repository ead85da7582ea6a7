"""Agents for tests that talk to a real server: deterministic, and slow when asked.

``slow`` streams reasoning then text, one small delta every ``DELAY`` seconds, so a generation
lasts about a second (``long`` in the message makes it ~3 s): long enough to reconnect or
reload mid-generation. ``toolbox`` exercises every tool state the engine produces.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pai_agents import (
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    ToolError,
    define_agent,
    tool,
)
from pai_agents.models.scripted import last_user_text

__all__ = ["ANSWER_FILLER", "slow", "toolbox"]

DELAY = 0.02
ANSWER_FILLER = (
    "Here is a considered answer, streamed in small pieces so that clients can watch it "
    "arrive, disconnect in the middle, and come back to exactly the same text."
)


def slow_answer(text: str) -> str:
    repeat = 3 if "long" in text else 1
    return f"You said: {text}. " + " ".join([ANSWER_FILLER] * repeat)


def _slow(request: ModelRequest) -> ScriptedStep:
    text = last_user_text(request)
    return ScriptedStep(
        reasoning=f"The user wrote {len(text)} characters.",
        text=slow_answer(text),
        chunk_size=4,
        delay=DELAY,
    )


slow = define_agent(
    "slow",
    instructions="Answer slowly.",
    model=ScriptedModel(respond=_slow, record_requests=False),
)


class AddInput(BaseModel):
    a: int
    b: int


@tool(input=AddInput)
def add(args: AddInput) -> int:
    """Add two integers."""
    return args.a + args.b


@tool(input=AddInput)
def boom(args: AddInput) -> int:
    """Always fails."""
    raise ToolError(f"cannot boom {args.a} and {args.b}")


class AskInput(BaseModel):
    question: str


class TransferInput(BaseModel):
    amount: int


@tool(input=TransferInput, needs_approval=True)
def transfer(args: TransferInput) -> dict[str, Any]:
    """Move money (a human approves each call)."""
    return {"transferred": args.amount}


# No execute: the client answers it, and the run waits.
ask_user = tool("ask_user", input=AskInput, description="Ask the user a question.")


def _toolbox(request: ModelRequest) -> ScriptedStep:
    last: dict[str, Any] = request.messages[-1] if request.messages else {"role": "user"}
    if last["role"] == "tool":
        return ScriptedStep(text="All tools have reported back.", delay=DELAY / 4)
    if "approval" in last_user_text(request):
        return ScriptedStep(
            text="This needs your approval.",
            tool_calls=[ScriptedToolCall(name="transfer", input={"amount": 42})],
        )
    if "ask" in last_user_text(request):
        return ScriptedStep(
            text="I need to ask you something.",
            tool_calls=[ScriptedToolCall(name="ask_user", input={"question": "Which one?"})],
        )
    return ScriptedStep(
        reasoning="Let me use every tool.",
        text="Calling tools now.",
        delay=DELAY / 4,
        tool_calls=[
            ScriptedToolCall(name="add", input={"a": 2, "b": 40}),
            ScriptedToolCall(name="boom", input={"a": 1, "b": 2}),
            ScriptedToolCall(name="add", input={"a": "two", "b": 1}),
            ScriptedToolCall(name="nope", input={"x": 1}),
        ],
    )


toolbox = define_agent(
    "toolbox",
    instructions="Use tools.",
    model=ScriptedModel(respond=_toolbox, record_requests=False),
    tools=[add, boom, ask_user, transfer],
)

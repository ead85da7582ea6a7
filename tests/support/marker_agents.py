"""An agent whose runs end the ways a real model server's limits make them end.

``markers`` answers a message containing ``long`` with a step cut by the output token
limit (finish reason ``length``); any other message with a tool call in every step, and it
has ``max_steps=1``, so the run stops at its step limit. The chat page marks both.
"""

from __future__ import annotations

from pydantic import BaseModel

from pai_agents import (
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    define_agent,
    tool,
)
from pai_agents.models.scripted import last_user_text

__all__ = ["markers"]


class NoteInput(BaseModel):
    note: str


@tool(input=NoteInput)
def jot(args: NoteInput) -> str:
    """Write a note down."""
    return f"noted: {args.note}"


def _markers(request: ModelRequest) -> ScriptedStep:
    if "long" in last_user_text(request):
        return ScriptedStep(
            text="This answer goes on and on until it is cut", finish_reason="length"
        )
    return ScriptedStep(
        text="Writing a note first.",
        tool_calls=[ScriptedToolCall(name="jot", input={"note": "one more step"})],
    )


markers = define_agent(
    "markers",
    instructions="Hit the limits.",
    model=ScriptedModel(respond=_markers, record_requests=False),
    tools=[jot],
    max_steps=1,
)

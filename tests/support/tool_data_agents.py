"""A test agent whose tool writes ToolData, for server tests (``reporter``).

The user message names a file; ``report`` writes a durable progress record and a transient
preview, then waits (up to 10 s) until the file exists, so a test can look at the thread
while the tool runs, then writes its final progress and returns.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel

from pai_agents import (
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    ToolContext,
    define_agent,
    tool,
)

__all__ = ["reporter"]


class ReportInput(BaseModel):
    wait_for: str = ""


@tool(input=ReportInput)
async def report(args: ReportInput, ctx: ToolContext) -> dict[str, Any]:
    """Report progress while working."""
    await ctx.data.write("progress", {"pct": 10}, id="main")
    await ctx.data.write("preview", {"draft": "first lines"}, id="live", transient=True)
    for _ in range(500):
        if not args.wait_for or os.path.exists(args.wait_for):
            break
        await asyncio.sleep(0.02)
    await ctx.data.write("progress", {"pct": 100}, id="main")
    await ctx.data.write("log", "finished")
    return {"done": True}


def _respond(request: ModelRequest) -> ScriptedStep:
    last = request.messages[-1]
    if last["role"] == "tool":
        return ScriptedStep(text="Reported.")
    text = " ".join(p.get("text", "") for p in last["content"] if p.get("type") == "text")
    path = text.split("report ", 1)[-1].strip() if "report " in text else ""
    # A call id per call of the thread (c1, c2, ...): a run that calls again after steered
    # input has distinct calls, as a real model's.
    calls = sum(1 for m in request.messages if m["role"] == "tool")
    call = ScriptedToolCall(name="report", input={"wait_for": path}, id=f"c{calls + 1}")
    return ScriptedStep(tool_calls=[call])


reporter = define_agent(
    "reporter",
    instructions="Report.",
    model=ScriptedModel(respond=_respond, record_requests=False),
    tools=[report],
)

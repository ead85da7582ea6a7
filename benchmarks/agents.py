"""The benchmark agents: zero-latency scripted models, so only the runtime's cost shows.

``w1_agent`` is workload W1 exactly: step 1 calls ``lookup(q="x")``, the tool returns
``{"answer": 42}``, step 2 streams 100 text deltas of 4 characters. ``w2_agent`` answers in
one step with the same 100 deltas. Both models are stateless responders (not step queues)
so one agent instance serves any number of runs, and they record no requests (no growth).
The responders are ``async def``: a sync responder would cost a thread hop per step, which
belongs to the scripted model, not to the runtime being measured.

``stream_agent`` (W4, W5) streams paced deltas, each carrying the time it was due and the
time the model yielded it (:class:`StampedModel`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator

from pydantic import BaseModel

from pai_agents import ModelRequest, ScriptedModel, ScriptedStep, define_agent, tool
from pai_agents.abort import Aborted, AbortSignal
from pai_agents.models.base import StepStreamPart

__all__ = [
    "ANSWER_TEXT",
    "DELTAS",
    "DELTA_CHARS",
    "STAMP",
    "StampedModel",
    "lookup",
    "stream_agent",
    "stream_request",
    "w1_agent",
    "w2_agent",
]

DELTAS = 100
DELTA_CHARS = 4
# 100 deltas of exactly 4 characters ("abc " repeated reads like words, splits cleanly).
ANSWER_TEXT = "abc " * DELTAS


class LookupInput(BaseModel):
    q: str


@tool(input=LookupInput)
async def lookup(args: LookupInput) -> dict[str, int]:
    """Look something up. Async, so the tool itself costs no thread hop: only the runtime's."""
    return {"answer": 42}


async def _tool_round_trip(request: ModelRequest) -> ScriptedStep:
    last = request.messages[-1] if request.messages else {"role": "user"}
    if last["role"] == "tool":
        return ScriptedStep.reply(ANSWER_TEXT, chunk_size=DELTA_CHARS)
    return ScriptedStep.call("lookup", {"q": "x"})


async def _one_step(request: ModelRequest) -> ScriptedStep:
    return ScriptedStep.reply(ANSWER_TEXT, chunk_size=DELTA_CHARS)


w1_agent = define_agent(
    "bench_w1",
    instructions="Benchmark agent: look it up, then answer.",
    model=ScriptedModel(respond=_tool_round_trip, model_name="bench-w1", record_requests=False),
    tools=[lookup],
)

w2_agent = define_agent(
    "bench_w2",
    instructions="Benchmark agent: answer in one step.",
    model=ScriptedModel(respond=_one_step, model_name="bench-w2", record_requests=False),
)


# -- W4/W5: paced, time-stamped deltas ----------------------------------------------------

# One text delta: "<scheduled_ns|yielded_ns> " (CLOCK_REALTIME, shared by every process on
# the machine), so a websocket client in another process measures its own receive time
# against both. ~42 characters: a delta the size of a few tokens.
STAMP = re.compile(r"<(\d+)\|(\d+)>")
_PARAMS = re.compile(r"(deltas|every|start)=(\d+)")


def stream_request(*, deltas: int, every_ms: int, start_ns: int = 0) -> str:
    """The user text that asks :class:`StampedModel` for ``deltas`` deltas, one every
    ``every_ms`` milliseconds, the first at ``start_ns`` (``time.time_ns()``; 0 = at once)."""
    return f"bench-stream deltas={deltas} every={every_ms} start={start_ns}"


def _last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    return ""


class StampedModel:
    """A provider stand-in that streams like a remote model: deltas due on a fixed schedule
    (as tokens arriving on a socket would be), each stamped when due and when yielded.

    The schedule is absolute (``start + i * every``): when the worker's loop falls behind,
    overdue deltas are yielded at once, and ``yielded - scheduled`` shows the lag.
    """

    provider = "scripted"
    model_id = "bench-stream"

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        params = {k: int(v) for k, v in _PARAMS.findall(_last_user_text(request))}
        deltas, every = params.get("deltas", 100), params.get("every", 25) * 1_000_000
        start = max(params.get("start", 0), time.time_ns())
        yield {"type": "response-metadata", "id": "bench-stream", "modelId": self.model_id}
        yield {"type": "text-start", "id": "t"}
        for i in range(deltas):
            due = start + i * every
            wait = due - time.time_ns()
            if wait > 0:
                await asyncio.sleep(wait / 1e9)
            if signal is not None and signal.aborted:
                raise Aborted(signal.reason or "aborted")
            yield {"type": "text-delta", "id": "t", "delta": f"<{due}|{time.time_ns()}> "}
        yield {"type": "text-end", "id": "t"}
        usage = {"inputTokens": 8, "outputTokens": deltas * 10, "totalTokens": 8 + deltas * 10}
        yield {"type": "finish", "finishReason": "stop", "usage": usage}


stream_agent = define_agent(
    "bench_stream",
    instructions="Benchmark agent: stream paced, time-stamped deltas.",
    model=StampedModel(),
)

"""The benchmark agents: zero-latency scripted models, so only the runtime's cost shows.

``w1_agent`` is workload W1 exactly: step 1 calls ``lookup(q="x")``, the tool returns
``{"answer": 42}``, step 2 streams 100 text deltas of 4 characters. ``w2_agent`` answers in
one step with the same 100 deltas. Both models are stateless responders (not step queues)
so one agent instance serves any number of runs, and they record no requests (no growth).
The responders are ``async def``: a sync responder would cost a thread hop per step, which
belongs to the scripted model, not to the runtime being measured.

``stream_agent`` (W4, W5) streams paced deltas, each carrying the time it was due and the
time the model yielded it (:class:`StampedModel`).

``w1_lifecycle_agent`` (W1L) is ``w1_agent`` with :class:`NoOpLifecycle`, every phase
overridden and changing nothing; ``ttft_agent`` (TTFT) answers with one delta carrying the
time its model was asked (:class:`FirstTokenModel`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Sequence

from pydantic import BaseModel

from pai_agents import ModelRequest, ScriptedModel, ScriptedStep, define_agent, tool
from pai_agents.abort import Aborted, AbortSignal
from pai_agents.lifecycle import (
    AfterStepInput,
    AfterToolResultInput,
    AgentLifecycle,
    BeforeToolCallInput,
    HistoryRewrittenInput,
    PrepareHistoryRewriteInput,
    PrepareModelStepInput,
    PrepareRunInput,
    ResolveModelContextInput,
    RunFinishedInput,
    TransformStepStreamInput,
)
from pai_agents.lifecycle.hooks import ContextNext, ModelCallNext
from pai_agents.lifecycle.inputs import StepStream
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.lifecycle.streams import ModelStepStreamResult
from pai_agents.models.base import ModelMessage, StepStreamPart

__all__ = [
    "ANSWER_TEXT",
    "DELTAS",
    "DELTA_CHARS",
    "FIRST_TOKEN",
    "STAMP",
    "FirstTokenModel",
    "NoOpLifecycle",
    "StampedModel",
    "first_token_stamp",
    "lookup",
    "stream_agent",
    "stream_request",
    "ttft_agent",
    "w1_agent",
    "w1_lifecycle_agent",
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


class NoOpLifecycle(AgentLifecycle):
    """Every phase of ``PHASES`` overridden, none changing anything: what the hooks
    themselves cost. ``async def``, so no hook pays a worker-thread hop (a ``def`` hook
    would, by design: it may block)."""

    async def prepare_run(self, input: PrepareRunInput) -> None:
        return None

    async def resolve_model_context(
        self, input: ResolveModelContextInput, next: ContextNext
    ) -> Sequence[ModelMessage]:
        return await next()

    async def prepare_model_step(self, input: PrepareModelStepInput) -> None:
        return None

    async def around_model_call(
        self, input: ModelStepRequest, next: ModelCallNext
    ) -> ModelStepStreamResult:
        return await next()

    async def transform_step_stream(self, input: TransformStepStreamInput) -> StepStream:
        return input.stream

    async def before_tool_call(self, input: BeforeToolCallInput) -> None:
        return None

    async def after_tool_result(self, input: AfterToolResultInput) -> None:
        return None

    async def after_step(self, input: AfterStepInput) -> None:
        return None

    async def run_finished(self, input: RunFinishedInput) -> None:
        return None

    async def prepare_history_rewrite(self, input: PrepareHistoryRewriteInput) -> None:
        return None

    async def history_rewritten(self, input: HistoryRewrittenInput) -> None:
        return None


w1_lifecycle_agent = define_agent(
    "bench_w1_lifecycle",
    instructions=w1_agent.instructions,
    model=ScriptedModel(respond=_tool_round_trip, model_name="bench-w1", record_requests=False),
    tools=[lookup],
    lifecycle=NoOpLifecycle(),
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


# -- TTFT: when the model was asked -------------------------------------------------------

# The one text delta of :class:`FirstTokenModel`: "<first-token NS>", NS = time.time_ns()
# when the runtime opened the model's stream.
FIRST_TOKEN = re.compile(r"<first-token (\d+)>")


def first_token_stamp(text: str) -> int | None:
    """The stamp :class:`FirstTokenModel` wrote into ``text`` (None if there is none)."""
    match = FIRST_TOKEN.search(text)
    return int(match.group(1)) if match else None


class FirstTokenModel:
    """Answers at once with one delta: the ``time.time_ns()`` at which its stream was opened,
    i.e. when a remote provider would have received the request."""

    provider = "scripted"
    model_id = "bench-ttft"

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        asked = time.time_ns()  # the runtime pulls the first part as soon as it opens the stream
        yield {"type": "response-metadata", "id": "bench-ttft", "modelId": self.model_id}
        yield {"type": "text-start", "id": "t"}
        yield {"type": "text-delta", "id": "t", "delta": f"<first-token {asked}>"}
        yield {"type": "text-end", "id": "t"}
        usage = {"inputTokens": 8, "outputTokens": 4, "totalTokens": 12}
        yield {"type": "finish", "finishReason": "stop", "usage": usage}


ttft_agent = define_agent(
    "bench_ttft",
    instructions="Benchmark agent: answer with the time the model was asked.",
    model=FirstTokenModel(),
)

"""The benchmark agents: zero-latency scripted models, so only the runtime's cost shows.

``w1_agent`` is workload W1 exactly: step 1 calls ``lookup(q="x")``, the tool returns
``{"answer": 42}``, step 2 streams 100 text deltas of 4 characters. ``w2_agent`` answers in
one step with the same 100 deltas. Both models are stateless responders (not step queues)
so one agent instance serves any number of runs, and they record no requests (no growth).
The responders are ``async def``: a sync responder would cost a thread hop per step, which
belongs to the scripted model, not to the runtime being measured.
"""

from __future__ import annotations

from pydantic import BaseModel

from pai_agents import ModelRequest, ScriptedModel, ScriptedStep, define_agent, tool

__all__ = ["ANSWER_TEXT", "DELTAS", "DELTA_CHARS", "lookup", "w1_agent", "w2_agent"]

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

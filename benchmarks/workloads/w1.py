"""W1, the tool round trip: new thread, send, step 1 calls ``lookup``, step 2 streams text.

Each repetition creates its threads first (unmeasured), then measures the accept phase
(``services.send``, dispatch off) and the execution phase (``aexecute_run`` on one shared
event loop) separately, so the commit budget can be read per phase. Counts must be equal
in every repetition (they are exact); times are repeated to show the machine's noise.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.stats import median, percentile, spread
from benchmarks.workloads.common import Bench, phase_summary

__all__ = ["engine_only", "repetition", "run", "sizes", "summary", "warm_up"]

AGENT = "bench_w1"
MODEL_STEPS = 2


def sizes(bench: Bench) -> tuple[int, int, int]:
    """(warm-up runs, measured runs per repetition, repetitions)."""
    return (1, 5, 3) if bench.quick else (20, 200, bench.reps(3))


def engine_only(bench: Bench, runs: int, agent: str = AGENT) -> dict[str, float]:
    """The same run on the in-memory store: the engine's share, without SQL or thread hops."""
    from benchmarks.workloads.common import USER_MESSAGE
    from pai_agents.engine.memory import InMemoryThreadStore
    from pai_agents.engine.runner import RunEngine
    from pai_agents.ids import new_id
    from pai_threads.execution.registry import get_agent

    store = InMemoryThreadStore()
    engine = RunEngine(agent=get_agent(agent), store=store)

    async def one() -> float:
        thread_id = store.create_thread(scope_key="bench", agent_name=agent)
        t0 = time.perf_counter()
        message = {**USER_MESSAGE, "id": new_id("msg")}
        run_id = store.send(thread_id, message)  # type: ignore[arg-type]
        claim = await store.claim_run(run_id, owner="bench", lease_seconds=60)
        outcome = await engine.run_episode(claim)
        elapsed = (time.perf_counter() - t0) * 1000
        if outcome.status != "completed":
            raise RuntimeError(f"W1 engine-only run ended {outcome}")
        return elapsed

    for _ in range(max(1, runs // 10)):
        bench.loop.run(one())
    times = [bench.loop.run(one()) for _ in range(runs)]
    return {"median": median(times), "p95": percentile(times, 95)}


def warm_up(bench: Bench, runs: int, agent: str = AGENT) -> None:
    for _ in range(runs):
        bench.execute(bench.send(bench.new_thread(agent)))


def repetition(bench: Bench, runs: int, agent: str = AGENT, *, top: int = 0) -> dict[str, Any]:
    """One measured repetition: ``runs`` new threads, then every send, then every run."""
    from pai_threads.models import Message, Run

    with bench.measure() as setup:
        threads = [bench.new_thread(agent) for _ in range(runs)]
    send_ms: list[float] = []
    run_ids: list[str] = []
    with bench.measure() as accept:
        for thread_id in threads:
            t0 = time.perf_counter()
            run_ids.append(bench.send(thread_id))
            send_ms.append((time.perf_counter() - t0) * 1000)
    exec_ms: list[float] = []
    with bench.measure() as execution:
        for run_id in run_ids:
            t0 = time.perf_counter()
            bench.execute(run_id)
            exec_ms.append((time.perf_counter() - t0) * 1000)
    done = Run.objects.filter(id__in=run_ids, status="completed", step_count=2).count()
    messages = Message.objects.filter(run_id__in=run_ids).count()
    if done != runs or messages != 3 * runs:
        raise RuntimeError(f"W1: {done}/{runs} runs completed, {messages} messages stored")
    total_ms = [s + e for s, e in zip(send_ms, exec_ms, strict=True)]
    return {
        "runs": runs,
        "send_ms": {"median": median(send_ms), "p95": percentile(send_ms, 95)},
        "exec_ms": {"median": median(exec_ms), "p95": percentile(exec_ms, 95)},
        "total_ms": {"median": median(total_ms), "p95": percentile(total_ms, 95)},
        "runs_per_second": runs / (accept.seconds + execution.seconds),
        "create_thread": phase_summary(setup, runs),
        "accept": phase_summary(accept, runs, top=top),
        "execution": phase_summary(execution, runs, top=top),
    }


def run(bench: Bench) -> dict[str, Any]:
    warmup, runs, reps = sizes(bench)
    warm_up(bench, warmup)
    repetitions = [repetition(bench, runs, top=30 if rep == 0 else 0) for rep in range(reps)]
    return summary(repetitions, warmup=warmup, engine=engine_only(bench, runs))


def summary(
    repetitions: list[dict[str, Any]], *, warmup: int, engine: dict[str, float]
) -> dict[str, Any]:
    """W1's result from its repetitions: counts must be equal in each, times show the spread."""
    first = repetitions[0]
    stable = all(
        r[phase]["pg_equivalent_statements"] == first[phase]["pg_equivalent_statements"]
        and r[phase]["commits"] == first[phase]["commits"]
        for r in repetitions
        for phase in ("accept", "execution")
    )
    return {
        "engine_only_ms": engine,
        "warmup": warmup,
        "runs": first["runs"],
        "repetitions": repetitions,
        "model_steps": MODEL_STEPS,
        "counts_stable": stable,
        "spread": {
            key: spread([r[key]["median"] for r in repetitions])
            for key in ("send_ms", "exec_ms", "total_ms")
        }
        | {
            f"{key}_p95": spread([r[key]["p95"] for r in repetitions])
            for key in ("exec_ms", "total_ms")
        },
    }

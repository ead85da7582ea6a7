"""The pure parts of the TTFT and W1L benchmarks: stamps, splits, ratios, the registry."""

from __future__ import annotations

import importlib
import time

from benchmarks.agents import FirstTokenModel, NoOpLifecycle, first_token_stamp
from benchmarks.report_latency import render_latency, ttft_verdict
from benchmarks.workloads import WORKLOADS, module_name
from benchmarks.workloads.ttft import Sample, summarize
from benchmarks.workloads.w1_lifecycle import count_difference, ratios
from pai_agents import ModelRequest
from pai_agents.lifecycle.hooks import PHASES, overridden_phases

MS = 1_000_000


def test_every_registered_workload_has_a_module_with_run() -> None:
    for name in WORKLOADS:
        module = importlib.import_module(f"benchmarks.workloads.{module_name(name)}")
        assert callable(module.run), name
    assert module_name("W1L") == "w1_lifecycle" and module_name("TTFT") == "ttft"


def test_the_benchmark_lifecycle_overrides_every_phase() -> None:
    """A phase added to PHASES must be added to NoOpLifecycle, or W1L stops covering it."""
    assert overridden_phases(NoOpLifecycle()) == PHASES


async def test_the_first_token_model_streams_the_time_it_was_asked() -> None:
    before = time.time_ns()
    parts = [p async for p in FirstTokenModel().stream(ModelRequest(messages=[]))]
    after = time.time_ns()
    deltas = [p["delta"] for p in parts if p["type"] == "text-delta"]
    assert len(deltas) == 1 and parts[-1]["type"] == "finish"
    stamp = first_token_stamp(f'{{"type":"text-delta","delta":"{deltas[0]}"}}')
    assert stamp is not None and before <= stamp <= after
    assert first_token_stamp("no stamp here") is None


def test_ttft_is_split_at_the_response_and_a_model_ahead_of_it_is_counted() -> None:
    samples = [
        Sample(sent=0, response=6 * MS, asked=8 * MS, delivered=18 * MS, floor=3 * MS),
        Sample(sent=0, response=7 * MS, asked=5 * MS, delivered=12 * MS, floor=4 * MS),
        Sample(sent=0, response=9 * MS, asked=12 * MS, delivered=20 * MS, floor=2 * MS),
    ]
    out = summarize(samples)
    assert out["sends"] == 3
    assert (out["median_ms"], out["p95_ms"]) == (8.0, 12.0)
    assert out["split"]["http_ms"] == {"median": 7.0, "p95": 9.0}
    assert out["split"]["response_to_model_ms"] == {"median": 2.0, "p95": 3.0}
    assert out["split"]["http_floor_ms"] == {"median": 3.0, "p95": 4.0}
    assert out["first_delta_ms"] == {"median": 8.0, "p95": 10.0}
    assert out["model_before_response"] == 1  # the second sample
    assert ttft_verdict({**out, "target_ms": 10.0}) == "met"
    assert ttft_verdict({**out, "target_ms": 5.0}) == "missed by 3.0 ms"


def _rep(total: float, execute: float, statements: float, commits: float) -> dict:
    phase = {"pg_equivalent_statements": statements, "statements": statements - 2}
    phase |= {"commits": commits, "bytes_written": 2048.0}
    return {
        "runs": 5,
        "send_ms": {"median": 1.0, "p95": 1.0},
        "total_ms": {"median": total, "p95": total},
        "exec_ms": {"median": execute, "p95": execute},
        "accept": {**phase, "pg_equivalent_statements": 7, "statements": 5, "commits": 1},
        "execution": phase,
    }


def test_the_lifecycle_ratio_pairs_adjacent_repetitions() -> None:
    plain = [_rep(10, 8, 13, 4), _rep(20, 16, 13, 4)]
    hooked = [_rep(15, 12, 18, 4), _rep(22, 18, 18, 4)]
    assert ratios(plain, hooked, "total_ms") == {"min": 1.1, "median": 1.3, "max": 1.5}
    added = count_difference(plain[0], hooked[0])
    assert added == {"pg_equivalent_statements": 5, "statements": 5, "commits": 0}


def test_the_report_renders_both_sections_with_the_verdict() -> None:
    plain = [_rep(10, 8, 13, 4)]
    hooked = [_rep(15, 12, 18, 4)]
    engine = {"median": 1.0, "p95": 2.0}
    w1l = {
        "runs": 5,
        "repetitions": hooked,
        "engine_only_ms": engine,
        "ratio_to_w1_spread": ratios(plain, hooked, "total_ms"),
        "plain": {"repetitions": plain, "engine_only_ms": engine},
    }
    ttft = summarize([Sample(sent=0, response=6 * MS, asked=12 * MS, delivered=20 * MS)])
    ttft |= {"warmup": 1, "target_ms": 10.0}
    text = "\n".join(render_latency({"sqlite": {"workloads": {"W1L": w1l, "TTFT": ttft}}}))
    assert "| SQLite | 1 | 10.0 / 10.0 | **15.0** / 15.0 | 1.50 |" in text
    assert "| SQLite | execution | 13 → **18** | 4 → **4** |" in text
    assert "| SQLite | **12.0** / 12.0 | 6.0 / 6.0 | 6.0 / 6.0 | 0/1 |" in text
    assert "**missed by 2.0 ms**" in text

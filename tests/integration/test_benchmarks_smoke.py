"""The benchmarks never rot: their quick mode runs W1, W2 and W4 on SQLite and writes the doc.

W4 quick starts a real daphne server and streams a few short runs to websocket clients.
W1L (W1 with every lifecycle phase overridden) and TTFT (five HTTP sends to daphne) run too.
With ``--no-reference``: the suite never installs or runs the LangGraph / OpenAI Agents
references (their logic is unit-tested on recorded results in
tests/unit/test_benchmark_reference.py).

It runs ``python -m benchmarks`` in a subprocess (the benchmarks configure Django themselves,
on a database of their own), so it needs no database fixture and touches no test database.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_quick_benchmarks_write_the_w1_w2_and_w4_tables(tmp_path: Path) -> None:
    output = tmp_path / "benchmarks.md"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "PAI_EXECUTOR", "DJANGO_SETTINGS_MODULE")
    }
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--no-reference",
            "--only",
            "W1,W2,W4,W1L,TTFT",
            "--db",
            "sqlite",
            "--output",
            str(output),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    text = output.read_text()

    assert "### W1 tool round trip" in text
    assert "### W2 long thread" in text
    # A timing row of W1 with numbers: "| SQLite | 1 | 4.4 | 27.1 / 36.3 | **31.4** / 40.7 | 30 |"
    assert re.search(
        r"\| SQLite \| 1 \| [\d.]+ \| [\d.]+ / [\d.]+ \| \*\*[\d.]+\*\* / [\d.]+ \|", text
    )
    # The commit budget: the run total row carries statements and commits per run.
    total = re.search(
        r"\| SQLite \| \*\*run total \(accept \+ execution\)\*\* "
        r"\| (\d+) \| (\d+) \| - \| ([\d.]+) \|",
        text,
    )
    assert total, text
    statements, with_transactions = int(total.group(1)), int(total.group(2))
    assert float(total.group(3)) >= 1  # commits per run
    assert with_transactions > statements > 0
    for size in ("100", "1,000", "10,000"):
        assert re.search(rf"\| SQLite \| {size} \| 3 \| \*\*[\d.]+\*\*", text), size
    # W4: every delta of every stream arrived, with a measured latency, at 1 and 3 streams.
    assert "### W4 streaming delivery" in text
    for streams, deltas in (("1", "20/20"), ("3", "60/60")):
        latency = r"[\d.]+ / \*\*[\d.]+\*\* / [\d.]+"
        row = rf"\| SQLite \| embedded \| {streams} \| {deltas} \| {latency} \|"
        assert re.search(row, text), streams
    assert re.search(r"W4 delivery p99 < 50 ms at 100 streams .*\| \*\*not measured\*\*", text)
    # --no-reference: no LangGraph / OpenAI Agents rounds, so no ratios (and no virtualenvs).
    assert "### Side by side" not in text
    assert re.search(r"W1 median <= 0.7x LangGraph's.* \| \*\*not measured\*\*", text)
    # W1L: the lifecycle agent's repetitions beside the plain ones, and their ratio.
    assert "### W1L tool round trip with every lifecycle phase overridden" in text
    assert re.search(r"\| SQLite \| ratio \| - \| - \| \*\*[\d.]+\*\* \([\d.]+-[\d.]+\) \|", text)
    # TTFT: a real HTTP send to daphne, its time split at the response, and the verdict.
    ttft = (
        r"\| SQLite \| \*\*[\d.]+\*\* / [\d.]+ \| [\d.]+ / [\d.]+ \| -?[\d.]+ / -?[\d.]+ \| \d/5 \|"
    )
    assert re.search(ttft, text), text

"""``python -m benchmarks``: start what is needed, run the drivers and references, write the doc.

Each database runs in its own driver process (:mod:`benchmarks.driver`) with a fresh
benchmark database. W1, W2 and W3 run in rounds (3, or 1 in quick mode) interleaved with
the reference runtimes (LangGraph and the OpenAI Agents SDK, :mod:`benchmarks.reference`):
per database and round, PAI's driver (one repetition) and each reference's subprocess in a
rotating order, so the machine's noise hits them alike; ``--no-reference`` skips them (then
one driver run, the workloads' own repetitions). The other workloads run once afterwards.
PostgreSQL and Redis come from ``PAI_TEST_POSTGRES_URL`` /
``PAI_TEST_REDIS_URL`` when set; otherwise throwaway servers are started with
scripts/services.sh (PostgreSQL requested, or W3's Celery half needing Redis) and stopped
at the end, even on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.database import BENCH_DB_NAME
from benchmarks.machine import describe
from benchmarks.reference.compare import FRAMEWORKS, round_order
from benchmarks.reference.merge import merge_rounds
from benchmarks.reference.runner import REFERENCES, drop_databases, run_round
from benchmarks.report import render, splice
from benchmarks.services import Services
from benchmarks.workloads import WORKLOADS

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
VENDOR_NAMES = {
    "sqlite": ("sqlite",),
    "postgres": ("postgresql",),
    "both": ("sqlite", "postgresql"),
}
# The workloads the references implement: these run in interleaved rounds.
INTERLEAVED = ("W1", "W2", "W3")
# The benchmark databases of this invocation on a shared server: named after the process, so
# that two benchmark commands on one server do not drop each other's database mid-run.
DATABASE_NAMES = {
    key: f"{name}_{os.getpid()}"
    for key, name in [("pai", BENCH_DB_NAME), *((s.key, f"ref_{s.key}") for s in REFERENCES)]
}
# The developer's service choices must not leak into the drivers (they set their own).
SCRUBBED_ENV = ("DATABASE_URL", "REDIS_URL", "PAI_EXECUTOR", "DJANGO_SETTINGS_MODULE")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure the runtime's own cost beside LangGraph's and the OpenAI Agents "
        "SDK's, and write docs/benchmarks.md (issues 6 and 16).",
    )
    parser.add_argument("--quick", action="store_true", help="smoke mode: a few runs each")
    parser.add_argument(
        "--no-reference",
        dest="reference",
        action="store_false",
        help="skip the LangGraph and OpenAI Agents references (and their virtualenvs)",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="interleaved rounds (default 3; quick 1)"
    )
    parser.add_argument("--db", choices=tuple(VENDOR_NAMES), default="both")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="e.g. W1,W2")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)
    args.only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    unknown = sorted(set(args.only) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {', '.join(WORKLOADS)}")
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def _run_driver(
    vendor: str,
    args: argparse.Namespace,
    workdir: Path,
    pg_url: str,
    redis_url: str,
    *,
    only: list[str],
    tag: str = "",
    repetitions: int | None = None,
) -> dict[str, Any]:
    out = workdir / f"{vendor}{tag}.json"
    argv = [
        sys.executable,
        "-m",
        "benchmarks.driver",
        "--vendor",
        vendor,
        "--workdir",
        str(workdir / vendor),
        "--only",
        ",".join(only),
        "--json",
        str(out),
    ]
    if vendor == "postgresql":
        argv += ["--server-url", pg_url, "--database-name", DATABASE_NAMES["pai"]]
    if redis_url:
        argv += ["--redis-url", redis_url]
    if args.quick:
        argv.append("--quick")
    if repetitions is not None:
        argv += ["--repetitions", str(repetitions)]
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    subprocess.run(argv, cwd=ROOT, env=env, check=True)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _measure(
    vendor: str, args: argparse.Namespace, workdir: Path, pg_url: str, redis_url: str
) -> dict[str, Any]:
    """One database: the interleaved rounds, then the other workloads once; merged."""
    rounded = [w for w in args.only if w in INTERLEAVED] if args.reference else []
    rest = [w for w in args.only if w not in rounded]
    parts: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []
    versions: dict[str, Any] = {}
    specs = {spec.key: spec for spec in REFERENCES}
    for index in range(args.rounds if rounded else 0):
        entry: dict[str, Any] = {"order": round_order(FRAMEWORKS, index)}
        for who in entry["order"]:
            print(f"bench[{vendor}]: round {index + 1}/{args.rounds}: {who}", file=sys.stderr)
            if who == "pai":
                reps = None if args.quick else 1
                part = _run_driver(
                    vendor, args, workdir, pg_url, redis_url,
                    only=rounded, tag=f"-r{index}", repetitions=reps,
                )  # fmt: skip
                parts.append(part)
                entry["pai"] = part["workloads"]
                continue
            ref = run_round(
                specs[who],
                vendor=vendor,
                workloads=rounded,
                quick=args.quick,
                workdir=workdir / "reference",
                server_url=pg_url,
                database=DATABASE_NAMES[who],
                round_index=index,
            )
            versions[who] = ref["versions"]
            entry[who] = ref["workloads"]
        rounds.append(entry)
    if rest:
        parts.append(_run_driver(vendor, args, workdir, pg_url, redis_url, only=rest))
    merged = merge_rounds(parts)
    if rounds:
        merged["rounds"] = rounds
        merged["reference_versions"] = versions
    return merged


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    vendors = VENDOR_NAMES[args.db]
    pg_url = os.environ.get("PAI_TEST_POSTGRES_URL", "")
    redis_url = os.environ.get("PAI_TEST_REDIS_URL", "")
    need_pg = "postgresql" in vendors and not pg_url
    # W3's Celery half, and the production arrangement of W4/W5 (PostgreSQL only), need Redis.
    wants_redis = "W3" in args.only or (
        "postgresql" in vendors and bool({"W4", "W5"} & set(args.only))
    )
    need_redis = wants_redis and not redis_url
    services: Services | None = None
    started = time.perf_counter()
    try:
        if need_pg or need_redis:
            services = Services(ROOT).start()
            pg_url = pg_url or services.postgres_url
            redis_url = redis_url or services.redis_url
        results: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp:
            for vendor in vendors:
                results[vendor] = _measure(vendor, args, Path(tmp), pg_url, redis_url)
    finally:
        if services is not None:
            services.stop()
        elif "postgresql" in vendors and pg_url:
            drop_databases(pg_url, list(DATABASE_NAMES.values()))
    command = "python -m benchmarks" + ("" if argv is None and len(sys.argv) <= 1 else " ")
    command += " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    meta = {
        "machine": describe(ROOT),
        "command": command.strip(),
        "quick": args.quick,
        "rounds": args.rounds if args.reference else None,
    }
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(splice(args.output, render(results, meta)))
    print(
        f"benchmarks: wrote {args.output} in {time.perf_counter() - started:.0f}s",
        file=sys.stderr,
    )
    return 0

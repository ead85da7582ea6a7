"""One database, one fresh process: set Django up on a new benchmark database, run the
selected workloads, write their results as JSON.

A process per database because Django's database settings are fixed once ``django.setup()``
has run; the CLI (:mod:`benchmarks.cli`) starts one driver per requested database.

    python -m benchmarks.driver --vendor sqlite --workdir DIR --only W1 --json OUT [--quick]
    python -m benchmarks.driver --vendor postgresql --server-url URL ... [--redis-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.driver")
    parser.add_argument("--vendor", choices=("sqlite", "postgresql"), required=True)
    parser.add_argument("--server-url", default="", help="PostgreSQL server URL (postgresql)")
    parser.add_argument("--database-name", default="", help="default: pai_bench (recreated)")
    parser.add_argument("--workdir", type=Path, required=True, help="for the SQLite file")
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--only", default="W1,W2,W3,W4,W5")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--repetitions",
        type=int,
        default=None,
        help="repetitions per workload (one round of an interleaved run); default: the workload's",
    )
    parser.add_argument("--json", type=Path, required=True)
    return parser.parse_args(argv)


def _configure_environment(args: argparse.Namespace) -> str:
    """Create the benchmark database and point the settings at it; returns DATABASE_URL."""
    from benchmarks.database import BENCH_DB_NAME, create_postgres_database

    if args.vendor == "postgresql":
        url = create_postgres_database(args.server_url, args.database_name or BENCH_DB_NAME)
    else:
        args.workdir.mkdir(parents=True, exist_ok=True)
        path = args.workdir / "bench.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        url = f"sqlite:///{path}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    os.environ["DATABASE_URL"] = url
    os.environ.pop("DATABASE_CONN_MAX_AGE", None)
    # Never REDIS_URL here: it would move the realtime buffer and channel layer of every
    # workload to Redis (see benchmarks/settings.py). Only W3's dispatching sends use Redis.
    os.environ.pop("REDIS_URL", None)
    if args.redis_url:
        os.environ["PAI_BENCH_BROKER_URL"] = args.redis_url
        os.environ["PAI_EXECUTOR"] = "celery"
    else:
        os.environ.pop("PAI_BENCH_BROKER_URL", None)
        os.environ["PAI_EXECUTOR"] = "thread"
    return url


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    url = _configure_environment(args)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from benchmarks.counting import install
    from benchmarks.database import PostgresProbe, SqliteProbe, quiet_autovacuum
    from benchmarks.workloads import module_name
    from benchmarks.workloads.common import Bench
    from pai_threads.executors.gc_tuning import tune_gc

    counter = install()  # before the first connection, so every connection is wrapped
    call_command("migrate", verbosity=0, interactive=False)
    # The driver runs runs as a worker process does, so it tunes its collector as PAI's
    # worker and web processes do by default (PAI["GC_TUNING"]); without it, collections
    # over the replay buffer's retained events cost W1 0.55-0.9 ms per run here.
    tune_gc()

    info: dict[str, Any] = {"vendor": args.vendor}
    probe: PostgresProbe | SqliteProbe
    if args.vendor == "postgresql":
        quiet_autovacuum(url)
        probe = PostgresProbe(url)
        info["server_version"] = probe.server_version()
        info["server_settings"] = probe.settings()
    else:
        path = Path(connection.settings_dict["NAME"])
        probe = SqliteProbe(path)
        info["server_version"] = sqlite3.sqlite_version
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            journal = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")  # 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
            level = {0: "off", 1: "normal", 2: "full", 3: "extra"}.get(cursor.fetchone()[0], "?")
            info["server_settings"] = {"journal_mode": journal, "synchronous": level}
    connection.close()

    results: dict[str, Any] = {"info": info, "workloads": {}}
    selected = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    with asyncio.Runner() as loop:
        bench = Bench(
            vendor=args.vendor,
            quick=args.quick,
            repetitions=args.repetitions,
            counter=counter,
            probe=probe,
            loop=loop,
            redis_url=args.redis_url or None,
            database_url=url,
        )
        for name in selected:
            module = importlib.import_module(f"benchmarks.workloads.{module_name(name)}")
            t0 = time.perf_counter()
            print(f"bench[{args.vendor}]: {name} ...", file=sys.stderr, flush=True)
            outcome = module.run(bench)
            outcome["wall_seconds"] = time.perf_counter() - t0
            results["workloads"][name] = outcome
            print(
                f"bench[{args.vendor}]: {name} done in {outcome['wall_seconds']:.1f}s",
                file=sys.stderr,
                flush=True,
            )
        results["notes"] = bench.notes
    probe.close()
    args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

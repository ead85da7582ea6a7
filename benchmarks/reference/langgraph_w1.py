"""W1 (the tool round trip) on LangGraph with its PostgreSQL checkpointer: the reference
that issue 6's time target ("PAI W1 at most half of LangGraph's time") is measured against.

    python benchmarks/reference/langgraph_w1.py --setup        # once: .venv-langgraph
    python benchmarks/reference/langgraph_w1.py --database-url postgres://... --json OUT

The script needs only the standard library to start; without LangGraph importable it re-runs
itself under ``.venv-langgraph/bin/python`` (created by ``--setup`` from requirements.txt
beside it), so the product's virtualenv never gets LangGraph's dependencies.

The run is W1 exactly as ``benchmarks/workloads/w1.py`` runs it on PAI: a new thread per run
(a fresh ``thread_id``), one user message, step 1 the model calls ``lookup(q="x")``, the tool
returns ``{"answer": 42}``, step 2 the model streams 100 text chunks of 4 characters; the
caller consumes the run through ``stream_mode="messages"`` (token streaming) and the run ends
with every step checkpointed. The graph is the canonical ReAct loop (``StateGraph`` over
``MessagesState``: a model node, LangGraph's prebuilt ``ToolNode`` and ``tools_condition``),
compiled with ``PostgresSaver`` (psycopg 3, ``from_conn_string`` + ``setup()`` once, the
documented way). The model is a zero-latency ``BaseChatModel`` subclass with ``bind_tools``,
``_stream`` and ``_astream``: nothing is on the network, so only the runtime's cost shows.

Measured as W1 is (200 runs after 20 warm-up, 3 repetitions, on a database of its own created
for the purpose, autovacuum off on the checkpoint tables):

* ms per run: wall time of one whole ``graph.stream(...)`` consumed to the end (sync API) or
  of ``runner.run(consume(graph.astream(...)))`` (async API: one event loop for every run,
  as PAI's ``aexecute_run`` is driven). Median and p95 per repetition, spread across them.
* statements per run: pg_stat_statements reset before the 200 runs, sum of ``calls`` of the
  database's statements after (the probe's own excluded), / 200. pg_stat_statements counts an
  explicit ``BEGIN``/``COMMIT`` as statements; LangGraph's checkpointer runs on an autocommit
  connection in pipeline mode and sends none, so there are none to count.
* commits per run: write transactions, counted two ways that must agree: transaction ids
  assigned (``pg_snapshot_xmax(pg_current_snapshot())`` before/after: every transaction that
  writes gets one, read-only ones do not) and ``Transaction/COMMIT`` records in the WAL
  (pg_walinspect). PAI's "commits" are the same thing: durable (writing) transactions; a
  read-only autocommit SELECT is not one there either.
* WAL bytes per run: ``pg_current_wal_insert_lsn()`` difference / 200 (exact even with
  ``synchronous_commit = off``), split by record kind with pg_walinspect when available.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV = ROOT / ".venv-langgraph"
REQUIREMENTS = HERE / "requirements.txt"
DB_NAME = "lg_bench"

USER_TEXT = "Look up x, please."  # the same user message as PAI's W1
INSTRUCTIONS = "Benchmark agent: look it up, then answer."
DELTA = "abc "  # PAI's W1 streams "abc " x 100 (benchmarks/agents.py)
DELTAS = 100
CHECKPOINT_TABLES = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
)
PROBE_SQL = (
    "pg_stat_statements",
    "pg_current_wal",
    "pg_wal_lsn_diff",
    "pg_get_wal_stats",
    "pg_logical_emit",
    "pg_current_snapshot",
    "synchronous_commit",
    "pg_walinspect",
)


# --------------------------------------------------------------------------- set-up


def setup_venv() -> int:
    """Create .venv-langgraph with this interpreter and install the pinned requirements."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    # Keep the virtualenv out of git without touching the repository's .gitignore (Python
    # 3.13's venv writes this file itself).
    (VENV / ".gitignore").write_text("*\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-r", str(REQUIREMENTS)], check=True)
    subprocess.run([str(python), "-c", "import langgraph.checkpoint.postgres"], check=True)
    print(f"ready: {python}")
    return 0


def _reexec_in_venv() -> None:
    python = VENV / "bin" / "python"
    if not python.exists():
        sys.exit(f"LangGraph is not importable and {python} does not exist: run with --setup")
    if Path(sys.prefix).resolve() == VENV.resolve():
        sys.exit(f"LangGraph is not importable in {VENV}: rerun with --setup")
    os.execv(str(python), [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])


# --------------------------------------------------------------------------- the agent


def build_graph(checkpointer: Any) -> Any:
    """The ReAct loop: model node -> (tool calls?) ToolNode -> model node -> END."""
    from collections.abc import AsyncIterator, Iterator

    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, SystemMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.tools import StructuredTool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    class W1Model(BaseChatModel):
        """Zero-latency scripted model: tool call first, then 100 streamed 4-char chunks.

        Stateless like PAI's bench model: it answers from the conversation (a tool result
        last means step 2). The framework (``BaseChatModel.stream``) fires
        ``on_llm_new_token`` for each chunk, which is what ``stream_mode="messages"`` reads.
        """

        @property
        def _llm_type(self) -> str:
            return "w1-scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> W1Model:  # type: ignore[override]
            return self

        @staticmethod
        def _step2(messages: list[Any]) -> bool:
            return bool(messages) and isinstance(messages[-1], ToolMessage)

        @staticmethod
        def _call_chunk() -> AIMessageChunk:
            call_id = "call_" + uuid.uuid4().hex[:12]
            return AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {"name": "lookup", "args": '{"q": "x"}', "id": call_id, "index": 0}
                ],
            )

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            if self._step2(messages):
                message = AIMessage(content=DELTA * DELTAS)
            else:
                chunk = self._call_chunk()
                message = AIMessage(content="", tool_calls=chunk.tool_calls)
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _stream(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Iterator[ChatGenerationChunk]:
            if not self._step2(messages):
                yield ChatGenerationChunk(message=self._call_chunk())
                return
            for _ in range(DELTAS):
                yield ChatGenerationChunk(message=AIMessageChunk(content=DELTA))

        async def _astream(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> AsyncIterator[ChatGenerationChunk]:
            for chunk in self._stream(messages):
                yield chunk

    def lookup(q: str) -> dict[str, int]:
        """Look something up."""
        return {"answer": 42}

    async def alookup(q: str) -> dict[str, int]:
        return {"answer": 42}

    tool = StructuredTool.from_function(func=lookup, coroutine=alookup, name="lookup")
    model = W1Model().bind_tools([tool])
    system = SystemMessage(content=INSTRUCTIONS)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([system, *state["messages"]])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke([system, *state["messages"]])]}

    from langgraph._internal._runnable import RunnableCallable

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableCallable(agent, aagent, name="agent"))
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _inputs() -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    return {"messages": [HumanMessage(content=USER_TEXT)]}


def _check_tokens(tokens: list[str], thread_id: str) -> None:
    text = [t for t in tokens if t]
    if len(text) != DELTAS or any(t != DELTA for t in text):
        raise RuntimeError(f"run {thread_id}: streamed {len(text)} text chunks, want {DELTAS}")


def run_sync(graph: Any, durability: str) -> tuple[float, str]:
    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}}
    t0 = time.perf_counter()
    tokens: list[str] = []
    for chunk, meta in graph.stream(
        _inputs(), config, stream_mode="messages", durability=durability
    ):
        if meta.get("langgraph_node") == "agent":
            tokens.append(chunk.content)
    elapsed = (time.perf_counter() - t0) * 1000
    _check_tokens(tokens, thread_id)
    return elapsed, thread_id


def run_async(runner: Any, graph: Any, durability: str) -> tuple[float, str]:
    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}}
    tokens: list[str] = []

    async def consume() -> None:
        async for chunk, meta in graph.astream(
            _inputs(), config, stream_mode="messages", durability=durability
        ):
            if meta.get("langgraph_node") == "agent":
                tokens.append(chunk.content)

    t0 = time.perf_counter()
    runner.run(consume())
    elapsed = (time.perf_counter() - t0) * 1000
    _check_tokens(tokens, thread_id)
    return elapsed, thread_id


# --------------------------------------------------------------------------- the database


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def create_database(server_url: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    url = _with_database(server_url, DB_NAME)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return url


class Probe:
    """pg_stat_statements, WAL position and transaction ids, on a connection of its own."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.dbid = self.conn.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()[0]
        try:
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            self.walinspect = True
        except psycopg.Error:
            self.walinspect = False
        self.conn.execute("SET synchronous_commit = on")

    def _xmax(self) -> int:
        return int(
            self.conn.execute(
                "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
            ).fetchone()[0]
        )

    def start(self) -> None:
        self.conn.execute("SELECT pg_stat_statements_reset()")
        self.lsn0 = self.conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        self.xid0 = self._xmax()

    def stop(self) -> dict[str, Any]:
        xids = self._xmax() - self.xid0
        end_lsn, wal = self.conn.execute(
            "SELECT pg_current_wal_insert_lsn()::text, "
            "pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn)::bigint",
            [self.lsn0],
        ).fetchone()
        by_query: dict[str, int] = {}
        for query, calls in self.conn.execute(
            "SELECT query, calls FROM pg_stat_statements WHERE dbid = %s", [self.dbid]
        ):
            if any(p in query for p in PROBE_SQL):
                continue
            key = " ".join(query.split())
            by_query[key] = by_query.get(key, 0) + int(calls)
        wal_kinds: dict[str, dict[str, int]] = {}
        if self.walinspect:
            with self.conn.transaction():  # flushes the WAL up to here (synchronous commit)
                self.conn.execute("SELECT pg_logical_emit_message(true, 'lg-bench', '')")
            for kind, count, size in self.conn.execute(
                'SELECT "resource_manager/record_type", count, combined_size '
                "FROM pg_get_wal_stats(%s::pg_lsn, %s::pg_lsn, true) WHERE count > 0",
                [self.lsn0, end_lsn],
            ):
                wal_kinds[str(kind)] = {"count": int(count), "bytes": int(size)}
        return {"wal_bytes": int(wal), "xids": xids, "by_query": by_query, "wal_records": wal_kinds}

    def close(self) -> None:
        self.conn.close()


def quiet_autovacuum(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for table in CHECKPOINT_TABLES:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


def server_info(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        settings = dict(
            conn.execute(
                "SELECT name, reset_val FROM pg_settings WHERE name = ANY(%s)",
                [["synchronous_commit", "fsync", "full_page_writes", "shared_buffers"]],
            ).fetchall()
        )
    return {"server_version": version, "settings": settings}


# --------------------------------------------------------------------------- measuring


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _verify(saver: Any, thread_ids: list[str], runner: Any = None) -> None:
    """Every run checkpointed to its end: 4 messages (user, call, tool result, answer)."""
    for thread_id in thread_ids:
        config = {"configurable": {"thread_id": thread_id}}
        tup = saver.get_tuple(config) if runner is None else runner.run(saver.aget_tuple(config))
        messages = tup.checkpoint["channel_values"].get("messages", []) if tup else []
        if len(messages) != 4 or messages[-1].content != DELTA * DELTAS:
            raise RuntimeError(f"thread {thread_id}: {len(messages)} messages checkpointed")
        if tup.metadata.get("step") != 3:
            raise RuntimeError(f"thread {thread_id}: last checkpoint is step {tup.metadata}")


def measure_variant(
    db_url: str, api: str, durability: str, warmup: int, runs: int, reps: int
) -> dict[str, Any]:
    import asyncio

    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    runner = asyncio.Runner() if api == "async" else None
    if runner is None:
        ctx = PostgresSaver.from_conn_string(db_url)
        saver = ctx.__enter__()
        saver.setup()
    else:
        ctx = AsyncPostgresSaver.from_conn_string(db_url)
        saver = runner.run(ctx.__aenter__())
        runner.run(saver.setup())
    quiet_autovacuum(db_url)
    graph = build_graph(saver)

    def one() -> tuple[float, str]:
        if runner is None:
            return run_sync(graph, durability)
        return run_async(runner, graph, durability)

    warm_ids = [one()[1] for _ in range(warmup)]
    _verify(saver, warm_ids, runner)
    probe = Probe(db_url)
    repetitions = []
    try:
        for _ in range(reps):
            probe.start()
            t_start = time.perf_counter()
            results = [one() for _ in range(runs)]
            seconds = time.perf_counter() - t_start
            stats = probe.stop()
            times = [ms for ms, _ in results]
            _verify(saver, [t for _, t in results], runner)
            statements = sum(stats["by_query"].values())
            wal_commits = stats["wal_records"].get("Transaction/COMMIT", {}).get("count")
            repetitions.append(
                {
                    "runs": runs,
                    "median_ms": statistics.median(times),
                    "p95_ms": _percentile(times, 95),
                    "mean_ms": statistics.fmean(times),
                    "runs_per_second": runs / seconds,
                    "statements_per_run": statements / runs,
                    "begin_commit_statements_per_run": sum(
                        c
                        for q, c in stats["by_query"].items()
                        if q.upper() in ("BEGIN", "COMMIT", "ROLLBACK")
                    )
                    / runs,
                    "write_transactions_per_run": stats["xids"] / runs,
                    "wal_commit_records_per_run": None
                    if wal_commits is None
                    else wal_commits / runs,
                    "wal_bytes_per_run": stats["wal_bytes"] / runs,
                    "wal_by_kind_per_run": {
                        k: v["bytes"] / runs
                        for k, v in sorted(
                            stats["wal_records"].items(), key=lambda kv: -kv[1]["bytes"]
                        )
                    },
                    "by_query_per_run": {
                        q: c / runs
                        for q, c in sorted(stats["by_query"].items(), key=lambda kv: -kv[1])
                    },
                }
            )
    finally:
        probe.close()
        if runner is None:
            ctx.__exit__(None, None, None)
        else:
            runner.run(ctx.__aexit__(None, None, None))
            runner.close()
    medians = [r["median_ms"] for r in repetitions]
    p95s = [r["p95_ms"] for r in repetitions]
    return {
        "api": api,
        "durability": durability,
        "warmup": warmup,
        "runs": runs,
        "repetitions": repetitions,
        "median_ms": {
            "median": statistics.median(medians),
            "min": min(medians),
            "max": max(medians),
        },
        "p95_ms": {"median": statistics.median(p95s), "min": min(p95s), "max": max(p95s)},
        "counts_stable": all(
            r[k] == repetitions[0][k]
            for r in repetitions
            for k in ("statements_per_run", "write_transactions_per_run")
        ),
    }


def measure_engine_only(runs: int) -> dict[str, Any]:
    """The same run with LangGraph's InMemorySaver (no SQL): the framework's own share,
    the counterpart of PAI's "engine alone" row (W1 on its in-memory store)."""
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_graph(InMemorySaver())
    for _ in range(max(1, runs // 10)):
        run_sync(graph, "sync")
    times = [run_sync(graph, "sync")[0] for _ in range(runs)]
    return {
        "api": "sync",
        "durability": "sync",
        "saver": "InMemorySaver",
        "runs": runs,
        "median_ms": statistics.median(times),
        "p95_ms": _percentile(times, 95),
    }


def versions() -> dict[str, str]:
    from importlib.metadata import version

    names = (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres",
        "langgraph-prebuilt",
        "langchain-core",
        "psycopg",
        "psycopg-binary",
        "psycopg-pool",
        "ormsgpack",
    )
    return {n: version(n) for n in names} | {"python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", action="store_true", help="create .venv-langgraph and exit")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("PAI_TEST_POSTGRES_URL", ""),
        help="PostgreSQL server URL with pg_stat_statements "
        f"(default: $PAI_TEST_POSTGRES_URL); database {DB_NAME} is recreated "
        "on it",
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--quick", action="store_true", help="smoke mode: 1 warm-up, 5 runs")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument(
        "--variants",
        default="sync:sync,async:sync,sync:async,async:async",
        help="API:durability pairs (API sync|async; durability sync|async|exit)",
    )
    parser.add_argument(
        "--no-engine-only",
        action="store_true",
        help="skip the InMemorySaver run (the framework without SQL)",
    )
    args = parser.parse_args(argv)
    if args.setup:
        return setup_venv()
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
    except ImportError:
        _reexec_in_venv()
    if not args.database_url:
        parser.error("--database-url (or PAI_TEST_POSTGRES_URL) is required")
    warmup, runs, reps = (1, 5, 1) if args.quick else (args.warmup, args.runs, args.repetitions)

    results: dict[str, Any] = {
        "versions": versions(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_start": os.getloadavg(),
        },
        "variants": [],
    }
    for pair in args.variants.split(","):
        api, durability = pair.split(":")
        db_url = create_database(args.database_url)
        results.setdefault("server", server_info(db_url))
        print(
            f"LangGraph W1, {api} API, durability={durability}: {warmup} warm-up + "
            f"{reps} x {runs} runs",
            file=sys.stderr,
        )
        variant = measure_variant(db_url, api, durability, warmup, runs, reps)
        results["variants"].append(variant)
        for i, r in enumerate(variant["repetitions"], 1):
            print(
                f"  rep {i}: median {r['median_ms']:.2f} ms, p95 {r['p95_ms']:.2f} ms, "
                f"{r['statements_per_run']:g} statements, "
                f"{r['write_transactions_per_run']:g} write tx "
                f"(WAL COMMIT records {r['wal_commit_records_per_run']}), "
                f"{r['wal_bytes_per_run'] / 1024:.1f} KB WAL",
                file=sys.stderr,
            )
    if not args.no_engine_only:
        results["engine_only"] = engine = measure_engine_only(runs)
        print(
            f"LangGraph W1 engine only (InMemorySaver): median {engine['median_ms']:.2f} ms, "
            f"p95 {engine['p95_ms']:.2f} ms",
            file=sys.stderr,
        )
    results["machine"]["loadavg_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

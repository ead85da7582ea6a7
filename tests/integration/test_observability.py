"""Observability (docs/operations.md, Observability): run lifecycle signals sent after
commit, log records carrying the run's ids (never private metadata), and OpenTelemetry
spans after the GenAI semantic conventions, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import transaction
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from pai_agents import tracing
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Step
from pai_threads.observability import signals
from tests.support.inline_runs import send_and_execute
from tests.support.observed_agents import SECRET

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = {"role": "user", "parts": [{"type": "text", "text": "approval"}]}
SIGNALS = {
    "queued": signals.run_queued,
    "started": signals.run_started,
    "waiting": signals.run_waiting,
    "finished": signals.run_finished,
}


@pytest.fixture(autouse=True)
def agents(settings: Any, tmp_path: Path) -> None:
    extra = ["tests.support.observed_agents.observed", "tests.support.agents.toolbox"]
    settings.PAI = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], *extra]}


@pytest.fixture
def received() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every run signal as (name, kwargs plus the run's status as committed then)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    receivers = {}
    for name, signal in SIGNALS.items():

        def receiver(sender: Any, name: str = name, **kwargs: Any) -> None:
            assert sender is Run
            kwargs.pop("signal")
            committed = Run.objects.filter(id=kwargs["run_id"]).values_list("status", flat=True)
            seen.append((name, {**kwargs, "stored": committed.first()}))

        receivers[name] = receiver
        signal.connect(receiver, weak=False)
    yield seen
    for name, signal in SIGNALS.items():
        signal.disconnect(receivers[name])


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    """The SDK's in-memory exporter on the global tracer provider (set once a process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return memory


@pytest.fixture
def json_logs() -> Iterator[list[str]]:
    """The runtime's records as the documented JSON logging config formats them."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect(level=logging.DEBUG)
    handler.addFilter(tracing.RunContextFilter())
    handler.setFormatter(tracing.JsonFormatter())
    logger = logging.getLogger("pai")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_a_run_sends_queued_started_and_finished_after_each_commit(
    alice: Identity, received: list[tuple[str, dict[str, Any]]]
) -> None:
    thread = services.create_thread(alice, agent="observed")
    run = send_and_execute(alice, thread.id, "add")
    ids = {
        "run_id": run.id,
        "thread_id": thread.id,
        "scope_key": alice.scope_key,
        "agent_name": "observed",
    }
    assert received == [
        ("queued", {**ids, "initiator": "send", "stored": "queued"}),
        ("started", {**ids, "attempt": 1, "stored": "running"}),
        ("finished", {**ids, "status": "completed", "stored": "completed"}),
    ]


def test_a_rolled_back_send_sends_nothing(
    alice: Identity, received: list[tuple[str, dict[str, Any]]]
) -> None:
    thread = services.create_thread(alice, agent="observed")
    with pytest.raises(RuntimeError), transaction.atomic():
        services.send(alice, thread.id, TEXT, dispatch=False)
        raise RuntimeError("rolled back")
    assert received == []


def test_a_waiting_run_sends_waiting_and_its_cancel_finished(
    alice: Identity, received: list[tuple[str, dict[str, Any]]]
) -> None:
    thread = services.create_thread(alice, agent="toolbox")
    run = send_and_execute(alice, thread.id, "approval")
    assert run.status == Run.Status.WAITING
    assert [name for name, _ in received] == ["queued", "started", "waiting"]
    assert received[-1][1]["stored"] == "waiting"
    services.cancel_run(alice, run.id)
    assert received[-1] == (
        "finished",
        {
            "run_id": run.id,
            "thread_id": thread.id,
            "scope_key": alice.scope_key,
            "agent_name": "toolbox",
            "status": "cancelled",
            "stored": "cancelled",
        },
    )


def test_a_receiver_that_raises_is_logged_and_changes_nothing(
    alice: Identity, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(sender: Any, **kwargs: Any) -> None:
        raise ValueError("receiver bug")

    signals.run_finished.connect(broken, weak=False)
    try:
        thread = services.create_thread(alice, agent="observed")
        with caplog.at_level(logging.ERROR, logger="pai.signals"):
            run = send_and_execute(alice, thread.id, "add")
    finally:
        signals.run_finished.disconnect(broken)
    assert run.status == Run.Status.COMPLETED
    [record] = [r for r in caplog.records if r.name == "pai.signals"]
    assert record.exc_info is not None and "receiver bug" in str(record.exc_info[1])


def _by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def test_spans_follow_the_genai_conventions(
    alice: Identity, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    thread = services.create_thread(alice, agent="observed")
    run = send_and_execute(alice, thread.id, "add")
    spans = exporter.get_finished_spans()
    [agent] = _by_name(spans, "invoke_agent ")
    steps = _by_name(spans, "pai.step")
    chats = _by_name(spans, "chat ")
    tools = {s.attributes["gen_ai.tool.name"]: s for s in _by_name(spans, "execute_tool ")}
    assert agent.name == "invoke_agent observed"
    assert dict(agent.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "observed",
        "gen_ai.conversation.id": thread.id,
        "pai.run.id": run.id,
        "pai.run.attempt": 1,
        "pai.run.status": "completed",
        "gen_ai.usage.input_tokens": 42,
        "gen_ai.usage.output_tokens": 8,
    }
    stored = list(Step.objects.filter(run_id=run.id).order_by("index"))
    assert [s.attributes["pai.step.index"] for s in steps] == [0, 1]
    assert len(chats) == len(stored) == 2
    for chat, step, row in zip(chats, steps, stored, strict=True):
        assert chat.parent is not None and chat.parent.span_id == step.context.span_id
        assert step.parent is not None and step.parent.span_id == agent.context.span_id
        attributes = chat.attributes or {}
        assert chat.name == f"chat {row.request['modelId']}"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == row.request["modelId"]
        assert attributes["gen_ai.provider.name"] == row.request["provider"]
        assert attributes["gen_ai.usage.input_tokens"] == row.usage["inputTokens"]
        assert attributes["gen_ai.usage.output_tokens"] == row.usage["outputTokens"]
        assert attributes["gen_ai.response.finish_reasons"] == (row.finish_reason,)
    # The tool calls are children of the first step; their ids are the stored calls'.
    parts = Message.objects.get(run_id=run.id, step_index=0).parts
    call_ids = {
        p["type"].removeprefix("tool-"): p["toolCallId"] for p in parts if "toolCallId" in p
    }
    for name in ("add", "explode"):
        span = tools[name]
        assert span.parent is not None and span.parent.span_id == steps[0].context.span_id
        assert span.attributes["gen_ai.tool.call.id"] == call_ids[name]
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tools["add"].status.status_code == StatusCode.UNSET
    assert tools["explode"].status.status_code == StatusCode.ERROR
    assert tools["explode"].attributes["error.type"] == "RuntimeError"
    # Ids, names and counts only: no metadata, inputs or outputs.
    assert SECRET not in json.dumps([dict(s.attributes or {}) for s in spans], default=str)


def test_log_records_carry_the_run_ids_and_never_private_metadata(
    alice: Identity, json_logs: list[str]
) -> None:
    thread = services.create_thread(alice, agent="observed")
    run = send_and_execute(alice, thread.id, "add")
    assert Run.objects.get(id=run.id).private_metadata == {"token": SECRET}
    records = [json.loads(line) for line in json_logs]
    assert all(set(tracing.LOG_FIELDS) <= set(r) for r in records)
    [raised] = [r for r in records if r["message"] == "tool explode raised RuntimeError"]
    assert "RuntimeError: exploded" in raised["exception"]
    assert {k: raised[k] for k in tracing.LOG_FIELDS} == {
        "run_id": run.id,
        "thread_id": thread.id,
        "attempt": 1,
        "step_index": 0,
    }
    [ended] = [r for r in records if r["message"] == f"run {run.id} ended completed"]
    assert ended["run_id"] == run.id
    assert SECRET not in "\n".join(json_logs)


def test_without_opentelemetry_no_span_starts_and_logs_keep_their_ids(
    alice: Identity,
    exporter: InMemorySpanExporter,
    json_logs: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The no-op path of an install without the ``otel`` extra."""
    monkeypatch.setattr(tracing, "otel_trace", None)
    exporter.clear()
    thread = services.create_thread(alice, agent="observed")
    run = send_and_execute(alice, thread.id, "add")
    assert run.status == Run.Status.COMPLETED
    assert exporter.get_finished_spans() == ()
    [raised] = [json.loads(x) for x in json_logs if "tool explode raised" in x]
    assert (raised["run_id"], raised["step_index"]) == (run.id, 0)


def _documented_blocks(language: str) -> list[str]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    section = text.split("## Observability", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_the_documented_examples_work(alice: Identity) -> None:
    """docs/operations.md, Observability: the receiver counts an ended run, the LOGGING
    config loads and writes the run's ids as JSON, the JSON line parses."""
    receiver_code, logging_code, _tracer_setup = _documented_blocks("python")
    counted: list[tuple[str, dict[str, str]]] = []
    metrics = SimpleNamespace(increment=lambda name, tags: counted.append((name, tags)))
    namespace: dict[str, Any] = {"metrics": metrics}
    exec(compile(receiver_code, "operations.md", "exec"), namespace)
    config: dict[str, Any] = {}
    exec(compile(logging_code, "operations.md", "exec"), config)
    logger = logging.getLogger("pai")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    stream = io.StringIO()
    try:
        logging.config.dictConfig(config["LOGGING"])
        for h in logger.handlers:
            h.setStream(stream)  # type: ignore[attr-defined]
        thread = services.create_thread(alice, agent="observed")
        run = send_and_execute(alice, thread.id, "add")
    finally:
        signals.run_finished.disconnect(namespace["count_ended_runs"])
        logger.handlers[:], logger.level, logger.propagate = saved
    assert counted == [("pai.runs.ended", {"agent": "observed", "status": "completed"})]
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    assert any(r["run_id"] == run.id and r["step_index"] == 0 for r in lines)
    [sample] = _documented_blocks("json")
    assert set(tracing.LOG_FIELDS) <= set(json.loads(sample))

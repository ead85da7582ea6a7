"""What the engine tells operators while it works: log context and OpenTelemetry spans.

Three context managers open the run, a step and a model or tool call. Each one sets the ids
every log record of the runtime carries (:class:`RunContextFilter` adds ``run_id``,
``thread_id``, ``attempt`` and ``step_index`` to records, None outside a run) and, when
``opentelemetry-api`` is installed (the package's ``otel`` extra), opens a span named
and attributed after the OpenTelemetry GenAI semantic conventions:

* ``invoke_agent {agent}``: the run's episode (``gen_ai.operation.name`` ``invoke_agent``,
  ``gen_ai.agent.name``, ``gen_ai.conversation.id`` = the thread id, ``pai.run.id``,
  ``pai.run.attempt``, ``pai.run.status`` at the end);
* ``pai.step``: one model step with its tool calls (``pai.step.index``);
* ``chat {model}``: one model call, one per attempt when a call is retried
  (``gen_ai.request.model``, ``gen_ai.provider.name``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.response.finish_reasons``);
* ``execute_tool {tool}``: one server tool call (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type``, ``error.type`` when it raised).

Spans carry ids, names and counts only: never prompts, tool inputs or outputs, identities
or metadata. Without OpenTelemetry, or before the application sets a tracer provider (the
API's default proxy records nothing), the managers only set the log ids (one context variable
per run, step and call; nothing per streamed delta). Framework-free, like the whole engine.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

try:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError:  # the optional extra is not installed: log ids only
    otel_trace = None  # type: ignore[assignment]

__all__ = [
    "LOG_FIELDS",
    "JsonFormatter",
    "LogIds",
    "RunContextFilter",
    "SpanNotes",
    "current_ids",
    "model_call_span",
    "run_span",
    "step_span",
    "tool_span",
    "tracing_enabled",
]

LOG_FIELDS = ("run_id", "thread_id", "attempt", "step_index")
_TRACER = "pai_agents"


@dataclass(frozen=True, slots=True)
class LogIds:
    """The ids of the work in progress, as log records carry them."""

    run_id: str | None = None
    thread_id: str | None = None
    attempt: int | None = None
    step_index: int | None = None


_NO_IDS = LogIds()
_ids: ContextVar[LogIds] = ContextVar("pai_log_ids", default=_NO_IDS)


def current_ids() -> LogIds:
    return _ids.get()


def tracing_enabled() -> bool:
    """True when ``opentelemetry-api`` is importable (spans go to its tracer provider)."""
    return otel_trace is not None


class RunContextFilter(logging.Filter):
    """Give every record the current run's ids (see :data:`LOG_FIELDS`); ids passed in
    ``extra`` win. Attach it to a handler: logger filters do not apply to child loggers."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _ids.get()
        for name in LOG_FIELDS:
            if not hasattr(record, name):
                setattr(record, name, getattr(ids, name))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the run's ids, and the
    exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in LOG_FIELDS:
            entry[name] = getattr(record, name, None)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class SpanNotes:
    """What a call site adds to its span once known; without OpenTelemetry, nothing."""

    __slots__ = ("_span",)

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def set(self, **attributes: Any) -> None:
        """Attributes by name, dots written as ``__`` (``gen_ai__request__model``)."""
        if self._span is not None:
            for key, value in attributes.items():
                if value is not None:
                    self._span.set_attribute(key.replace("__", "."), value)

    def usage(self, usage: Mapping[str, Any], finish_reason: str | None) -> None:
        """A model call's token counts and finish reason."""
        if self._span is not None:
            self.set(
                gen_ai__usage__input_tokens=usage.get("inputTokens"),
                gen_ai__usage__output_tokens=usage.get("outputTokens"),
            )
            if finish_reason:
                self._span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])

    def failed(self, error_type: str) -> None:
        """The call failed without raising through the span (a tool's caught exception)."""
        if self._span is not None:
            self._span.set_attribute("error.type", error_type)
            self._span.set_status(StatusCode.ERROR)


_NO_NOTES = SpanNotes()


def _recording() -> bool:
    """Whether spans can be recorded: the API is installed and an application set a tracer
    provider. Until one is set the global provider is the API's proxy, whose spans record
    nothing, so the run skips making them (a span per step and call is a measurable share
    of a fast run: docs/benchmarks.md); a provider set later is seen by the next scope."""
    return otel_trace is not None and not isinstance(
        otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider
    )


@contextmanager
def _scope(ids: LogIds, name: str, kind: str, attributes: dict[str, Any]) -> Iterator[SpanNotes]:
    token = _ids.set(ids)
    try:
        if not _recording():
            yield _NO_NOTES
            return
        tracer = otel_trace.get_tracer(_TRACER)
        with tracer.start_as_current_span(
            name, kind=getattr(SpanKind, kind), attributes=attributes
        ) as span:
            yield SpanNotes(span)
    finally:
        _ids.reset(token)


def run_span(*, run_id: str, thread_id: str, agent_name: str, attempt: int) -> Any:
    """The run's episode (one claim of it)."""
    return _scope(
        LogIds(run_id=run_id, thread_id=thread_id, attempt=attempt),
        f"invoke_agent {agent_name}",
        "INTERNAL",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent_name,
            "gen_ai.conversation.id": thread_id,
            "pai.run.id": run_id,
            "pai.run.attempt": attempt,
        }
        if otel_trace is not None
        else {},
    )


def step_span(index: int) -> Any:
    """Model step ``index`` of the current run."""
    return _scope(
        replace(_ids.get(), step_index=index),
        "pai.step",
        "INTERNAL",
        {"pai.step.index": index} if otel_trace is not None else {},
    )


def model_call_span(*, provider: str, model_id: str) -> Any:
    """One provider call (an attempt of the current step)."""
    return _scope(
        _ids.get(),
        f"chat {model_id}",
        "CLIENT",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model_id,
            "gen_ai.provider.name": provider,
        }
        if otel_trace is not None
        else {},
    )


def tool_span(*, tool_name: str, tool_call_id: str) -> Any:
    """One server tool call."""
    return _scope(
        _ids.get(),
        f"execute_tool {tool_name}",
        "INTERNAL",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": tool_call_id,
            "gen_ai.tool.type": "function",
        }
        if otel_trace is not None
        else {},
    )

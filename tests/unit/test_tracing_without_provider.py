"""Spans are skipped until the application sets a tracer provider (pai_agents.tracing)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pai_agents import tracing


def test_with_the_api_default_provider_no_tracer_is_asked_and_the_ids_are_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)

    def no_tracer(*_: Any, **__: Any) -> Any:
        raise AssertionError("a span was started without a tracer provider")

    monkeypatch.setattr(trace, "get_tracer", no_tracer)
    with (
        tracing.run_span(run_id="r1", thread_id="t1", agent_name="a", attempt=2),
        tracing.step_span(3),
        tracing.model_call_span(provider="p", model_id="m") as notes,
    ):
        notes.set(gen_ai__request__model="m")  # a no-op, never an error
        assert tracing.current_ids() == tracing.LogIds(
            run_id="r1", thread_id="t1", attempt=2, step_index=3
        )
    assert tracing.current_ids() == tracing.LogIds()


def test_a_provider_set_later_records_the_next_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    current: list[Any] = [trace.ProxyTracerProvider()]
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: current[0])
    monkeypatch.setattr(trace, "get_tracer", lambda name, *a, **k: provider.get_tracer(name))
    with tracing.step_span(0):
        pass
    assert memory.get_finished_spans() == ()
    current[0] = provider
    with tracing.step_span(1):
        pass
    [span] = memory.get_finished_spans()
    assert span.name == "pai.step" and span.attributes == {"pai.step.index": 1}

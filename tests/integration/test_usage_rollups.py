"""Usage and cost roll-ups (issue 12, point 5): per run, thread, scope, agent, day and model,
priced with PAI["MODEL_PRICES"], summed in the database on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Run, Step, Thread
from pai_threads.usage import PriceTableError, cost_of, usage_rollup, usage_totals

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {
    "big": {"input": "2.50", "output": "10", "cachedInput": "1.25"},
    "openai:small": {"input": "0.15", "output": "0.60", "reasoning": "1.20"},
}
DAY1 = datetime(2026, 11, 30, 12, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)


@pytest.fixture(autouse=True)
def prices(settings: Any) -> None:
    settings.PAI = {**settings.PAI, "MODEL_PRICES": PRICES}


def _run(scope: str, agent: str = "demo") -> Run:
    thread = Thread.objects.create(scope_key=scope, agent_name=agent)
    return Run.objects.create(thread=thread, scope_key=scope, agent_name=agent, status="completed")


def _step(run: Run, index: int, model: str, usage: dict[str, Any], at: datetime) -> Step:
    return Step.objects.create(
        run=run,
        index=index,
        request={"provider": "openai", "modelId": model},
        usage=usage,
        finish_reason="stop",
        started_at=at,
        finished_at=at + timedelta(seconds=1),
    )


def test_cost_applies_cached_and_reasoning_prices_to_their_share_of_the_counts() -> None:
    usage = {"inputTokens": 1_000_000, "cachedInputTokens": 400_000, "outputTokens": 100_000}
    # 600k uncached at 2.50 + 400k cached at 1.25 + 100k output at 10 per million.
    assert cost_of(usage, "big") == Decimal("1.5") + Decimal("0.5") + Decimal("1")
    reasoning = {"inputTokens": 0, "outputTokens": 1_000_000, "reasoningTokens": 250_000}
    # "provider:model" entries apply to that provider only.
    assert cost_of(reasoning, "small", "openai") == Decimal("0.45") + Decimal("0.3")
    assert cost_of(reasoning, "small", "other") is None
    assert cost_of(usage, "unlisted") is None


def test_a_bad_price_entry_is_a_typed_error(settings: Any) -> None:
    settings.PAI = {**settings.PAI, "MODEL_PRICES": {"m": {"input": "abc", "output": 1}}}
    with pytest.raises(PriceTableError, match="not a number"):
        cost_of({"inputTokens": 1}, "m")
    settings.PAI = {**settings.PAI, "MODEL_PRICES": {"m": {"input": 1}}}
    with pytest.raises(PriceTableError, match="needs 'output'"):
        cost_of({"inputTokens": 1}, "m")


def test_rollups_group_by_scope_agent_day_and_model_and_price_each_step() -> None:
    alice = _run("user:alice")
    _step(alice, 0, "big", {"inputTokens": 1000, "outputTokens": 10}, DAY1)
    _step(alice, 1, "small", {"inputTokens": 2000, "outputTokens": 20}, DAY2)
    bob = _run("user:bob", agent="helper")
    _step(bob, 0, "mystery", {"inputTokens": 5, "outputTokens": 5, "estimated": True}, DAY2)

    by_scope = {row.key: row for row in usage_rollup("scope")}
    assert by_scope["user:alice"].tokens["inputTokens"] == 3000
    assert (
        by_scope["user:alice"].cost
        == (
            Decimal(1000) * Decimal("2.50")
            + 10 * Decimal(10)
            + 2000 * Decimal("0.15")
            + 20 * Decimal("0.60")
        )
        / 1_000_000
    )
    assert by_scope["user:bob"].cost is None and by_scope["user:bob"].unpriced_steps == 1
    assert by_scope["user:bob"].estimated_steps == 1

    by_day = usage_rollup("day")
    assert [(row.key.isoformat(), row.steps) for row in by_day] == [
        ("2026-11-30", 1),
        ("2026-12-01", 2),
    ]
    assert {row.key: row.steps for row in usage_rollup("agent")} == {"demo": 2, "helper": 1}
    assert {row.key for row in usage_rollup("model")} == {"big", "small", "mystery"}
    assert [row.key for row in usage_rollup("day", since=DAY2)] == [DAY2.date()]
    as_json = by_scope["user:alice"].as_json()
    assert as_json["totalTokens"] == 3030 and as_json["cost"] == "0.002912"
    with pytest.raises(ValueError, match="unknown grouping"):
        usage_rollup("planet")  # type: ignore[arg-type]


def test_a_real_run_rolls_up_to_its_own_usage(alice: Identity) -> None:
    """The tool round trip of the demo agent: two steps; the run, thread and scope totals
    equal the sum the engine stored on the run."""
    thread = services.create_thread(alice)
    sent = services.send(
        alice,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "What is 6 * 7?"}]},
        dispatch=False,
    )
    asyncio.run(aexecute_run(sent.run.id))
    run = Run.objects.get(id=sent.run.id)
    total = usage_totals(Step.objects.filter(run=run))
    assert total.steps == 2
    assert total.tokens["inputTokens"] == run.usage["inputTokens"] > 0
    assert total.tokens["outputTokens"] == run.usage["outputTokens"] > 0
    (per_thread,) = usage_rollup("thread", steps=Step.objects.filter(run__thread_id=thread.id))
    assert per_thread.key == thread.id and per_thread.tokens == total.tokens


def test_the_owner_reads_thread_and_run_usage_over_the_api(
    api_client: Any, wait_for_run: Any, settings: Any
) -> None:
    """GET /threads/{id}/usage and /runs/{id}/usage: the owner's totals; another session's
    identity gets 404 as for a missing id."""
    api_client.get("/")
    csrf = {"HTTP_X_CSRFTOKEN": api_client.cookies["csrftoken"].value}
    created = api_client.post("/api/pai/threads", data={}, content_type="application/json")
    thread_id = created.json()["id"]
    sent = api_client.post(
        f"/api/pai/threads/{thread_id}/messages",
        data={"text": "What is 6*7?"},
        content_type="application/json",
        **csrf,
    )
    run = wait_for_run(sent.json()["run"]["id"])
    model = Step.objects.filter(run=run).first().request["modelId"]
    settings.PAI = {**settings.PAI, "MODEL_PRICES": {model: {"input": 1, "output": 2}}}
    cost = (Decimal(run.usage["inputTokens"]) + 2 * run.usage["outputTokens"]) / 1_000_000

    for path in (f"/api/pai/threads/{thread_id}/usage", f"/api/pai/runs/{run.id}/usage"):
        body = api_client.get(path).json()
        assert body["steps"] == 2, body
        assert body["inputTokens"] == run.usage["inputTokens"]
        assert body["totalTokens"] == run.usage["inputTokens"] + run.usage["outputTokens"]
        assert Decimal(body["cost"]) == cost and body["unpricedSteps"] == 0

    stranger = type(api_client)()
    assert stranger.get(f"/api/pai/threads/{thread_id}/usage").status_code == 404
    assert stranger.get(f"/api/pai/runs/{run.id}/usage").status_code == 404

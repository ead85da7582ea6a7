"""The ready-made budget helper (issue 12, point 5): ``ScopeBudget`` refuses a scope's runs
in ``prepare_run`` once its tokens or cost in the window are spent; the refusal reaches the
API typed (a ``blocked`` run, ``metadata.budget.code == "budget_exceeded"``, the refusal as
the answer, no model call, no 500); windows (UTC day, month, all time) are respected."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_threads.models import Run, Step, Thread
from pai_threads.usage import Budget, BudgetExceeded, ScopeBudget, budget_check

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
USAGE = {"inputTokens": 60, "outputTokens": 10, "totalTokens": 70}


def _model() -> ScriptedModel:
    return ScriptedModel(respond=lambda request: ScriptedStep.reply("Sure.", usage=dict(USAGE)))


@pytest.fixture
def budgeted(settings: Any) -> ScriptedModel:
    model = _model()
    agent = define_agent(
        "budgeted",
        instructions="Answer.",
        model=model,
        lifecycle=ScopeBudget(Budget(max_tokens=100, window="day"), message="Budget spent."),
    )
    settings.PAI = {**settings.PAI, "AGENTS": [agent]}
    return model


def _post(client: Client, path: str, body: Any) -> Any:
    client.get("/")
    token = client.cookies["csrftoken"].value
    return client.post(
        f"{API}{path}",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )


def _ask(client: Client, thread_id: str, wait: Callable[..., Run]) -> dict[str, Any]:
    sent = _post(client, f"/threads/{thread_id}/messages", {"text": "hello"})
    assert sent.status_code == 202, sent.content
    run = wait(sent.json()["run"]["id"])
    got = client.get(f"{API}/runs/{run.id}")
    assert got.status_code == 200
    return dict(got.json())


def test_runs_under_budget_and_a_refusal_over_it_reaches_the_api_typed(
    budgeted: ScriptedModel, api_client: Client, wait_for_run: Callable[..., Run]
) -> None:
    thread = _post(api_client, "/threads", {"agent": "budgeted"}).json()
    first = _ask(api_client, thread["id"], wait_for_run)  # 0 of 100 tokens spent
    second = _ask(api_client, thread["id"], wait_for_run)  # 70: still under
    assert first["status"] == second["status"] == "completed"
    assert "budget" not in second["metadata"]

    refused = _ask(api_client, thread["id"], wait_for_run)  # 140 >= 100
    assert refused["status"] == "blocked" and refused["error"] is None
    budget = refused["metadata"]["budget"]
    assert budget["code"] == "budget_exceeded" and budget["limit"] == "tokens"
    assert (budget["used"], budget["allowed"], budget["window"]) == ("140", "100", "day")
    tomorrow = timezone.now().astimezone(UTC).date() + timedelta(days=1)
    assert budget["resetsAt"] == f"{tomorrow.isoformat()}T00:00:00+00:00"
    assert len(budgeted.requests) == 2  # the refused run never called the model
    page = api_client.get(f"{API}/threads/{thread['id']}/messages").json()
    answer = page["messages"][-1]
    assert answer["role"] == "assistant" and answer["parts"][-1]["text"] == "Budget spent."

    # A new day: the window no longer holds those steps, and the scope may run again.
    Step.objects.update(started_at=timezone.now() - timedelta(days=1, hours=1))
    assert _ask(api_client, thread["id"], wait_for_run)["status"] == "completed"


def _spend(scope: str, at: datetime, tokens: dict[str, int]) -> None:
    thread = Thread.objects.create(scope_key=scope, agent_name="budgeted")
    run = Run.objects.create(
        thread=thread, scope_key=scope, agent_name="budgeted", status="completed"
    )
    Step.objects.create(
        run=run,
        index=0,
        request={"provider": "scripted", "modelId": "scripted"},
        usage=tokens,
        started_at=at,
        finished_at=at,
    )


NOW = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)


def test_day_month_and_total_windows_count_only_their_own_steps() -> None:
    _spend("user:w", NOW - timedelta(hours=1), {"inputTokens": 10, "outputTokens": 0})
    _spend("user:w", datetime(2026, 3, 2, tzinfo=UTC), {"inputTokens": 100, "outputTokens": 0})
    _spend("user:w", datetime(2026, 2, 20, tzinfo=UTC), {"inputTokens": 1000, "outputTokens": 0})
    _spend("user:other", NOW, {"inputTokens": 5000, "outputTokens": 0})

    def used(window: Any) -> Any:
        refusal = budget_check("user:w", Budget(max_tokens=1, window=window), now=NOW)
        assert isinstance(refusal, BudgetExceeded)
        return refusal.used, refusal.resets_at

    assert used("day") == (10, datetime(2026, 3, 16, tzinfo=UTC))
    assert used("month") == (110, datetime(2026, 4, 1, tzinfo=UTC))
    assert used("total") == (1110, None)
    assert budget_check("user:w", Budget(max_tokens=11, window="day"), now=NOW) is None


def test_cost_budgets_per_scope(settings: Any) -> None:
    settings.PAI = {**settings.PAI, "MODEL_PRICES": {"scripted": {"input": 1, "output": 1}}}
    for scope in ("user:rich", "user:poor"):
        _spend(scope, NOW, {"inputTokens": 200, "outputTokens": 0})  # 0.0002
    lifecycle = ScopeBudget(
        budget_for=lambda scope: (
            None if scope == "user:rich" else Budget(max_cost=Decimal("0.0002"), window="month")
        )
    )
    poor = budget_check("user:poor", Budget(max_cost=Decimal("0.0002"), window="total"))
    assert poor is not None and poor.limit == "cost" and poor.used == Decimal("0.0002")
    assert budget_check("user:poor", Budget(max_cost=Decimal("0.0003"), window="total")) is None
    rich_run = Run.objects.get(scope_key="user:rich")
    poor_run = Run.objects.get(scope_key="user:poor")
    assert lifecycle.refusal_for(rich_run.id) is None  # unlimited scope
    Step.objects.update(started_at=timezone.now())
    assert lifecycle.refusal_for(poor_run.id) is not None


def test_a_budget_needs_a_limit() -> None:
    with pytest.raises(ValueError, match="max_tokens or max_cost"):
        Budget(window="day")
    with pytest.raises(ValueError, match="window"):
        Budget(max_tokens=1, window="week")  # type: ignore[arg-type]

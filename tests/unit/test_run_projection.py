"""``run_public`` (every run status event's projection) builds RunOut's JSON directly: it
must equal what the schema's validation and JSON dump produce, for every kind of run."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pai_threads.events.projections import RunOut, run_out, run_public
from pai_threads.models import Run

UTC = dt.UTC
PARIS = dt.timezone(dt.timedelta(hours=1))


@pytest.mark.parametrize(
    "fields",
    [
        {"status": "queued", "started_at": None, "finished_at": None},
        {"status": "running", "usage": {"inputTokens": 3, "outputTokens": 0}},
        {"status": "completed", "metadata": {"a": [1, {"b": None, "c": "é\x00"}], "n": 1.5}},
        {"status": "failed", "error": {"message": "secret stack", "type": "ValueError"}},
        {"status": "cancelled", "created_at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=PARIS)},
        {"status": "waiting", "created_at": dt.datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=UTC)},
    ],
    ids=["queued", "running", "completed", "failed", "cancelled", "waiting"],
)
def test_run_public_is_the_schemas_json(fields: dict[str, Any]) -> None:
    values: dict[str, Any] = {
        "id": "run_1",
        "thread_id": "thr_1",
        "initiator": "user",
        "step_count": 2,
        "attempt": 1,
        "usage": {},
        "metadata": {},
        "created_at": dt.datetime(2026, 12, 6, 20, 1, 2, 345678, tzinfo=UTC),
        "started_at": dt.datetime(2026, 12, 6, 20, 1, 3, tzinfo=UTC),
        "finished_at": dt.datetime(2026, 12, 6, 20, 1, 4, 5, tzinfo=UTC),
        **fields,
    }
    run = Run(**values)
    expected = RunOut.model_validate(run_out(run)).model_dump(by_alias=True, mode="json")
    public = run_public(run)
    assert public == expected
    assert list(public) == list(expected)
    assert "secret" not in str(public)  # the stored error stays private
    public["metadata"]["x"] = 1  # a copy: the projection never aliases the row's values
    assert "x" not in run.metadata

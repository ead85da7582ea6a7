"""The W5 table's *completed* cell: why a level may count more deltas than were sent."""

from __future__ import annotations

from benchmarks.report_streaming import completed_cell


def test_a_clean_level_shows_runs_completed_only() -> None:
    level = {"completed": 10, "streams": 10, "step_resets": 0, "reattempted_runs": 0}
    assert completed_cell(level) == "10/10"


def test_re_streamed_steps_and_re_claimed_runs_are_named() -> None:
    level = {"completed": 189, "streams": 200, "step_resets": 14, "reattempted_runs": 11}
    assert completed_cell(level) == "189/200 (14 step resets, 11 runs re-claimed)"
    # Results written before these counts existed still render.
    assert completed_cell({"completed": 5, "streams": 6}) == "5/6"

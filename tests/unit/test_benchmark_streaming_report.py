"""The W4/W5 tables' cells: why clients may get more delta frames than were sent."""

from __future__ import annotations

from benchmarks.report_streaming import completed_cell, deltas_cell


def test_a_clean_level_shows_runs_completed_only() -> None:
    level = {"completed": 10, "streams": 10, "step_resets": 0, "reattempted_runs": 0}
    assert completed_cell(level) == "10/10"


def test_re_streamed_steps_and_re_claimed_runs_are_named() -> None:
    level = {"completed": 189, "streams": 200, "step_resets": 14, "reattempted_runs": 11}
    assert completed_cell(level) == "189/200 (14 step resets, 11 runs re-claimed)"
    # Results written before these counts existed still render.
    assert completed_cell({"completed": 5, "streams": 6}) == "5/6"


def test_resyncs_and_their_replayed_frames_are_named() -> None:
    level = {
        "completed": 200,
        "streams": 200,
        "resyncs": 60,
        "resynced_streams": 59,
        "replayed_frames": 5519,
        "repeated_frames": 4913,
    }
    assert completed_cell(level) == (
        "200/200 (60 resyncs of 59 clients: 5,519 delta frames replayed, "
        "4,913 of deltas the client had)"
    )


def test_the_deltas_cell_shows_the_frames_only_when_replays_added_some() -> None:
    level = {"deltas_received": 40000, "deltas_expected": 40000, "delta_frames": 44702}
    assert deltas_cell(level) == "40,000/40,000 (44,702 frames)"
    assert deltas_cell({**level, "delta_frames": 40000}) == "40,000/40,000"
    # Results from before delta_frames counted every frame as received.
    assert deltas_cell({"deltas_received": 9, "deltas_expected": 10}) == "9/10"

"""``prebuilt_dumps`` (pai_agents.json) writes what ``json.dumps`` writes, with the same
separators: the websocket's frames (default separators) and the Redis replay entries
(compact) are built with it, one per token's event."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from pai_agents.json import prebuilt_dumps
from pai_threads.websocket.frames import encode_frame

VALUES: list[Any] = [
    {"type": "generation.message.chunk", "seq": 12, "chunk": {"delta": 'é \u2028 \x00 "q"'}},
    [1, 2.5, -0.0, 1e300, True, False, None, "", [], {}],
    {"nested": [{"a": [{"b": [None]}]}], "unicode": "日本語 😀"},
    "plain",
    42,
    math.inf,
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
def test_the_text_is_json_dumps_own(value: Any, separators: tuple[str, str]) -> None:
    assert prebuilt_dumps(separators=separators)(value) == json.dumps(value, separators=separators)


@pytest.mark.parametrize("value", VALUES)
def test_frames_are_json_dumps_with_its_defaults(value: Any) -> None:
    assert encode_frame(value) == json.dumps(value)


def test_a_value_json_cannot_write_fails_as_json_dumps_does() -> None:
    with pytest.raises(TypeError):
        prebuilt_dumps()({"at": object()})


def test_a_cycle_fails_instead_of_looping() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(RecursionError):
        prebuilt_dumps(separators=(",", ":"))(cycle)

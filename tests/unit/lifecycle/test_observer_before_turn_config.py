"""Observers' before_turn config: malformed values are ignored, valid ones apply."""

from __future__ import annotations

import math
from types import SimpleNamespace

from pai_agents.lifecycle.observers import observe


def _config(config: dict[str, object]) -> tuple[object, object]:
    observer = observe({"before_turn": lambda snapshot: None})
    run = SimpleNamespace(run_id="run_1")
    return observer._config(config, run)  # type: ignore[arg-type]


def test_before_turn_string_active_tools_is_ignored_not_split_into_letters() -> None:
    patch, _ = _config({"activeTools": "search"})
    assert patch is None  # a str is not a list of tool names: ignored, as other bad values


def test_before_turn_string_stop_sequences_is_ignored() -> None:
    patch, _ = _config({"stopSequences": "END"})
    assert patch is None


def test_before_turn_non_finite_setting_is_ignored() -> None:
    for value in (math.nan, math.inf):
        patch, _ = _config({"temperature": value})
        assert patch is None


def test_before_turn_valid_list_config_still_applies() -> None:
    patch, _ = _config({"activeTools": ["search"], "stopSequences": ["END"], "temperature": 0.5})
    assert patch is not None
    assert list(patch.tools or ()) == ["search"]  # type: ignore[attr-defined]
    assert dict(patch.model_settings or {}) == {  # type: ignore[attr-defined]
        "stopSequences": ["END"],
        "temperature": 0.5,
    }

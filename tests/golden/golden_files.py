"""Comparing a recording with its golden file, or (``PAI_GOLDEN_UPDATE=1``) rewriting it."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["DATA", "check_golden"]

DATA = Path(__file__).resolve().parent / "data"
UPDATE_ENV = "PAI_GOLDEN_UPDATE"


def dumps(recording: Any) -> str:
    return json.dumps(recording, indent=1, ensure_ascii=False) + "\n"


def check_golden(name: str, recording: Any) -> None:
    """``recording`` (normalized) equals ``data/<name>.json``; with ``PAI_GOLDEN_UPDATE=1``
    the file is written instead."""
    path = DATA / f"{name}.json"
    text = dumps(recording)
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path.name}: record it with {UPDATE_ENV}=1"
    expected = path.read_text(encoding="utf-8")
    if json.loads(expected) == json.loads(text):
        return
    diff = difflib.unified_diff(
        expected.splitlines(), text.splitlines(), f"golden/{path.name}", "recorded", lineterm=""
    )
    lines = list(diff)
    shown = "\n".join(lines[:200]) + ("\n..." if len(lines) > 200 else "")
    raise AssertionError(f"{path.name} differs from the recorded behaviour:\n{shown}")

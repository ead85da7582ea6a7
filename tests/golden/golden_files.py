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


# Lists whose items are records (frames, chunks, lines, messages): one compact line each,
# so a diff shows which events changed.
RECORD_LISTS = frozenset({"websocket", "frames", "data", "http", "stdout", "stderr", "messages"})


def dumps(recording: Any) -> str:
    return _pretty(recording, "", records=False) + "\n"


def _pretty(value: Any, indent: str, *, records: bool) -> str:
    inner = indent + " "
    if isinstance(value, list) and value:
        if records:
            items = [inner + _pretty_record(item, inner) for item in value]
        else:
            items = [inner + _pretty(item, inner, records=False) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    if isinstance(value, dict) and value:
        items = [
            f"{inner}{json.dumps(key)}: {_pretty(item, inner, records=key in RECORD_LISTS)}"
            for key, item in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return _compact(value)


def _pretty_record(item: Any, indent: str) -> str:
    """A record on one line, unless it holds record lists itself (an SSE response)."""
    if isinstance(item, dict) and any(k in RECORD_LISTS for k in item):
        return _pretty(item, indent, records=False)
    return _compact(item)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


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

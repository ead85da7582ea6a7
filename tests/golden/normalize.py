"""Normalizing recordings: what legitimately differs between two runs, and nothing else.

* Generated ids (``thr_…``, ``run_…``, ``msg_…``, ``act_…``, ``apr_…`` and PAI's other
  prefixes; the scripted model's ``scripted-N`` response ids and its ``call_N_M`` call ids)
  become ``<prefix>#k``, numbered per prefix in order of first appearance in the recording,
  so a recording still shows which events name the same message or run.
* The scripted model numbers its responses process-wide: its text and reasoning part ids
  (``t12``, ``r12`` under an ``id`` key) become ``<t#k>`` / ``<r#k>`` likewise.
* ISO timestamps become ``<time>``; durations (``durationMs``, ``duration_ms``) ``<ms>``.
* Sequence numbers (``seq``, and ``since`` of a ``resumed`` frame or a ``?since=``) keep
  their distance from the base of their thread log. A log starts at ``time_ms * 1000``
  (``pai_threads.realtime.buffers.base.sequence_base``), so ``seq % 1000`` is that distance
  as long as a log holds fewer than 1000 events, which every scenario does by far.
* ``session:<key>`` scopes (pai_chat's diagnostics) become ``session:<key>``.

Everything else (event types and order, chunk payloads, texts, usage numbers, metadata) is
kept exactly as recorded.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Normalizer"]

_PREFIXES = "thr|run|msg|act|apr|stp|que|txt|att|fil|tdr|rwf"
_ID = re.compile(rf"\b({_PREFIXES})_[0-9a-f]{{24}}\b")
_SCRIPTED = re.compile(r"\bscripted-\d+\b")
_CALL = re.compile(r"\bcall_\d+_\d+\b")
_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_PART_ID = re.compile(r"([rt])\d+")
_SESSION = re.compile(r"\bsession:[a-z0-9]{32}\b")
_DURATIONS = frozenset({"durationMs", "duration_ms"})
_SEQUENCES = frozenset({"seq", "since"})
# Sequence numbers are time_ms * 1000 + n; anything this large is one.
_SEQ_FLOOR = 10**12


class Normalizer:
    """One per recording: placeholders are numbered across everything it normalizes."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: self._item(key, item) for key, item in value.items()}
        if isinstance(value, list):
            return [self(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def _item(self, key: str, value: Any) -> Any:
        if key in _DURATIONS and isinstance(value, int | float) and value is not True:
            return "<ms>"
        if key in _SEQUENCES and isinstance(value, int) and value >= _SEQ_FLOOR:
            return sequence(value)
        if key == "id" and isinstance(value, str) and (part := _PART_ID.fullmatch(value)):
            return self._placeholder(value, part.group(1))
        return self(value)

    def text(self, value: str) -> str:
        value = _ID.sub(lambda m: self._placeholder(m.group(0), m.group(1)), value)
        value = _SCRIPTED.sub(lambda m: self._placeholder(m.group(0), "scripted"), value)
        value = _CALL.sub(lambda m: self._placeholder(m.group(0), "call"), value)
        value = _SESSION.sub("session:<key>", value)
        return _TIME.sub("<time>", value)

    def _placeholder(self, raw: str, prefix: str) -> str:
        known = self._ids.get(raw)
        if known is None:
            count = self._counts[prefix] = self._counts.get(prefix, 0) + 1
            known = self._ids[raw] = f"<{prefix}#{count}>"
        return known


def sequence(value: int) -> int:
    """A sequence number's distance from its log's base."""
    return value % 1000

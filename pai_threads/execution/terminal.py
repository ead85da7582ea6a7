"""Event sinks that render a run for a terminal (used by ``manage.py pai_chat``).

:class:`TerminalSink` writes text deltas the moment they arrive, dims reasoning, and shows
tool calls (``→ calculator({"expression": "2+3"})``) and their results (``← {...}``) on
lines of their own. :class:`JsonlSink` writes every UIMessageChunk as one compact JSON line,
for other programs to consume.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from pai_agents.engine.events import RunEvent
from pai_threads.events.projections import stored_message_public
from pai_threads.events.ui_stream import UIStream
from pai_threads.store.db import run_db

__all__ = ["JsonlSink", "TerminalSink", "Writer", "dumps_line"]

_DIM = "\x1b[2m"
_RED = "\x1b[31m"
_RESET = "\x1b[0m"


class Writer(Protocol):
    """The slice of a text stream the sinks use."""

    def write(self, text: str, /) -> Any: ...

    def flush(self) -> Any: ...


def dumps_line(value: Any) -> str:
    """One compact JSON line (UTF-8 kept as is), newline included."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


class TerminalSink:
    """Human-readable rendering of a run's events, streamed as they arrive."""

    def __init__(self, out: Writer, *, color: bool = False) -> None:
        self.out = out
        self.color = color
        self.status: str | None = None
        self._at_line_start = True
        self._styled: str | None = None  # the ANSI style currently open (reasoning)
        self._tool_names: dict[str, str] = {}

    # -- output helpers --

    def _paint(self, style: str, text: str) -> str:
        return f"{style}{text}{_RESET}" if self.color else text

    def _stream(self, text: str, style: str | None = None) -> None:
        """Append streamed text to the current line, switching styles as needed."""
        if not text:
            return
        if self.color and style != self._styled:
            if self._styled is not None:
                self.out.write(_RESET)
            if style is not None:
                self.out.write(style)
            self._styled = style
        self.out.write(text)
        self._at_line_start = text.endswith("\n")
        self.out.flush()

    def _end_line(self) -> None:
        if self._styled is not None:
            self.out.write(_RESET)
            self._styled = None
        if not self._at_line_start:
            self.out.write("\n")
            self._at_line_start = True

    def _line(self, text: str, style: str | None = None) -> None:
        """Write ``text`` on a line of its own."""
        self._end_line()
        self.out.write((self._paint(style, text) if style else text) + "\n")
        self._at_line_start = True
        self.out.flush()

    def close(self) -> None:
        """End the last line (call after the run)."""
        self._end_line()
        self.out.flush()

    # -- the EventSink protocol --

    async def publish(self, event: RunEvent) -> None:
        kind = event.get("type")
        if kind == "generation.message.chunk":
            self._chunk(event["chunk"])
        elif kind == "run.status":
            self.status = event.get("status")
            if self.status not in ("completed", None):
                self._line(f"[run {self.status}]", _RED)

    def _chunk(self, chunk: dict[str, Any]) -> None:
        kind = chunk.get("type")
        if kind == "text-delta":
            self._stream(chunk.get("delta", ""))
        elif kind == "reasoning-delta":
            self._stream(chunk.get("delta", ""), _DIM)
        elif kind == "reasoning-end":
            self._end_line()
        elif kind == "tool-input-start":
            self._tool_names[chunk["toolCallId"]] = chunk.get("toolName", "?")
        elif kind == "tool-input-available":
            self._tool_names[chunk["toolCallId"]] = chunk.get("toolName", "?")
            self._line(f"→ {chunk.get('toolName', '?')}({_compact(chunk.get('input'))})", _DIM)
        elif kind == "tool-input-error":
            name = chunk.get("toolName", "?")
            self._line(
                f"→ {name}({_compact(chunk.get('input'))}) rejected: {chunk.get('errorText', '')}",
                _RED,
            )
        elif kind == "tool-output-available":
            self._line(f"← {_compact(chunk.get('output'))}", _DIM)
        elif kind == "tool-output-error":
            self._line(f"← error: {chunk.get('errorText', '')}", _RED)
        elif kind == "tool-output-denied":
            self._line("← denied", _RED)
        elif kind == "tool-approval-request":
            name = self._tool_names.get(chunk.get("toolCallId", ""), "?")
            self._line(f"? {name} needs approval (not supported in the terminal)", _RED)
        elif kind == "error":
            self._line(f"error: {chunk.get('errorText', '')}", _RED)
        elif kind == "finish-step":
            # One line per step: whatever the step streamed ends here.
            self._end_line()
            self.out.flush()


class JsonlSink:
    """The run's UIMessageChunks as JSON lines, flushed as they arrive, through the clients'
    stream projection (:class:`~pai_threads.events.ui_stream.UIStream`, one message per
    step): each step's ``finish`` waits for the stored step and carries its public metadata
    (and its suspension records), so the AI SDK's ``readUIMessageStream`` rebuilds each
    stored message exactly. Other events are dropped."""

    def __init__(self, out: Writer) -> None:
        self.out = out
        self.status: str | None = None
        self._streams: dict[str, UIStream] = {}

    async def publish(self, event: RunEvent) -> None:
        kind = event.get("type")
        if kind == "run.status":
            self.status = event.get("status")
        run_id = event.get("runId")
        if not isinstance(run_id, str):
            return
        stream = self._streams.setdefault(run_id, UIStream(run_id))
        if kind == "generation.finished":
            stored = await run_db(
                stored_message_public, str(event["threadId"]), str(event["messageId"])
            )
            if stored is not None:
                event = {**event, "message": stored}
        chunks = stream.feed(event)
        for chunk in chunks:
            self.out.write(dumps_line(chunk))
        if chunks:
            self.out.flush()

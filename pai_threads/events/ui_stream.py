"""A run's events as the UI message chunk stream an AI SDK client folds: the one projection.

The engine publishes each model step's native chunks inside ``generation.*`` events; the
stored message of the step arrives with ``generation.finished`` (projected, timestamps and
suspensions included). :class:`UIStream` turns that into what a client that only runs the
AI SDK's reducer needs to rebuild exactly the projected stored message:

* a step's ``finish`` is held until its message is stored, then sent with the stored public
  metadata as ``messageMetadata`` (``metadata.pai``: runId, status, usage, diagnostics, ...;
  private metadata is never in a projection), preceded by one ``data-pai-suspension``
  chunk per suspended call (see :mod:`pai_agents.messages.suspension_parts`);
* a step that ends by waiting (an approval, a client tool) gets its ``finish`` too, with
  the stored finish reason.

Two shapes, one set of rules:

* ``per_step`` (``pai_chat --jsonl``): one ``start`` .. ``finish`` per stored message,
  exactly PAI's transcript (one assistant message per model step); :func:`step_end` gives
  each step's last chunks, and the realtime publisher applies the same function to the
  websocket's ``generation.message.chunk`` stream;
* one message per run (``message_id`` given: the SSE endpoint for ``useChat``, whose
  ``Chat`` appends everything of one response to one message): the run's first step opens
  the message under ``message_id``, later steps only add their ``start-step`` .. parts,
  each stored step merges its metadata through a ``message-metadata`` chunk, and one
  ``finish`` ends the response when the run stops streaming. That message equals
  :func:`pai_threads.ai_sdk.view.chat_messages`' view of the run (docs/ai-sdk.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pai_agents.messages.suspension_parts import SUSPENSION_PART, suspension_chunks
from pai_agents.messages.types import UIMessageChunk

__all__ = [
    "STREAMING_STATUSES",
    "UIStream",
    "is_steering",
    "steering_part",
    "step_end",
    "step_metadata",
]

STREAMING_STATUSES = frozenset({"queued", "running"})


class UIStream:
    """Feed one run's events in order; each call returns the client chunks they give."""

    def __init__(
        self, run_id: str, *, one_message: bool = False, message_ids: Sequence[str] = ()
    ) -> None:
        """``one_message``: the run as one client message; ``message_ids``: the run's
        assistant messages the client already holds in it (a continuation after an approval
        or a client tool output, a resume); the first names the client message, else the
        run's first generation does (the id :mod:`pai_threads.ai_sdk.view` gives it)."""
        self.run_id = run_id
        self.one_message = one_message
        self.message_ids = list(message_ids)
        self.message_id = self.message_ids[0] if self.message_ids else ""
        self.ended = False
        self._started_ids: set[str] = set()  # per step: messages whose `start` was sent
        self._opened = False  # one-message mode: the client message's `start` was sent
        self._open: str | None = None  # the generation in progress
        self._held: dict[str, UIMessageChunk] = {}  # message id -> its withheld `finish`
        self._skip: set[str] = set()
        self._finish_reason = "stop"

    @property
    def per_step(self) -> bool:
        return not self.one_message

    def feed(self, event: Mapping[str, Any]) -> list[UIMessageChunk]:
        kind = event.get("type")
        if kind == "message.committed" and not self.ended:
            return self._committed(event.get("message"))
        if event.get("runId") != self.run_id or self.ended:
            return []
        if kind == "generation.started":
            return self._started(event)
        if kind == "generation.message.chunk":
            return self._chunk(str(event["messageId"]), dict(event["chunk"]))
        if kind == "generation.finished":
            return self._finished(str(event["messageId"]), event.get("message"))
        if kind == "run.status" and event.get("status") not in STREAMING_STATUSES:
            return self.end()
        return []

    def end(self) -> list[UIMessageChunk]:
        """The run stopped streaming: what closes the response (one-message mode's
        ``finish``; nothing more per step)."""
        if self.ended:
            return []
        self.ended = True
        if self.per_step or not self._opened:
            return []
        return [{"type": "finish", "finishReason": self._finish_reason}]

    def _committed(self, message: Any) -> list[UIMessageChunk]:
        """A step of this run stored outside a generation (a client tool's answer written
        into it): in one-message mode, its results, suspensions and metadata, so the client
        message holds what the stored one does (a per-step client replaces the message)."""
        if self.per_step or not isinstance(message, dict):
            return []
        pai = (message.get("metadata") or {}).get("pai") or {}
        if is_steering(message, self.run_id):
            # Input steered into the run between its steps: inside the one client message,
            # where the SDK (and convertToModelMessages) keep it as a user turn.
            return [steering_part(message)] if self._opened else []
        if message.get("role") != "assistant" or pai.get("runId") != self.run_id:
            return []
        if str(message["id"]) not in self.message_ids:
            return []
        out: list[UIMessageChunk] = []
        if not self._opened:  # the continuation's first chunk
            self._opened = True
            out.append({"type": "start", "messageId": self.message_id})
        out += [c for part in message.get("parts") or [] for c in result_chunks(part)]
        out += suspension_chunks(message)
        out.append(
            {
                "type": "message-metadata",
                "messageMetadata": step_metadata(message, self.message_ids),
            }
        )
        return out

    def _started(self, event: Mapping[str, Any]) -> list[UIMessageChunk]:
        out: list[UIMessageChunk] = []
        if self._open is not None and event.get("restarted"):
            # A restarted attempt (worker crash): drop what the abandoned one showed and
            # go on in the same client message, not a second one.
            out.append({"type": "reset-step"})
            self._skip = {"start", "start-step"}
        self._open = str(event["messageId"])
        return out

    def _chunk(self, message_id: str, chunk: UIMessageChunk) -> list[UIMessageChunk]:
        kind = chunk.get("type")
        if kind in self._skip:
            self._skip.discard(str(kind))
            return []
        self._skip.clear()
        if kind == SUSPENSION_PART:
            return []  # (a published stream's; they are rebuilt from the stored message)
        if kind == "finish":
            self._held[message_id] = chunk
            return []
        if kind == "start":
            return self._start(message_id, chunk)
        return [chunk]

    def _start(self, message_id: str, chunk: UIMessageChunk) -> list[UIMessageChunk]:
        if self.per_step:
            self._started_ids.add(message_id)
            return [chunk]
        metadata = chunk.get("messageMetadata")
        if self._opened:  # later steps join the one client message
            if metadata is None:
                return []
            return [{"type": "message-metadata", "messageMetadata": metadata}]
        self._opened = True
        self.message_id = self.message_id or message_id
        start: UIMessageChunk = {"type": "start", "messageId": self.message_id}
        if metadata is not None:
            start["messageMetadata"] = metadata
        return [start]

    def _finished(self, message_id: str, message: Any) -> list[UIMessageChunk]:
        if self._open == message_id:
            self._open = None
        held = self._held.pop(message_id, None)
        if self.per_step and message_id not in self._started_ids:
            return []  # (a message this stream never opened)
        if not isinstance(message, dict):
            return [held] if held is not None and self.per_step else []
        reason = stored_finish_reason(message, held)
        if reason:
            self._finish_reason = reason
        if self.per_step:
            return step_end(message, held, reason=self._finish_reason)
        if message_id not in self.message_ids:
            self.message_ids.append(message_id)
        merged: UIMessageChunk = {
            "type": "message-metadata",
            "messageMetadata": step_metadata(message, self.message_ids),
        }
        return [*suspension_chunks(message), merged]


def stored_finish_reason(message: Mapping[str, Any], finish: UIMessageChunk | None) -> str | None:
    """Why a stored step ended: its ``finish`` chunk's reason, else its diagnostics'."""
    pai = (message.get("metadata") or {}).get("pai") or {}
    reason = (finish or {}).get("finishReason") or (pai.get("diagnostics") or {}).get(
        "finishReason"
    )
    return str(reason) if reason else None


def step_end(
    message: dict[str, Any], finish: UIMessageChunk | None = None, *, reason: str = "stop"
) -> list[UIMessageChunk]:
    """The chunks that end one step's chunk stream once its message is stored (the
    websocket's and ``pai_chat --jsonl``'s): a ``data-pai-suspension`` chunk per suspended
    call, then ``finish`` (the step's own, else one with the stored reason, ``reason`` when
    none is stored: a step that waits sends none) carrying the stored public metadata, so
    the AI SDK's reducer rebuilds the projected stored message exactly."""
    end: UIMessageChunk = {
        "type": "finish",
        "finishReason": stored_finish_reason(message, finish) or reason,
    }
    metadata = message.get("metadata")
    if metadata:
        end["messageMetadata"] = metadata
    return [*suspension_chunks(message), end]


def result_chunks(part: Mapping[str, Any]) -> list[UIMessageChunk]:
    """The chunk that gives a client tool part the stored result of ``part`` (with its
    ``toolMetadata``); none for a part without one."""
    state = part.get("state")
    call_id = part.get("toolCallId")
    if not isinstance(call_id, str) or state not in ("output-available", "output-error"):
        return []
    chunk: UIMessageChunk = {"type": "tool-output-available", "toolCallId": call_id}
    if state == "output-available":
        chunk["output"] = part.get("output")
    else:
        chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": part["errorText"]}
    if part.get("type") == "dynamic-tool":
        chunk["dynamic"] = True
    if "toolMetadata" in part:
        chunk["toolMetadata"] = part["toolMetadata"]
    return [chunk]


def step_metadata(step: Mapping[str, Any], message_ids: Sequence[str]) -> dict[str, Any]:
    """What a stored step contributes to its run's one client message: its public metadata,
    with ``pai.messageIds``, the stored ids of the run's steps so far."""
    metadata = dict(step.get("metadata") or {})
    metadata["pai"] = {**(metadata.get("pai") or {}), "messageIds": list(message_ids)}
    return metadata


def is_steering(message: Mapping[str, Any], run_id: str | None) -> bool:
    """Whether ``message`` is user input of run ``run_id`` (its input or steered into it)."""
    pai = (message.get("metadata") or {}).get("pai") or {}
    return (
        run_id is not None
        and message.get("role") == "user"
        and pai.get("runId") == run_id
        and pai.get("relation") == "input"
    )


_STEERING_FIELDS = {
    "text": ("type", "text", "providerMetadata"),
    "file": ("type", "mediaType", "url", "filename", "providerReference", "providerMetadata"),
}


def steering_part(message: Mapping[str, Any]) -> UIMessageChunk:
    """A user message steered into a run as the AI SDK's ``steering-message`` (the chunk
    and the part it folds to are the same object): its text and file parts."""
    parts = [
        {k: part[k] for k in _STEERING_FIELDS[part["type"]] if k in part}
        for part in message.get("parts") or []
        if part.get("type") in _STEERING_FIELDS
    ]
    return {"type": "steering-message", "id": str(message["id"]), "parts": parts}

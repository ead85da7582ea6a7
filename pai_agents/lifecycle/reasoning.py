"""Reasoning a run does not send to clients (``RunPatch(send_reasoning=False)``, TH-016).

The engine takes the episode's reasoning parts out of the canonical stream after
transform_step_stream (so observers still see them), before they are reduced, published or
stored: no realtime event, SSE line, snapshot or stored message ever carries them. The
model loop is unchanged: :meth:`HiddenReasoning.restore` puts the parts back, at their
original positions, into the history every later step of the episode is built from. The
parts are never durable, so an episode that starts after a waiting boundary or a crash
does not have them (the peer persists only what it streamed, too); once a newer user
message exists, reasoning is pruned from requests anyway (LC-097).
"""

from __future__ import annotations

import copy
from typing import Final

from pai_agents.messages.types import UIMessage, UIMessagePart
from pai_agents.models.base import StepStreamPart

__all__ = ["REASONING_PART_TYPES", "HiddenReasoning"]

REASONING_PART_TYPES: Final = frozenset({"reasoning-start", "reasoning-delta", "reasoning-end"})


class HiddenReasoning:
    """The hidden reasoning parts of one execution episode, by message id."""

    def __init__(self) -> None:
        # message id -> [(visible parts before it, reasoning part)], in stream order
        self._parts: dict[str, list[tuple[int, UIMessagePart]]] = {}
        self._open: dict[str, UIMessagePart] = {}

    def take(self, part: StepStreamPart, message: UIMessage) -> bool:
        """Keep ``part`` if it is reasoning for ``message`` (then the caller drops it)."""
        kind = part.get("type")
        if kind not in REASONING_PART_TYPES:
            return False
        part_id = str(part.get("id"))
        current = self._open.get(part_id)
        if current is None:
            # Shaped as the reducer shapes it, so restored history converts identically.
            current = {"type": "reasoning", "id": part_id, "text": "", "state": "streaming"}
            self._open[part_id] = current
            slot = (len(message["parts"]), current)
            self._parts.setdefault(message["id"], []).append(slot)
        if part.get("providerMetadata") is not None:
            current["providerMetadata"] = copy.deepcopy(part["providerMetadata"])
        if kind == "reasoning-delta":
            # The canonical fragment is ``text`` (LC-104); a provider part has ``delta``.
            current["text"] += str(part["text"] if "text" in part else part.get("delta", ""))
        elif kind == "reasoning-end":
            current["state"] = "done"
            del self._open[part_id]
        return True

    def restore(self, history: list[UIMessage]) -> list[UIMessage]:
        """``history`` with the hidden parts back in their messages (copies; input unchanged)."""
        if not self._parts:
            return history
        restored: list[UIMessage] = []
        for message in history:
            hidden = self._parts.get(message["id"])
            if hidden:
                parts = list(message["parts"])
                for offset, (position, part) in enumerate(hidden):
                    done = {**part, "state": "done"}  # a cut-off part is settled like the reducer
                    parts.insert(position + offset, done)
                message = {**message, "parts": parts}
            restored.append(message)
        return restored

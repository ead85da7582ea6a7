"""The rows of :class:`~pai_agents.engine.memory.InMemoryThreadStore`: a run and a stored
message, with the message's client projection (as the ORM's ``Message.to_ui_message``)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pai_agents.messages.types import UIMessage

__all__ = ["MemoryMessage", "MemoryRun"]


@dataclass(kw_only=True)
class MemoryRun:
    id: str
    thread_id: str
    agent_name: str
    scope_key: str
    identity: dict[str, Any]
    client_data: dict[str, Any]
    initiator: str = "send"
    status: str = "queued"
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_token: int = 0
    attempt: int = 0
    step_count: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    cancel_requested: bool = False
    # Set by the first claim only: the logical run start hooks see as run.started_at (LC-007).
    started_at: datetime | None = None


@dataclass(kw_only=True)
class MemoryMessage:
    message: UIMessage
    thread_id: str
    run_id: str | None
    position: int
    status: str = "committed"
    step_index: int | None = None
    context: bool = True
    # A step message's own usage and diagnostics (MF-002), projected by client_messages.
    usage: dict[str, Any] | None = None
    diagnostics: dict[str, Any] | None = None

    def client_message(self) -> UIMessage:
        """The client projection, as the ORM's ``Message.to_ui_message``: ``metadata.pai``
        with producer (step: ``model``; run input: ``send``; no run: ``lifecycle``)."""
        producer = (
            "model" if self.step_index is not None else "send" if self.run_id else "lifecycle"
        )
        pai: dict[str, Any] = {"producer": producer, "status": self.status}
        if self.run_id:
            pai["runId"] = self.run_id
        if self.usage is not None:
            pai["usage"] = copy.deepcopy(self.usage)
        if self.diagnostics is not None:
            pai["diagnostics"] = copy.deepcopy(self.diagnostics)
        message = copy.deepcopy(self.message)
        message["metadata"] = {**(message.get("metadata") or {}), "pai": pai}
        return message

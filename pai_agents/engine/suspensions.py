"""Suspension episodes in the engine: loading a call's history, and declared suspensions.

Only resumed calls have a history, so the engine asks for it once per resume episode and
only when something will read it (a tool hook, or a tool that declares suspensions): an
initial dispatch never touches the store for it. A store without
:class:`SuspensionHistoryStore` gives empty histories (LC-132, LC-133).

A tool's ``execute`` that returns ``ctx.suspend(name, payload=...)`` ends without a result:
:func:`split_suspended` turns it into an :class:`ActionRequest` of kind ``input`` (the next
episode of the call) and keeps it away from after_tool_result (LC-140). When the answered
call resumes, :func:`input_entry` is its ``ctx.entry`` (docs/suspensions.md).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pai_agents.engine.step_stream import PendingCall
from pai_agents.engine.store import ActionRequest, Lease
from pai_agents.lifecycle.inputs import ResumeEntry
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_agents.messages.types import UIMessageChunk
from pai_agents.subagents import SubagentTool
from pai_agents.suspensions import Suspend, answer_schema

__all__ = [
    "SuspensionHistoryStore",
    "input_entry",
    "latest_input",
    "load_suspend_history",
    "split_suspended",
]


@runtime_checkable
class SuspensionHistoryStore(Protocol):
    async def suspend_history(
        self, lease: Lease, *, tool_call_ids: Collection[str]
    ) -> Mapping[str, Sequence[SuspensionEpisode]]:
        """The run's suspension episodes of these calls, oldest first, by tool call id."""
        ...


async def load_suspend_history(
    store: Any, lease: Lease, tool_call_ids: Collection[str]
) -> dict[str, tuple[SuspensionEpisode, ...]]:
    """One store read for all ``tool_call_ids`` (none when there are none)."""
    if not tool_call_ids or not isinstance(store, SuspensionHistoryStore):
        return {}
    found = await store.suspend_history(lease, tool_call_ids=tool_call_ids)
    return {call_id: tuple(episodes) for call_id, episodes in found.items()}


def split_suspended(
    results: Sequence[tuple[UIMessageChunk, float]],
    calls: Sequence[PendingCall],
    history: Mapping[str, Sequence[SuspensionEpisode]],
) -> tuple[list[tuple[UIMessageChunk, float, PendingCall]], list[ActionRequest]]:
    """The calls' final results (to pass after_tool_result) and the pending actions of the
    calls that suspended instead, each the call's next episode (``sequence``)."""
    final: list[tuple[UIMessageChunk, float, PendingCall]] = []
    actions: list[ActionRequest] = []
    for (chunk, ms), call in zip(results, calls, strict=True):
        suspend = chunk.get("output")
        if chunk.get("type") != "tool-output-available" or not isinstance(suspend, Suspend):
            final.append((chunk, ms, call))
            continue
        # A sub-agent call is answered by the runtime (no schema); a declared suspension
        # by a person, against the declared model.
        subagent = isinstance(call.tool, SubagentTool)
        actions.append(
            ActionRequest(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool.name,
                kind="subagent" if subagent else "input",
                input=suspend.payload,
                suspension=suspend.name,
                answer_schema=None if subagent else answer_schema(call.tool.suspends[suspend.name]),
                sequence=len(history.get(call.tool_call_id, ())),
            )
        )
    return final, actions


def latest_input(
    history: Mapping[str, Sequence[SuspensionEpisode]], tool_call_id: str
) -> SuspensionEpisode | None:
    """The call's latest episode when it is an input suspension or a sub-agent call: it,
    not the run's ``executing_tool_calls`` (which counts any earlier episode), says where
    the call is."""
    episodes = history.get(tool_call_id, ())
    if episodes and episodes[-1].kind in ("input", "subagent"):
        return episodes[-1]
    return None


def input_entry(tool_name: str, tool_call_id: str, episode: SuspensionEpisode) -> ResumeEntry:
    """LC-133: the resume entry of an answered input suspension: the validated answer as
    stored, and a reference to its pending action."""
    resolution = episode.resolution if isinstance(episode.resolution, Mapping) else {}
    return ResumeEntry(
        name=tool_name,
        suspension=episode.name,
        resume=resolution.get("answer"),
        action={
            "id": episode.action_id,
            "kind": episode.kind,
            "toolCallId": tool_call_id,
            "suspension": episode.name,
        },
    )

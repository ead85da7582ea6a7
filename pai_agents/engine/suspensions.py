"""Loading a resumed call's suspension history for the tool hooks (LC-132, LC-133).

Only resumed calls have a history, so the engine asks for it once per resume episode and
only when a tool hook will read it: an initial dispatch never touches the store for it.
A store without :class:`SuspensionHistoryStore` gives empty histories.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pai_agents.engine.store import Lease
from pai_agents.lifecycle.suspensions import SuspensionEpisode

__all__ = ["SuspensionHistoryStore", "load_suspend_history"]


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

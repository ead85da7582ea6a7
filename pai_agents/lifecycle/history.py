"""The step-anchored history resolve_model_context reads (LC-044..LC-048).

``through`` is captured once, when the step starts: every read is bounded by it, so
messages appended later (by anyone, the resolver included) never leak into the step.
Works over any :class:`~pai_agents.lifecycle.facade.ReadMessageClient`.
"""

from __future__ import annotations

from pai_agents.lifecycle.facade import (
    LifecycleMessage,
    MessageOrder,
    MessageView,
    Page,
    ReadMessageClient,
)
from pai_agents.messages.model_messages import to_model_messages
from pai_agents.models.base import ModelMessage

__all__ = ["AnchoredHistory", "matches_view"]


def matches_view(message: LifecycleMessage, view: MessageView) -> bool:
    if view == "context":
        return message.visibility.context
    if view == "transcript":
        return message.visibility.transcript
    return True


class AnchoredHistory:
    """:class:`~pai_agents.lifecycle.inputs.LifecycleModelHistory` over a message client."""

    def __init__(self, messages: ReadMessageClient, through: LifecycleMessage | None) -> None:
        self._messages = messages
        self._through = through

    @classmethod
    async def anchor(cls, messages: ReadMessageClient) -> AnchoredHistory:
        """Capture the newest physical message now (call at step start)."""
        page = await messages.list(view="all", order="desc", limit=1)
        return cls(messages, page.items[0] if page.items else None)

    @property
    def through(self) -> LifecycleMessage | None:
        return self._through

    async def before(
        self,
        *,
        view: MessageView = "context",
        order: MessageOrder = "asc",
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Page[LifecycleMessage]:
        if self._through is None:
            return Page(items=())
        return await self._messages.list(
            view=view,
            order=order,
            before_message_id=self._through.id,
            after_message_id=after_message_id,
            limit=limit,
            page_token=page_token,
        )

    async def collect(
        self,
        *,
        view: MessageView = "context",
        order: MessageOrder = "asc",
        after_message_id: str | None = None,
    ) -> list[LifecycleMessage]:
        collected: list[LifecycleMessage] = []
        token: str | None = None
        while True:
            page = await self.before(
                view=view, order="asc", after_message_id=after_message_id, page_token=token
            )
            collected.extend(page.items)
            token = page.next_page_token
            if token is None:
                break
        anchor = self._through
        if anchor is not None and matches_view(anchor, view) and anchor.id != after_message_id:
            collected.append(anchor)
        return collected if order == "asc" else collected[::-1]

    async def model_messages(
        self,
        *,
        view: MessageView = "context",
        order: MessageOrder = "asc",
        after_message_id: str | None = None,
    ) -> list[ModelMessage]:
        selected = await self.collect(view=view, order=order, after_message_id=after_message_id)
        return to_model_messages([m.to_ui_message() for m in selected])

    async def default_leaf(self) -> list[ModelMessage]:
        """The default context: every context-visible message, oldest first (LC-043)."""
        return await self.model_messages()

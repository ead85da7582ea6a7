"""Realtime delivery of thread state to browsers: websocket consumer, publisher, replay.

See docs/realtime.md for the wire protocol. ``pai_threads.execution.execute`` publishes every run
through :class:`RealtimePublisher`; :class:`~.consumers.ThreadConsumer` serves
``ws/pai/threads/<thread_id>/``.
"""

from pai_threads.realtime.delivery import publish, publish_sync
from pai_threads.realtime.publisher import RealtimePublisher, TeeSink

__all__ = ["RealtimePublisher", "TeeSink", "publish", "publish_sync"]

"""A leaner in-memory channel layer for the embedded default.

Channels' ``InMemoryChannelLayer`` scans every channel and group membership for expired
entries on each send, receive and group send, so fanning out one token delta costs more
the more browsers are connected (benchmark W4 profiles it at a fifth of the server's CPU
with 100 streams). Here the scan runs at most once a second; expired messages may linger
that much longer, which nothing relies on.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer

__all__ = ["InMemoryChannelLayer"]


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    _last_clean = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._last_clean >= 1.0:
            self._last_clean = now
            super()._clean_expired()

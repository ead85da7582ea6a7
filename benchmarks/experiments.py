"""Runtime changes tried out by the benchmarks before they are proposed (never the default).

``PAI_BENCH_CHANNEL_LAYER=throttled`` (read by :mod:`benchmarks.settings`) serves W4/W5
with :class:`ThrottledInMemoryChannelLayer`: Channels' in-memory layer scans every channel
and every group membership (``_clean_expired``) on each ``send``, ``receive`` and
``group_send``, which makes one delta's fan-out O(connected consumers); here the scan runs
at most once a second. Used to size the proposal in docs/benchmarks.md, not in its tables.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer

__all__ = ["ThrottledInMemoryChannelLayer"]


class ThrottledInMemoryChannelLayer(InMemoryChannelLayer):
    _last_clean = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._last_clean >= 1.0:
            self._last_clean = now
            super()._clean_expired()

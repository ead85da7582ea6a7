"""The group message the joint Redis script writes (issue 16, W5): its bytes up to the
``__asgi_channel__`` value, packed in one call, are what channels-redis' serializer writes."""

from __future__ import annotations

from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest

from pai_threads.realtime.redis_layer import RedisChannelLayer


def _layer() -> RedisChannelLayer:
    # No connection is made: fan_out_args only packs.
    return RedisChannelLayer(hosts=["redis://127.0.0.1:1/0"], random_prefix_length=0)


EVENTS = [
    {
        "type": "generation.message.chunk",
        "seq": 0xCAFE << 48,
        "chunk": {"type": "text-delta", "delta": "d é \x00"},
    }
]


@pytest.mark.parametrize(
    "message",
    [
        {"type": "pai.events", "events": EVENTS},
        {"type": "pai.events"},
        {f"k{i}": i for i in range(14)},  # 15 entries with the channel: still a fixmap
        {f"k{i}": [i, b"raw", None, 1.5] for i in range(15)},  # 16: a map16 header
        {f"k{i}": i for i in range(70_000)},  # a map32 header
    ],
    ids=["batch", "one-entry", "fixmap-limit", "map16", "map32"],
)
def test_the_body_is_what_channels_redis_writes_up_to_the_channel(message: dict[str, Any]) -> None:
    channels = ["specific.abc!one", "specific.abc!two"]
    _, body, _ = _layer().fan_out_args("pai.thread.thr_1", message)
    written = body + msgpack.packb(channels)
    assert written == msgpack.packb({**message, "__asgi_channel__": channels})
    assert msgpack.unpackb(written) == {**message, "__asgi_channel__": channels}

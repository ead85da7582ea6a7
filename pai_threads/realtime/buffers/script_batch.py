"""Calls of one Redis script from one event loop, sent together: one round trip for all
the calls made while the loop was busy.

A worker process runs every run on one loop (docs/operations.md), and each run's
publisher flushes its batch in a task of its own: the flushes that become ready in the
same loop iteration (many streams at once) then cost one pipeline (``EVALSHA`` each, no
``MULTI``) instead of one round trip each, which was most of a published delta's CPU.
Nothing waits for company: the first call of an iteration sends at the start of the next,
with whatever joined it meanwhile. Each call still gets its own reply or error, and calls
run in the order they were made (one publisher never has two in flight).
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.exceptions import NoScriptError

__all__ = ["ScriptBatch"]


class ScriptBatch:
    """``script(keys=..., args=...)`` calls of one loop, pipelined per loop iteration."""

    def __init__(self, client: Any, script: Any) -> None:
        self.client = client
        self.script = script  # redis-py's registered script: its sha and its text
        self.pending: list[tuple[list[Any], list[Any], asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def call(self, keys: list[Any], args: list[Any]) -> asyncio.Future[Any]:
        """The script's reply for ``keys`` and ``args`` (a future to await)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self.pending.append((keys, args, future))
        if len(self.pending) == 1:
            task = loop.create_task(self._send())
            self._tasks.add(task)  # owned until done
            task.add_done_callback(self._tasks.discard)
        return future

    async def _send(self) -> None:
        batch, self.pending = self.pending, []
        try:
            replies = await self._replies(batch)
        except BaseException as exc:
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc) if isinstance(exc, Exception) else future.cancel()
            if not isinstance(exc, Exception):
                raise
            return
        for (_, _, future), reply in zip(batch, replies, strict=True):
            if future.done():
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _replies(self, batch: list[tuple[list[Any], list[Any], Any]]) -> list[Any]:
        if len(batch) == 1:
            keys, args, _ = batch[0]
            return [await self.script(keys=keys, args=args)]  # reloads it after NOSCRIPT
        pipe = self.client.pipeline(transaction=False)
        for keys, args, _ in batch:
            pipe.evalsha(self.script.sha, len(keys), *keys, *args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        for i, reply in enumerate(replies):
            if isinstance(reply, NoScriptError):  # not run: Redis forgot it (a restart)
                keys, args, _ = batch[i]
                try:
                    replies[i] = await self.script(keys=keys, args=args)
                except Exception as exc:
                    replies[i] = exc
        return replies

"""Calls of one Redis script from one event loop, sent together and in order: one command
for all the calls made while the previous one was out.

A worker process runs every run on one loop (docs/operations.md), and each run's
publisher hands its batches here. The script takes any number of calls at once (their keys
and arguments one after the other; it tells them apart itself) and replies with a list, one
reply per call: the calls made in the same loop iteration (many streams at once) cost one
``EVALSHA`` instead of one round trip each (which was most of a published delta's CPU), and
instead of one pipelined command each, which redis-py packs, sends and parses one by one in
Python (~10% of a Celery worker's CPU at 200 streams). Nothing waits for company: the first
call sends at the start of the next loop iteration with whatever joined it meanwhile.

One command (or, for a burst, one pipeline of them) is out at a time, and calls go out in
the order they were made: a publisher may hand over a batch without waiting for the
previous one's reply (no task, no lock per token's batch) and its batches still reach
Redis in order. Calls made while one is out form the next. Each call gets its own reply;
an error of the script fails the calls sent with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from redis.exceptions import NoScriptError

__all__ = ["MAX_CALLS_PER_COMMAND", "OnReply", "ScriptBatch"]

logger = logging.getLogger("pai.realtime")

#: Calls per ``EVALSHA`` at most: a burst is split into several commands of one pipeline,
#: so no single script holds the Redis server for long.
MAX_CALLS_PER_COMMAND = 200

#: Told a call's reply, or the exception that failed it, as soon as it is known.
OnReply = Callable[[Any], None]
_Call = tuple[list[Any], list[Any], "asyncio.Future[Any]", OnReply | None]


class ScriptBatch:
    """``script(keys=..., args=...)`` calls of one loop, sent together in call order."""

    def __init__(self, client: Any, script: Any) -> None:
        self.client = client
        self.script = script  # redis-py's registered script: its sha and its text
        self.pending: list[_Call] = []
        self._sender: asyncio.Task[None] | None = None

    def call(
        self, keys: list[Any], args: list[Any], on_reply: OnReply | None = None
    ) -> asyncio.Future[Any]:
        """The script's reply for ``keys`` and ``args`` (a future to await), sent after every
        call made before it. ``on_reply`` is told the reply (or the exception) right where
        it is read, before the future is set: a caller that only watches for errors needs
        no done-callback (each costs a loop callback), and its failed future then counts as
        seen."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self.pending.append((keys, args, future, on_reply))
        if self._sender is None:
            self._sender = loop.create_task(self._send_all())
        return future

    async def _send_all(self) -> None:
        try:
            while self.pending:
                batch, self.pending = self.pending, []
                await self._send(batch)
        except BaseException as exc:  # cancelled (the loop ends): nothing is left waiting
            batch, self.pending = self.pending, []
            _fail(batch, exc)
            raise
        finally:
            self._sender = None

    async def _send(self, batch: list[_Call]) -> None:
        try:
            replies = await self._replies(batch)
        except Exception as exc:
            _fail(batch, exc)
            return
        except BaseException as exc:
            _fail(batch, exc)
            raise
        for call, reply in zip(batch, replies, strict=True):
            _settle(call, reply)

    async def _replies(self, batch: list[_Call]) -> list[Any]:
        chunks = [
            batch[i : i + MAX_CALLS_PER_COMMAND]
            for i in range(0, len(batch), MAX_CALLS_PER_COMMAND)
        ]
        commands = [_joined(chunk) for chunk in chunks]
        if len(commands) == 1:
            keys, args = commands[0]
            return list(await self.script(keys=keys, args=args))  # reloads it after NOSCRIPT
        pipe = self.client.pipeline(transaction=False)
        for keys, args in commands:
            pipe.evalsha(self.script.sha, len(keys), *keys, *args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        calls: list[Any] = []
        for (keys, args), chunk, reply in zip(commands, chunks, replies, strict=True):
            if isinstance(reply, NoScriptError):  # not run: Redis forgot it (a restart)
                try:
                    reply = await self.script(keys=keys, args=args)
                except Exception as exc:
                    reply = exc
            calls += [reply] * len(chunk) if isinstance(reply, Exception) else list(reply)
        return calls


def _joined(calls: list[_Call]) -> tuple[list[Any], list[Any]]:
    keys: list[Any] = []
    args: list[Any] = []
    for call_keys, call_args, _, _ in calls:
        keys += call_keys
        args += call_args
    return keys, args


def _settle(call: _Call, reply: Any) -> None:
    """Tell a call its reply (an exception: it failed)."""
    _, _, future, on_reply = call
    if future.done():
        return
    if on_reply is not None:
        try:
            on_reply(reply)
        except Exception:  # the caller's bug: never leave the other calls unanswered
            logger.exception("a Redis script call's reply handler failed")
    if isinstance(reply, Exception):
        future.set_exception(reply)
        if on_reply is not None:
            future.exception()  # reported by on_reply: not an error nobody retrieved
    else:
        future.set_result(reply)


def _fail(batch: list[_Call], exc: BaseException) -> None:
    for call in batch:
        if isinstance(exc, Exception):
            _settle(call, exc)
        elif not call[2].done():
            call[2].cancel()

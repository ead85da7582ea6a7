"""Celery worker parts for broker outages: a Redis transport and a consumer.

**Transport**: kombu's Redis transport, with one failure made typed.

Celery 5.7's consumer handles a lost broker connection by collecting it
(``Connection.collect()``, which detaches the transport: ``transport.client = None``) and then
closing it (``connection.close()``, new in 5.7). If the loss hit while the consumer was
blocked in ``BRPOP`` and tasks were unacknowledged (``acks_late`` runs in progress), the
collect aborts half-way and the close reaches the default channel again: closing it restores
the unacked messages, which needs a fresh Redis pool, built from ``transport.client``, which
is now None. The resulting ``AttributeError`` is not a connection error, so
``ignore_errors`` lets it through and the worker exits with ``Unrecoverable error``.

This transport raises a Redis ``ConnectionError`` instead when a channel of a detached
transport needs connection parameters: kombu and Celery treat it like any broker failure
(the close is ignored, the consumer reconnects). Nothing is lost by not restoring there:
the messages stay in Redis's unacked index (kombu re-queues them after its visibility
timeout) and the runs they carry are leased, so the sweeper recovers them whatever the
broker remembers.

Selected by ``CELERY_BROKER_TRANSPORT`` (see ``pai_project/settings.py``) for ``redis://``
and ``rediss://`` broker URLs.

**Consumer**: Celery's, reconnecting to a lost broker at most ``RECONNECT_MAX_SECONDS`` apart
(Celery waits 2 s, then 4, 6, ... up to 30 s between attempts, so after a long outage a worker
could stay away for half a minute after the broker's return). Selected by
``CELERY_WORKER_CONSUMER``.
"""

from __future__ import annotations

import functools
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer
from kombu import Connection
from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

__all__ = ["RECONNECT_MAX_SECONDS", "Channel", "Consumer", "Transport"]

RECONNECT_MAX_SECONDS = 4.0


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        transport = self.connection
        if transport is None or transport.client is None:
            raise RedisConnectionError(
                "the broker connection of this channel was closed; reconnect to use it"
            )
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
        return params


class Transport(kombu_redis.Transport):
    Channel = Channel


class Consumer(CeleryConsumer):
    def ensure_connected(self, conn: Connection) -> Connection:
        # Celery passes no intervals to kombu's ensure_connection: give it ours (1 s, 2 s, ...
        # at most RECONNECT_MAX_SECONDS apart), keeping its error handler and retry limit.
        conn.ensure_connection = functools.partial(  # type: ignore[method-assign]
            conn.ensure_connection,
            interval_start=1.0,
            interval_step=1.0,
            interval_max=RECONNECT_MAX_SECONDS,
        )
        connected: Connection = super().ensure_connected(conn)
        return connected

"""Broker messages that could not be sent yet, retried until the broker is back.

A run is dispatched after the transaction that created it committed: when the broker is away
at that moment, the send already succeeded (message and run are stored) and must say so. The
outbox keeps each message the broker refused and a daemon thread retries them in order, with
a short capped backoff, so a run is on its way within about ``max_delay`` seconds of the
broker's return instead of waiting for the sweeper (``REDISPATCH_QUEUED_AFTER_SECONDS``).

While messages wait, later ones join the queue without trying the broker: a request does not
pay a connection timeout per send during an outage, and the order is kept. The outbox lives
in the process: if the process ends first, its runs stay ``queued`` in the database and the
sweeper dispatches them again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["BROKER_ERRORS", "Outbox"]

logger = logging.getLogger("pai.executors")

#: What a publish raises when the broker cannot be reached (Celery wraps most of them in
#: kombu's OperationalError once its own publish retries are spent).
BROKER_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    OSError,
    RedisConnectionError,
    RedisTimeoutError,
)

Publish = Callable[[], object]


class Outbox:
    def __init__(self, *, first_delay: float = 0.25, max_delay: float = 2.0) -> None:
        self.first_delay = first_delay
        self.max_delay = max_delay
        self._pending: dict[str, Publish] = {}  # insertion order is sending order
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def send(self, key: str, publish: Publish) -> bool:
        """Publish now, or keep it for the retry thread; True when the broker took it.

        ``key`` names the message: sending the same key again while it waits replaces it
        (a run dispatched twice needs one message).
        """
        with self._lock:
            if self._pending:
                self._keep(key, publish)
                return False
        try:
            publish()
        except BROKER_ERRORS as exc:
            logger.warning("broker unavailable (%s); %s will be sent when it is back", exc, key)
            with self._lock:
                self._keep(key, publish)
            return False
        return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for the waiting messages to go; returns how many
        are still waiting."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._drained.wait(left)
            return len(self._pending)

    def _keep(self, key: str, publish: Publish) -> None:
        # Called with the lock held.
        self._pending.pop(key, None)
        self._pending[key] = publish
        if self._thread is None:
            self._thread = threading.Thread(target=self._retry, name="pai-outbox", daemon=True)
            self._thread.start()

    def _retry(self) -> None:
        delay = self.first_delay
        attempts = 0
        while True:
            time.sleep(delay)
            with self._lock:
                waiting = list(self._pending.items())
            sent = 0
            for key, publish in waiting:
                try:
                    publish()
                except BROKER_ERRORS as exc:
                    attempts += 1
                    delay = min(delay * 2, self.max_delay)
                    logger.debug("broker still unavailable (%s), attempt %d", exc, attempts)
                    break
                except Exception:
                    # Not the broker: retrying cannot help; the sweeper re-dispatches the run.
                    logger.exception("dropping %s: it cannot be sent", key)
                else:
                    sent += 1
                with self._lock:
                    if self._pending.get(key) is publish:
                        del self._pending[key]
            if sent:
                logger.info("broker back: sent %d waiting message(s)", sent)
            with self._lock:
                if not self._pending:
                    self._thread = None
                    self._drained.notify_all()
                    return

"""Persistence: the ORM implementation of the engine's ThreadStore and what it needs.

* :mod:`.thread_store`: :class:`ORMThreadStore` (claims, fenced writes, checkpoints, steps);
* :mod:`.sql`: the hand-built statements, the one lease predicate (``lease_held``);
* :mod:`.lifecycle_backend`: the ORM backend of the lifecycle facade;
* :mod:`.suspensions`, :mod:`.run_facts`, :mod:`.pagination`, :mod:`.db`: suspension
  episodes on tool parts, what an execution's writes returned, page tokens, sync ORM calls
  from async code (the store threads);
* :mod:`.loop_connections`: the run loop's own PostgreSQL connections for the one-statement
  writes (``observe_statements`` for statement counters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pai_threads.store.thread_store import ORMThreadStore

__all__ = ["ORMThreadStore"]


def __getattr__(name: str) -> Any:
    # Lazy: the store imports the models, which must wait until the app registry is ready.
    if name == "ORMThreadStore":
        from pai_threads.store.thread_store import ORMThreadStore

        return ORMThreadStore
    raise AttributeError(f"module 'pai_threads.store' has no attribute {name!r}")

"""Conditions written so that the planners use the indexes the queries were built for."""

from __future__ import annotations

from typing import TypeVar

from django.db import connection
from django.db.models import Model, QuerySet

__all__ = ["in_thread_order"]

M = TypeVar("M", bound=Model)


def in_thread_order(rows: QuerySet[M], thread_id: str, *, descending: bool = False) -> QuerySet[M]:
    """``rows.filter(thread_id=...).order_by("id")`` (or ``"-id"``), planned on the
    ``(thread_id, id)`` indexes however old or new the thread is.

    PostgreSQL plans ``thread_id = X ORDER BY id DESC LIMIT n`` as a backward scan of the
    primary key, assuming the thread's rows are spread evenly over the table: for a thread
    older than most of the table's rows it filters every newer message of every other thread
    first (23 ms behind 100,000 newer messages, growing with the table; the oldest-first read
    of a new thread alike). Written as the range ``X <= thread_id <= X`` ordered by
    ``(thread_id, id)``, only the ``(thread_id, id)`` indexes give the order, and the read
    starts at the thread's own end (0.1 ms). SQLite already plans the plain form on them."""
    if connection.vendor == "postgresql":
        rows = rows.filter(thread_id__gte=thread_id, thread_id__lte=thread_id)
        order: tuple[str, ...] = ("-thread_id", "-id") if descending else ("thread_id", "id")
    else:
        rows = rows.filter(thread_id=thread_id)
        order = ("-id",) if descending else ("id",)
    return rows.order_by(*order)

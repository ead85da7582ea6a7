"""Suite-wide pytest configuration: the database/service matrix.

``scripts/test`` runs the suite twice: on SQLite (``DATABASE_URL`` unset) and on PostgreSQL
(``DATABASE_URL`` set). It also starts throwaway servers and exports their URLs:

* ``PAI_TEST_POSTGRES_URL``: a real PostgreSQL server (database ``pai``, with
  ``pg_stat_statements``), exported on both passes for tests that need a server of their own;
* ``PAI_TEST_REDIS_URL``: a real Redis server. Deliberately *not* ``REDIS_URL``, which would
  switch the demo settings to the Redis channel layer and the Celery executor.

Under ``scripts/test`` (``PAI_REQUIRE_SERVICES=1``) a missing service fails the test that needs
it; a plain ``pytest`` run without the servers skips those tests instead.

Markers (registered in pyproject.toml):

* ``@pytest.mark.postgres``: skipped unless the default database is PostgreSQL.
* ``@pytest.mark.redis``: documents the need; request the ``redis_url`` fixture to get the URL.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

POSTGRES_SKIP_REASON = "needs PostgreSQL (set DATABASE_URL)"


# --------------------------------------------------------------------------- database matrix


def _default_db_is_postgres() -> bool:
    from django.conf import settings

    return "postgresql" in settings.DATABASES["default"]["ENGINE"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _default_db_is_postgres():
        return
    skip_postgres = pytest.mark.skip(reason=POSTGRES_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("postgres") is not None:
            item.add_marker(skip_postgres)


# --------------------------------------------------------------------------- external services


def services_required() -> bool:
    """True under ``scripts/test``, where every service must be there."""
    return os.environ.get("PAI_REQUIRE_SERVICES") == "1"


def require_service_url(env_var: str, what: str) -> str:
    """The URL in ``env_var``; if unset, fail under ``scripts/test``, else skip."""
    url = os.environ.get(env_var, "")
    if url:
        return url
    message = f"needs {what}: set {env_var} (scripts/test starts one)"
    if services_required():
        pytest.fail(f"{message}; PAI_REQUIRE_SERVICES=1 forbids skipping", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of a real, throwaway Redis server (``PAI_TEST_REDIS_URL``)."""
    return require_service_url("PAI_TEST_REDIS_URL", "a Redis server")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a real, throwaway PostgreSQL database (``PAI_TEST_POSTGRES_URL``).

    Available on both passes, independent of the database the Django tests use.
    """
    return require_service_url("PAI_TEST_POSTGRES_URL", "a PostgreSQL server")


# --------------------------------------------------------------------------- database teardown


@pytest.fixture(scope="session", autouse=True)
def _close_stray_database_sessions(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Before the test database is dropped, end sessions tests left behind.

    Runs admitted from a queue execute on the in-process executor after the test that caused
    them, and worker processes may still hold a connection for a moment after they are
    stopped; PostgreSQL refuses to drop a database anyone is connected to.
    """
    yield
    from django.db import connection

    from pai_threads.store.db import close_store_connections

    close_store_connections()
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )

"""Fixtures of the golden tests: a golden server (real daphne, gated executor) and its gates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.golden.recorder import Gates
from tests.support.golden_executor import GATES_ENV
from tests.support.realtime import start_server
from tests.support.server import DaphneServer

GOLDEN_SETTINGS = "tests.support.golden_settings"


@pytest.fixture(scope="module")
def gates_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gates")


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    django_db_setup: None,
    django_db_blocker: Any,
    gates_dir: Path,
) -> Iterator[DaphneServer]:
    env = {"DJANGO_SETTINGS_MODULE": GOLDEN_SETTINGS, GATES_ENV: str(gates_dir)}
    yield from start_server(request, tmp_path_factory, django_db_blocker, "golden", **env)


@pytest.fixture
def gates(gates_dir: Path) -> Gates:
    return Gates(gates_dir)

"""Engine tests: RunEngine + InMemoryThreadStore + ScriptedModel (tests/support/engine_harness)."""

from __future__ import annotations

import pytest

from tests.support.engine_harness import executed


@pytest.fixture(autouse=True)
def _reset_executed() -> None:
    executed.clear()

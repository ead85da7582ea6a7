"""Engine-level lifecycle tests: RunEngine + InMemoryThreadStore + ScriptedModel."""

from __future__ import annotations

import pytest
from lce_support import executed


@pytest.fixture(autouse=True)
def _reset_executed() -> None:
    executed.clear()

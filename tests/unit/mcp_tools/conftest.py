"""MCP engine tests: RunEngine on the in-memory store with a real MCP server subprocess."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mcp_fixtures import HttpMCPServer


@pytest.fixture(scope="module")
def http_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-http")


@pytest.fixture(scope="module")
def http_url(http_state: Path) -> Iterator[str]:
    """One streamable-HTTP server for the module (started once: about a second)."""
    with HttpMCPServer(http_state) as url:
        yield url


@pytest.fixture
def state(http_state: Path) -> Iterator[Path]:
    """The server's state directory, emptied for each test (call log, flags, releases)."""
    for entry in http_state.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    yield http_state

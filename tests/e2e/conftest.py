"""Headless Chromium (Debian's /usr/bin/chromium, driven by Playwright) against daphne.

Screenshots go to ``$PAI_ARTIFACTS_DIR/e2e/`` (default ``artifacts/e2e/``); the folder is
printed in the test summary.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.realtime import start_server
from tests.support.server import REPO_ROOT, DaphneServer

CHROMIUM = os.environ.get("PAI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def artifacts_dir() -> Path:
    root = Path(os.environ.get("PAI_ARTIFACTS_DIR") or REPO_ROOT / "artifacts")
    path = root / "e2e"
    path.mkdir(parents=True, exist_ok=True)
    return path


_SHOTS: list[Path] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SHOTS:
        terminalreporter.write_line(f"e2e screenshots ({len(_SHOTS)}): {artifacts_dir()}")


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    # A database of its own: Playwright's sync API keeps an event loop running in the test
    # thread, where Django refuses database calls (so no pytest-django database here).
    yield from start_server(request, tmp_path_factory, None, "e2e")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.skip(f"needs Chromium at {CHROMIUM} (apt-get install chromium)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def shot() -> Any:
    """``shot(page, "name")`` saves a full-page screenshot into the artifacts folder."""

    def save(page: Any, name: str) -> Path:
        path = artifacts_dir() / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        _SHOTS.append(path)
        return path

    return save

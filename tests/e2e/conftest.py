"""Headless Chromium (Debian's /usr/bin/chromium, driven by Playwright) against daphne.

Screenshots go to ``$PAI_ARTIFACTS_DIR/e2e/`` (default ``artifacts/e2e/``); the folder is
printed in the test summary. A failing test leaves what its pages showed there too
(``failed-<test>-<n>.png`` and ``.json``: console messages, page errors, the status badges).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from collections.abc import Generator, Iterator
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


def watch(page: Any) -> Any:
    """Collect ``page.console`` and ``page.errors`` from the start (evidence on failure)."""
    if not hasattr(page, "console"):
        page.console = []
        page.errors = []
        page.on("console", lambda m: page.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return page


# What a failing test's page showed: the run, error and connection badges.
BADGES = """() => Object.fromEntries(['run-status', 'error', 'connection'].map((id) => {
  const node = document.getElementById(id);
  return [id, node && { text: node.textContent, hidden: node.hidden, ...node.dataset }];
}))"""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


def save_evidence(browser: Any, name: str) -> None:
    """Screenshot and state of every page still open (a failed test never closed them)."""
    stem = re.sub(r"[^\w.-]+", "_", name)
    pages = [page for context in browser.contexts for page in context.pages]
    for number, page in enumerate(pages, 1):
        path = artifacts_dir() / f"failed-{stem}-{number}"
        facts: dict[str, Any] = {"url": page.url}
        try:
            page.screenshot(path=f"{path}.png", full_page=True, timeout=10_000)
            _SHOTS.append(path.with_suffix(".png"))
            facts["badges"] = page.evaluate(BADGES)
        except Exception as exc:  # a crashed page still leaves its console
            facts["evidence_error"] = str(exc)
        facts["console"] = getattr(page, "console", [])
        facts["errors"] = getattr(page, "errors", [])
        path.with_suffix(".json").write_text(json.dumps(facts, indent=2))


_ACCESS_LINE = re.compile(r'^\S+ - - \[[^]]+\] "')


def print_server_evidence(server: DaphneServer, thread_ids: set[str]) -> None:
    """Print (into the failure's report, which CI shows) the server's log lines other than
    its access log, and the runs and attempts of the pages' threads as its database holds
    them: whether a run that a page still showed running had ended on the server."""
    lines = [ln for ln in server.log_text().splitlines() if not _ACCESS_LINE.match(ln)]
    print(f"server log ({server.log_path}), without access lines, last 60:")
    print("\n".join(lines[-60:]) or "(empty)")
    database = server.env.get("DATABASE_URL", "")
    if not database.startswith("sqlite:///") or not thread_ids:
        return
    marks = ", ".join("?" * len(thread_ids))
    with sqlite3.connect(f"file:{database.removeprefix('sqlite:///')}?mode=ro", uri=True) as db:
        for table, columns in (
            ("pai_threads_run", "id, status, cancel_requested_at, lease_owner, lease_expires_at"),
            ("pai_threads_runattempt", "run_id, number, ended, ended_at, reason"),
        ):
            where = (
                f"thread_id IN ({marks})"
                if table == "pai_threads_run"
                else f"run_id IN (SELECT id FROM pai_threads_run WHERE thread_id IN ({marks}))"
            )
            rows = db.execute(f"SELECT {columns} FROM {table} WHERE {where}", [*thread_ids])
            print(f"{table} ({columns}):", *rows, sep="\n  ")


@pytest.fixture(autouse=True)
def evidence(request: pytest.FixtureRequest) -> Generator[None]:
    """On failure, save what the browser showed and print the server's side; then close
    what the test left open."""
    yield
    if "browser" not in request.fixturenames:
        return
    browser = request.getfixturevalue("browser")
    if request.node.stash.get(_FAILED, False):
        save_evidence(browser, request.node.name)
        if "server" in request.fixturenames:
            pages = [page for context in browser.contexts for page in context.pages]
            threads = {m[1] for p in pages if (m := re.search(r"thread=(thr_\w+)", p.url))}
            try:
                print_server_evidence(request.getfixturevalue("server"), threads)
            except Exception as exc:  # evidence must never hide the failure itself
                print(f"no server evidence: {exc!r}")
    for context in browser.contexts:
        context.close()


@pytest.fixture
def shot() -> Any:
    """``shot(page, "name")`` saves a full-page screenshot into the artifacts folder."""

    def save(page: Any, name: str) -> Path:
        path = artifacts_dir() / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        _SHOTS.append(path)
        return path

    return save

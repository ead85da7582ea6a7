"""ToolData on the chat page: a tool's records render on its card live, then as stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_chat_page import open_chat, send
from tests.support.server import DaphneServer

pytestmark = [pytest.mark.slow]


def test_tool_data_renders_live_and_after_the_run(
    browser: Any, server: DaphneServer, shot: Any, tmp_path: Path
) -> None:
    """MF-019, MF-021, TH-037 in the browser: while ``report`` runs its card shows the
    durable progress and the transient preview; once it has its result, the final progress
    and the log, and no preview (also after a reload)."""
    flag = tmp_path / "release"
    context, page = open_chat(browser, server)
    page.select_option("#agent", "reporter")
    send(page, f"report {flag}")
    card = page.locator(".tool").first
    card.locator(".tool-data-record", has_text="preview").wait_for()
    assert card.locator(".tool-progress progress").get_attribute("value") == "10"
    shot(page, "10-tool-data-live")

    flag.touch()
    page.wait_for_selector("#run-status[data-status=completed]")
    card = page.locator(".tool").first
    assert card.locator(".tool-progress progress").get_attribute("value") == "100"
    assert card.locator(".tool-data-record", has_text="log").count() == 1
    assert card.locator(".tool-data-record", has_text="preview").count() == 0

    page.reload()
    card = page.locator(".tool").first
    card.locator(".tool-progress").wait_for()
    assert card.locator(".tool-progress progress").get_attribute("value") == "100"
    assert card.locator(".tool-data-record", has_text="preview").count() == 0
    assert not page.errors
    shot(page, "10-tool-data-done")
    context.close()

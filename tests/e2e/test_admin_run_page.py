"""The run inspection page in Chromium (issue 12, acceptance): a recovered run with tool calls
and an approval, its attempts and steps in one timeline, fits a 1280 px screen.

The run is made in the server's own database by tests/support/attempt_story.py (a first
worker's lease lost, the sweeper's recovery, an approval, the resumed attempt); the page is
read as an operator logged in to the Django admin. The screenshot goes to the artifacts
folder (``$PAI_ARTIFACTS_DIR/e2e/admin-run-recovered.png``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from django.contrib.admin.utils import quote

from tests.support.server import REPO_ROOT, DaphneServer

pytestmark = [pytest.mark.slow]

OVERFLOW = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"


def _story(server: DaphneServer) -> dict[str, Any]:
    made = subprocess.run(
        [sys.executable, "-m", "tests.support.attempt_story"],
        cwd=REPO_ROOT,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr[-4000:]
    return dict(json.loads(made.stdout.strip().splitlines()[-1]))


def test_the_run_page_of_a_recovered_run_fits_1280_px(
    browser: Any, server: DaphneServer, shot: Any
) -> None:
    story = _story(server)
    user, password = story["user"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"{server.url}/admin/")
    # The admin's own escaping of a key in a URL ("run_26..." would read as "run&..."
    # unescaped, and the admin would say the run does not exist).
    page.goto(f"{server.url}/admin/pai_threads/run/{quote(story['run'])}/change/")

    timeline = page.locator(".pai-attempt")
    # On failure, say where the browser is and what the admin said (it redirects to its
    # index with a message when the run is not found).
    where = (page.url, page.locator(".messagelist").all_inner_texts(), story)
    assert timeline.count() == 3, where
    first, recovery, resumed = (timeline.nth(i).inner_text() for i in range(3))
    assert "worker-a:4242:crashed" in first and "Lease Lost" in first
    assert "no step committed by this attempt" in first
    assert "recovered: took over from attempt 1" in recovery and "Waiting" in recovery
    assert "tool transfer" in recovery and "approval" in recovery
    assert "resumed after attempt 2 waited" in resumed and "Completed" in resumed
    assert "output-available" in resumed or "output-available" in recovery

    scroll_width, client_width = page.evaluate(OVERFLOW)
    assert scroll_width <= client_width, f"the page scrolls sideways: {scroll_width} > 1280"
    shot(page, "admin-run-recovered")
    context.close()

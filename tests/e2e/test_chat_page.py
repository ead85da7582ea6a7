"""The demo chat page in headless Chromium: streaming, reload, a second tab, cancel, approve."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pai_threads import services
from tests.e2e.conftest import watch
from tests.support.agents import slow_answer
from tests.support.server import DaphneServer

pytestmark = [pytest.mark.slow]

TIMEOUT = 20_000


def open_chat(
    browser: Any,
    server: DaphneServer,
    *,
    viewport: tuple[int, int] = (1200, 800),
    init_script: str | None = None,
) -> tuple[Any, Any]:
    """A fresh browser profile on the chat page; ``page.errors`` collects page errors and
    ``page.console`` console messages (every later tab of the profile's too)."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    context.on("page", watch)
    page = watch(context.new_page())
    page.set_default_timeout(TIMEOUT)
    if init_script is not None:
        page.add_init_script(init_script)
    page.goto(server.url + "/")
    page.wait_for_selector("#agent option[value=slow]", state="attached")
    return context, page


def send(page: Any, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def last_answer(page: Any) -> Any:
    return page.locator("article.message.assistant").last.locator(".text")


def thread_id_of(page: Any) -> str:
    page.wait_for_url(re.compile(r"\?thread="))
    return str(page.url.split("thread=")[1])


def test_send_stream_reload_and_second_tab(browser: Any, server: DaphneServer, shot: Any) -> None:
    context, page = open_chat(browser, server)
    page.select_option("#agent", "slow")
    send(page, "hello there")
    thread_id = thread_id_of(page)

    # The answer streams: it is visible (and marked streaming) before it is complete.
    page.wait_for_selector("article.message.assistant .text.streaming")
    partial = last_answer(page).inner_text()
    assert 0 < len(partial) < len(slow_answer("hello there"))
    shot(page, "01-streaming")
    page.wait_for_selector("#run-status[data-status=completed]")
    assert last_answer(page).inner_text().strip() == slow_answer("hello there")
    assert page.locator("#title").inner_text() == "hello there"  # titled from the first message
    assert page.locator(f"#threads a[data-thread-id={thread_id}]").inner_text() == "hello there"
    shot(page, "02-answered")

    # A second tab on the same thread sees the next answer live.
    other = watch(context.new_page())
    other.set_default_timeout(TIMEOUT)
    other.goto(f"{server.url}/?thread={thread_id}")
    other.wait_for_selector("#connection[data-status=open]")
    send(page, "tell me something long")
    other.wait_for_selector("article.message.assistant .text.streaming")
    shot(other, "03-second-tab-live")

    # Reload the first tab mid-generation: the open message is rebuilt, then completes.
    page.wait_for_function(
        "document.querySelectorAll('article.message.assistant').length === 2 && "
        "document.querySelectorAll('article.message.assistant')[1].innerText.length > 60"
    )
    page.reload()
    page.wait_for_selector("#connection[data-status=open]")
    shot(page, "04-after-reload")
    expected = slow_answer("tell me something long")
    for tab in (page, other):
        tab.wait_for_selector("#run-status[data-status=completed]")
        assert last_answer(tab).inner_text().strip() == expected
        assert tab.locator("article.message.assistant").count() == 2, "no duplicate answer"
        assert tab.locator("article.message.user").count() == 2
    shot(page, "05-final")
    assert page.errors == [] and other.errors == []
    context.close()


def test_tool_parts_render_by_state(browser: Any, server: DaphneServer, shot: Any) -> None:
    context, page = open_chat(browser, server)
    page.select_option("#agent", "toolbox")
    send(page, "use your tools")
    page.wait_for_selector("#run-status[data-status=completed]")
    tools = page.locator(".tool")
    assert tools.count() == 4
    assert page.locator(".tool.state-output-available").count() == 1
    assert page.locator(".tool.state-output-error").count() == 3
    assert page.locator("details.reasoning").count() == 1
    shot(page, "06-tools")
    context.close()


@pytest.mark.skipif(not hasattr(services, "cancel_run"), reason="cancel lands with issue 4")
def test_cancel_a_long_run(browser: Any, server: DaphneServer, shot: Any) -> None:
    context, page = open_chat(browser, server)
    page.select_option("#agent", "slow")
    send(page, "a long one to cancel")
    page.wait_for_selector("article.message.assistant .text.streaming")
    page.click("#cancel")
    page.wait_for_selector("#run-status[data-status=cancelled]")
    shot(page, "07-cancelled")
    context.close()


@pytest.mark.skipif(
    not hasattr(services, "submit_action"), reason="tool approvals land with issue 4"
)
def test_approve_a_pending_tool_call(browser: Any, server: DaphneServer, shot: Any) -> None:
    context, page = open_chat(browser, server)
    page.select_option("#agent", "toolbox")
    send(page, "needs approval")
    try:
        # Generous under a loaded CI machine: the run, its pending action and the
        # actions.changed event must all arrive before the button renders.
        page.wait_for_selector(".tool .approve", timeout=3 * TIMEOUT)
    except Exception:
        shot(page, "08-approval-timeout")  # what the page showed, for diagnosis
        raise
    shot(page, "08-approval")
    page.click(".tool .approve")
    page.wait_for_selector("#run-status[data-status=completed]")
    context.close()

"""What a rewrite of the transcript looks like live, in headless Chromium: a regenerated
answer replaces the old one on every open tab at once, as a reload shows it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import watch
from tests.e2e.test_chat_page import TIMEOUT, open_chat, send, thread_id_of
from tests.support.agents import slow_answer
from tests.support.server import DaphneServer

pytestmark = [pytest.mark.slow]

ANSWERS = (
    "() => [...document.querySelectorAll('article.message.assistant')]"
    ".map((n) => n.dataset.messageId)"
)


def test_lc_058_regenerate_removes_the_superseded_answer_live(
    browser: Any, server: DaphneServer, shot: Any
) -> None:
    """LC-058: regenerate hides the latest answer from the transcript; both the tab that
    regenerates (from its ack) and a second tab (from the new run's status) drop it as the
    new answer starts, never showing two answers; after a reload the page is the same."""
    context, page = open_chat(browser, server)
    page.select_option("#agent", "slow")
    send(page, "hello again")
    thread_id = thread_id_of(page)
    page.wait_for_selector("#run-status[data-status=completed]")
    [old] = page.evaluate(ANSWERS)
    other = watch(context.new_page())
    other.set_default_timeout(TIMEOUT)
    other.goto(f"{server.url}/?thread={thread_id}")
    other.wait_for_selector("#connection[data-status=open]")
    assert other.evaluate(ANSWERS) == [old]

    page.click("button.regenerate")
    for tab in (page, other):
        # The new answer streams (the slow agent takes seconds): the old one is gone already.
        tab.wait_for_selector("article.message.assistant.open .text.streaming")
        answers = tab.evaluate(ANSWERS)
        assert len(answers) == 1 and old not in answers, answers
    shot(other, "regenerate-live-second-tab")
    for tab in (page, other):
        tab.wait_for_selector("#run-status[data-status=completed]")
    [new] = page.evaluate(ANSWERS)
    assert new != old and other.evaluate(ANSWERS) == [new]
    text = page.locator("article.message.assistant .text").inner_text().strip()
    assert text == slow_answer("hello again")

    page.reload()
    page.wait_for_selector("#connection[data-status=open]")
    assert page.evaluate(ANSWERS) == [new], "live equals reload"
    assert page.locator("article.message.user").count() == 1
    assert page.errors == [] and other.errors == []
    context.close()

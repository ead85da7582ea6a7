"""The chat page marks how a step ended when a reader must know: a step cut by the output
token limit (finish reason ``length``) and a run stopped at ``max_steps`` (with the tool
calls the model never saw answered). The marker comes from the stored message's
``metadata.pai.diagnostics``: live (``generation.finished`` carries the stored message) and
after a reload the page shows the same."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_chat_page import open_chat, send, thread_id_of
from tests.support.server import DaphneServer

pytestmark = [pytest.mark.slow]

NOTES = """() => [...document.querySelectorAll('article.message.assistant')].map((m) =>
  [...m.querySelectorAll('.step-note')].map((n) => [n.dataset.kind, n.textContent]))"""


def _settled(page: Any) -> None:
    page.wait_for_selector("#run-status[data-status=completed]")
    page.wait_for_function("() => !document.querySelector('article.message.open')")


@pytest.mark.parametrize(
    ("text", "kind", "words"),
    [
        ("a long answer please", "length", "output token limit"),
        ("take notes", "max-steps", "max_steps"),
    ],
)
def test_length_and_max_steps_are_marked_live_and_after_reload(
    browser: Any, server: DaphneServer, shot: Any, text: str, kind: str, words: str
) -> None:
    context, page = open_chat(browser, server)
    page.select_option("#agent", "markers")
    send(page, text)
    thread_id_of(page)
    page.wait_for_selector(f".step-note[data-kind={kind}]")
    _settled(page)
    live = page.evaluate(NOTES)
    shot(page, f"step-marker-{kind}-live")
    assert [k for k, _ in live[-1]] == [kind]
    assert words in live[-1][0][1]
    assert all(notes == [] for notes in live[:-1])  # only the step that ended so

    page.reload()
    page.wait_for_selector(f".step-note[data-kind={kind}]")
    _settled(page)
    assert page.evaluate(NOTES) == live
    assert page.errors == []
    context.close()


def test_an_ordinary_answer_has_no_marker(browser: Any, server: DaphneServer) -> None:
    context, page = open_chat(browser, server)
    page.select_option("#agent", "slow")
    send(page, "hello")
    thread_id_of(page)
    _settled(page)
    assert page.evaluate(NOTES) == [[]]
    assert page.locator(".step-notes").count() == 0
    context.close()

"""Every feature of the offline demo agent in headless Chromium, at desktop and phone size.

The page is driven as a visitor would: the phrases the empty state suggests, typed into the
composer. Screenshots go to ``$PAI_ARTIFACTS_DIR/e2e/demo-*.png``. Nothing here sleeps for
correctness: each step waits for the page to show what it must.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.e2e.test_chat_page import open_chat, send, thread_id_of
from tests.support.server import DaphneServer

pytestmark = [pytest.mark.slow]

DESKTOP = (1280, 800)
PHONE = (390, 844)
SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
LONG = 90_000  # a whole slow answer on a loaded 2-core machine

LONG_TOKEN = "Pneumonoultramicroscopicsilicovolcanoconiosis" * 8
LONG_URL = "https://example.com/" + "/".join(f"segment-{i}" for i in range(40)) + "?q=" + "z" * 80
WIDE_BLOCK = "```\nconst banner = '" + "=" * 300 + "';\n```"

# Records what the page showed between two looks of the test (a slow test thread can miss
# a state that lasts a second): streaming text, streaming reasoning, each count_primes card.
OBSERVER = """
window.__seen = { streaming: false, reasoning: false, primes: [] };
new MutationObserver(() => {
  const seen = window.__seen;
  if (document.querySelector('.message.open .text.streaming')) seen.streaming = true;
  if (document.querySelector('details.reasoning.streaming[open]')) seen.reasoning = true;
  const card = document.querySelector('.tool[data-tool-name=count_primes]');
  if (!card) return;
  const bar = card.querySelector('.tool-progress progress');
  const look = {
    state: [...card.classList].find((c) => c.startsWith('state-')),
    value: bar ? Number(bar.getAttribute('value')) : null,
    max: bar ? Number(bar.getAttribute('max')) : null,
    preliminary: Boolean(card.querySelector('.tool-data-record[data-channel=preliminary]')),
    output: Boolean(card.querySelector('.tool-output')),
  };
  const last = seen.primes.at(-1);
  if (JSON.stringify(last) !== JSON.stringify(look)) seen.primes.push(look);
}).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
"""

ANNOUNCED = "document.querySelector('#announcer').textContent"

OVERFLOW = """() => {
  const doc = document.documentElement, list = document.querySelector('#messages');
  const right = list.getBoundingClientRect().right;
  return {
    page: doc.scrollWidth - doc.clientWidth,
    body: document.body.scrollWidth - document.body.clientWidth,
    list: list.scrollWidth - list.clientWidth,
    sticking_out: [...list.children].filter((n) => n.getBoundingClientRect().right > right + 0.5)
      .map((n) => n.className),
  };
}"""


def name_of(size: tuple[int, int]) -> str:
    return "desktop" if size == DESKTOP else "phone"


def demo_chat(browser: Any, server: DaphneServer, size: tuple[int, int] = DESKTOP) -> Any:
    context, page = open_chat(browser, server, viewport=size, init_script=OBSERVER)
    # The demo agent is the first (default) one; on a phone the picker sits in the drawer.
    assert page.locator("#agent").input_value() == "assistant"
    return context, page


def start(page: Any, text: str) -> str:
    """Send ``text``; return the id of the run it started (once the page shows it)."""
    before = page.locator("#run-status").get_attribute("data-run-id")
    send(page, text)
    handle = page.wait_for_function(
        "(before) => { const id = document.querySelector('#run-status').dataset.runId;"
        " return id && id !== before ? id : null; }",
        arg=before,
        timeout=LONG,
    )
    return str(handle.json_value())


def settle(page: Any, run_id: str, status: str = "completed") -> None:
    selector = f"#run-status[data-run-id='{run_id}'][data-status={status}]"
    page.wait_for_selector(selector, timeout=LONG)


def ask(page: Any, text: str, status: str = "completed") -> str:
    run_id = start(page, text)
    settle(page, run_id, status)
    return run_id


def last_answer(page: Any) -> str:
    return str(page.locator("article.message.assistant .text").last.inner_text()).strip()


def assert_no_overflow(page: Any) -> None:
    """The page and the message list never scroll sideways; every control stays on screen."""
    overflow = page.evaluate(OVERFLOW)
    assert max(overflow["page"], overflow["body"], overflow["list"]) <= 0, overflow
    assert not overflow["sticking_out"], overflow
    width = page.viewport_size["width"]
    for selector in ("#input", "#send", "#cancel", "#menu"):
        control = page.locator(selector)
        if control.is_visible():
            box = control.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (
                selector,
                box,
            )


@pytest.mark.parametrize("size", SIZES)
def test_long_tokens_urls_and_code_stay_inside_their_bubbles(
    browser: Any, server: DaphneServer, shot: Any, size: tuple[int, int]
) -> None:
    """A long unbroken token, a long URL and a wide code block, from the user and from the
    model, wrap or scroll inside their bubble; so does a streaming answer, and the composer
    with its Stop button stays on screen (Stop then cancels the run, marked as such)."""
    name = name_of(size)
    context, page = demo_chat(browser, server, size)
    assert_no_overflow(page)
    shot(page, f"demo-{name}-01-empty")

    ask(page, f"{LONG_TOKEN}\n\nsee {LONG_URL}\n\n{WIDE_BLOCK}")
    user = page.locator("article.message.user").last
    assert user.locator("pre code").count() == 1
    assert_no_overflow(page)
    wide = page.locator("article.message.user pre").last
    assert wide.evaluate("(pre) => pre.scrollWidth > pre.clientWidth"), "the block scrolls inside"

    ask(page, "show me some markdown")
    answer = page.locator("article.message.assistant").last
    assert answer.locator("pre code").count() == 1
    assert answer.locator("a[href='https://example.com/docs/quickstart']").count() == 1
    assert_no_overflow(page)
    user.evaluate("(node) => node.scrollIntoView({ block: 'start' })")
    shot(page, f"demo-{name}-02-long-user-message")
    answer.evaluate("(node) => node.scrollIntoView({ block: 'start' })")
    shot(page, f"demo-{name}-03-markdown-answer")

    run_id = start(page, "tell me a long story")
    page.wait_for_selector("article.message.assistant .text.streaming")
    page.locator("#cancel").wait_for()
    assert_no_overflow(page)
    shot(page, f"demo-{name}-04-streaming")
    page.click("#cancel")
    settle(page, run_id, "cancelled")
    page.locator(f".run-notice[data-run-id='{run_id}'][data-status=cancelled]").wait_for()
    assert page.locator("#cancel").is_hidden()
    assert_no_overflow(page)
    shot(page, f"demo-{name}-05-cancelled")
    assert page.errors == []
    context.close()


def test_phone_reaches_the_thread_list_and_new_chat(
    browser: Any, server: DaphneServer, shot: Any
) -> None:
    """At 390x844 the thread list is a drawer behind the menu button: it holds "New chat"
    and the threads, closes on a choice, on the scrim and on Escape."""
    context, page = demo_chat(browser, server, PHONE)
    ask(page, "what is 6*7?")
    first = thread_id_of(page)
    assert last_answer(page) == "6*7 = 42"
    assert page.locator("#new-thread").is_hidden() and page.locator("#threads").is_hidden()

    page.click("#menu")
    assert page.locator("#menu").get_attribute("aria-expanded") == "true"
    new_chat = page.locator("#new-thread")
    new_chat.wait_for()
    page.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().x >= 0"
    )
    box = new_chat.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE[0]
    page.locator(f"#threads a[data-thread-id='{first}']").wait_for()
    assert_no_overflow(page)
    shot(page, "demo-phone-06-drawer")

    new_chat.click()
    page.wait_for_function("(first) => !location.search.includes(first)", arg=first)
    page.locator("#threads").wait_for(state="hidden")
    assert page.locator("#empty").is_visible()
    assert page.locator("#menu").get_attribute("aria-expanded") == "false"

    page.click("#menu")
    page.locator("#threads").wait_for()
    page.keyboard.press("Escape")
    page.locator("#threads").wait_for(state="hidden")

    page.click("#menu")
    page.click(f"#threads a[data-thread-id='{first}']")
    page.wait_for_url(re.compile(f"thread={first}"))
    page.locator("#threads").wait_for(state="hidden")
    page.locator("article.message.assistant .text", has_text="6*7 = 42").wait_for()
    assert page.errors == []
    context.close()


@pytest.mark.parametrize("size", SIZES)
def test_approval_tool_approved_then_denied(
    browser: Any, server: DaphneServer, shot: Any, size: tuple[int, int]
) -> None:
    """``send_email`` waits for a person: Approve runs it, Deny does not."""
    context, page = demo_chat(browser, server, size)
    ask(page, "email the team that the demo works", status="waiting")
    card = page.locator(".tool[data-tool-name=send_email]").last
    card.locator(".approve").wait_for()
    assert card.locator(".tool-state").inner_text() == "needs approval"
    shot(page, f"demo-{name_of(size)}-07-approval")
    card.locator(".approve").click()
    page.wait_for_selector("#run-status[data-status=completed]", timeout=LONG)
    assert last_answer(page) == "Sent “email the team that the demo works” to team@example.com."
    assert page.locator(".tool[data-tool-name=send_email].state-output-available").count() == 1

    ask(page, "email the team again", status="waiting")
    card = page.locator(".tool[data-tool-name=send_email]").last
    card.locator(".deny").click()
    page.wait_for_selector("#run-status[data-status=completed]", timeout=LONG)
    assert last_answer(page) == "Understood: I did not run send_email, you denied it."
    assert page.locator(".tool[data-tool-name=send_email].state-output-denied").count() == 1
    assert page.locator(".tool .approve").count() == 0
    shot(page, f"demo-{name_of(size)}-08-approved-and-denied")
    assert_no_overflow(page)
    assert page.errors == []
    context.close()


@pytest.mark.parametrize("size", SIZES)
def test_client_tool_answered_through_a_form_built_from_its_schema(
    browser: Any, server: DaphneServer, shot: Any, size: tuple[int, int]
) -> None:
    """``ask_reservation`` has no server side: the page builds a form from its output schema
    (native inputs, so the browser checks required fields and bounds) and answers the
    pending action with ``{"output": ...}``, typed as the schema says."""
    context, page = demo_chat(browser, server, size)
    ask(page, "book a table for dinner", status="waiting")
    card = page.locator(".tool[data-tool-name=ask_reservation]")
    form = card.locator("form.schema-form")
    form.wait_for()
    assert card.locator(".approve").count() == 0, "a client tool is answered, not approved"
    assert card.locator(".tool-state").inner_text() == "needs your answer"
    guests = form.get_by_label("Guests")
    assert (guests.get_attribute("type"), guests.get_attribute("min")) == ("number", "1")
    assert guests.get_attribute("max") == "12" and guests.input_value() == "2"
    assert form.get_by_label("Day").get_attribute("type") == "date"
    seating = form.get_by_label("Seating")
    assert seating.locator("option").all_inner_texts() == ["indoors", "terrace", "bar"]
    assert form.get_by_label("High chair needed").get_attribute("type") == "checkbox"
    assert form.get_by_label("Notes").evaluate("(n) => n.tagName") == "TEXTAREA"

    form.locator(".submit-answer").click()  # Name and Day are required: nothing is sent
    assert form.locator(":invalid").count() >= 2
    assert page.locator("#run-status").get_attribute("data-status") == "waiting"

    form.get_by_label("Name").fill("Ada")
    guests.fill("4")
    form.get_by_label("Day").fill("2030-05-17")
    seating.select_option(label="terrace")
    form.get_by_label("High chair needed").check()
    shot(page, f"demo-{name_of(size)}-09-client-form")
    form.locator(".submit-answer").click()
    page.wait_for_selector("#run-status[data-status=completed]", timeout=LONG)
    assert last_answer(page) == (
        "Booked: a table for 4 (terrace with a high chair) on 2030-05-17 under the name Ada."
    )
    output = page.locator(".tool[data-tool-name=ask_reservation] .tool-output").inner_text()
    assert json.loads(output) == {
        "name": "Ada",
        "guests": 4,
        "day": "2030-05-17",
        "seating": "terrace",
        "high_chair": True,
    }
    assert page.locator("form.schema-form").count() == 0
    shot(page, f"demo-{name_of(size)}-10-client-answered")
    assert_no_overflow(page)
    assert page.errors == []
    context.close()


def test_client_tool_without_an_output_schema_gets_a_free_answer(
    browser: Any, server: DaphneServer
) -> None:
    context, page = open_chat(browser, server)
    page.select_option("#agent", "toolbox")
    ask(page, "ask me", status="waiting")
    form = page.locator(".tool[data-tool-name=ask_user] form.schema-form")
    form.get_by_label("Your answer").fill("the blue one")
    form.locator(".submit-answer").click()
    page.wait_for_selector("#run-status[data-status=completed]", timeout=LONG)
    output = page.locator(".tool[data-tool-name=ask_user] .tool-output").inner_text()
    assert json.loads(output) == "the blue one"
    assert page.errors == []
    context.close()


@pytest.mark.parametrize("size", SIZES)
def test_reload_mid_stream_resumes_and_screen_readers_hear_it_once(
    browser: Any, server: DaphneServer, shot: Any, size: tuple[int, int]
) -> None:
    """A reload during the slow story rebuilds the open answer and streams on to the end,
    with no duplicate. The streaming message is aria-busy and outside every live region;
    the announcer speaks the answer once it has settled."""
    context, page = demo_chat(browser, server, size)
    assert page.get_by_label("Message", exact=True).get_attribute("id") == "input"
    run_id = start(page, "tell me a long story")
    thread_id_of(page)
    page.wait_for_function(
        "() => document.querySelector('.message.open .text.streaming')?.innerText.length > 80"
    )
    streaming = page.locator("article.message.assistant.open")
    assert streaming.get_attribute("aria-busy") == "true"
    assert streaming.evaluate("(node) => node.closest('[aria-live]') === null")
    assert page.locator("[aria-live]").count() == 1
    assert "lighthouse" not in page.locator("#announcer").inner_text().lower()

    page.reload()
    page.wait_for_selector("#connection[data-status=open]")
    shot(page, f"demo-{name_of(size)}-11-resumed")
    settle(page, run_id)
    assert page.evaluate("window.__seen.streaming"), "the reloaded page streamed the rest"
    final = last_answer(page)
    assert final.startswith("The lighthouse keeper's ledger")
    assert final.endswith("it reconnects and carries on from the same word.")
    assert page.locator("article.message.assistant").count() == 1, "no duplicate answer"
    page.wait_for_function(f"() => {ANNOUNCED}.includes('lighthouse keeper')")
    assert page.locator("article.message.assistant[aria-busy]").count() == 0

    page.reload()
    page.wait_for_selector("#connection[data-status=open]")
    assert last_answer(page) == final, "what streamed is what was stored"
    assert_no_overflow(page)
    assert page.errors == []
    context.close()


@pytest.mark.parametrize("size", SIZES)
def test_reasoning_is_shown_and_collapses_once_done(
    browser: Any, server: DaphneServer, shot: Any, size: tuple[int, int]
) -> None:
    context, page = demo_chat(browser, server, size)
    ask(page, "think: is 221 prime?")
    assert page.evaluate("window.__seen.reasoning"), "the reasoning was open while it streamed"
    reasoning = page.locator("details.reasoning")
    assert reasoning.count() == 1 and reasoning.get_attribute("open") is None
    assert reasoning.locator("summary").inner_text() == "Reasoning"
    assert last_answer(page) == "221 is not prime: 221 = 13 * 17."
    reasoning.locator("summary").click()
    assert "13 divides it" in reasoning.inner_text()
    shot(page, f"demo-{name_of(size)}-12-reasoning")

    ask(page, "what is 2+2?")  # the page re-renders; the reader's toggle stays
    assert last_answer(page) == "2+2 = 4"
    assert page.locator("details.reasoning").get_attribute("open") is not None
    assert_no_overflow(page)
    assert page.errors == []
    context.close()


@pytest.mark.parametrize("size", SIZES)
def test_tool_progress_is_live_before_the_result(
    browser: Any, server: DaphneServer, shot: Any, size: tuple[int, int]
) -> None:
    """``count_primes`` writes durable progress and a transient preliminary count: both
    show on its card while it runs; the result replaces the preliminary count."""
    context, page = demo_chat(browser, server, size)
    run_id = start(page, "count the primes below 300000")
    card = page.locator(".tool[data-tool-name=count_primes]")
    card.locator(".tool-progress progress").wait_for()
    shot(page, f"demo-{name_of(size)}-13-progress-live")
    settle(page, run_id)
    looks = page.evaluate("window.__seen.primes")
    running = [
        look
        for look in looks
        if look["state"] == "state-input-available" and not look["output"] and look["value"]
    ]
    assert running, looks
    assert any(0 < look["value"] < look["max"] and look["preliminary"] for look in running), looks
    assert card.locator(".tool-progress progress").get_attribute("value") == "10"
    assert card.locator(".tool-data-record[data-channel=preliminary]").count() == 0
    assert json.loads(card.locator(".tool-output").inner_text()) == {
        "limit": 300000,
        "count": 25997,
        "largest": 299993,
    }
    assert last_answer(page) == "There are 25,997 primes up to 300,000; the largest is 299,993."
    shot(page, f"demo-{name_of(size)}-14-progress-done")
    assert_no_overflow(page)
    assert page.errors == []
    context.close()


@pytest.mark.parametrize("size", SIZES)
def test_failed_run_is_marked_with_its_public_error(
    browser: Any, server: DaphneServer, shot: Any, size: tuple[int, int]
) -> None:
    context, page = demo_chat(browser, server, size)
    run_id = ask(page, "simulate a failure", status="failed")
    notice = page.locator(f".run-notice[data-run-id='{run_id}'][data-status=failed]")
    notice.wait_for()
    assert notice.get_attribute("data-code") == "run_failed"
    assert "The run failed. Operators can see the details." in notice.inner_text()
    assert "simulated provider outage" not in page.content(), "the private error stays private"
    # It failed before its first checkpoint: nothing of the answer is stored, so its shell
    # closes (the server ends the generation with no message) and the notice stays.
    page.wait_for_function("() => !document.querySelector('article.message.open')")
    assert page.locator("article.message.assistant").count() == 0
    page.wait_for_function(f"() => {ANNOUNCED}.includes('Run failed')")
    shot(page, f"demo-{name_of(size)}-15-failed")

    page.reload()
    page.wait_for_selector("#connection[data-status=open]")
    page.locator(f".run-notice[data-run-id='{run_id}'][data-status=failed]").wait_for()
    assert page.locator("article.message.assistant").count() == 0, "live equals reload"
    assert_no_overflow(page)
    assert page.errors == []
    context.close()

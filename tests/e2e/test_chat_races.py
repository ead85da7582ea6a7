"""The chat page when replies arrive in an order a loaded server produces now and then.

Each order is forced in the browser (a wrapped ``fetch`` or ``WebSocket``), so the test is
deterministic: it waits for conditions, never for time.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_chat_page import open_chat, send, thread_id_of
from tests.e2e.test_demo_features import LONG, settle, start
from tests.support.server import DaphneServer

pytestmark = [pytest.mark.slow]

# The thread list stays unanswered until the test sets window.__releaseThreads, and the
# first websocket's frames wait until the page has taken that list in (a timer set while
# the page reads the list fires after everything that reading does synchronously).
HOLD_THREAD_LIST = """
const realFetch = window.fetch;
const held = [];
const flush = () => { window.__listDone = true; held.splice(0).forEach((deliver) => deliver()); };
window.fetch = async (url, options) => {
  if (!String(url).endsWith('/api/pai/threads') || (options?.method ?? 'GET') !== 'GET') {
    return realFetch(url, options);
  }
  while (!window.__releaseThreads) await new Promise((r) => setTimeout(r, 20));
  const response = await realFetch(url, options);
  const data = await response.json();
  return { ok: response.ok, status: response.status, json: async () => {
    setTimeout(flush);
    return data;
  } };
};
const Real = window.WebSocket;
let first = true;
window.WebSocket = class extends Real {
  constructor(...args) { super(...args); this.holds = first; first = false; }
  set onmessage(handler) {
    super.onmessage = (event) => {
      if (!this.holds || window.__listDone) handler(event);
      else held.push(() => { if (this.readyState === 1) handler(event); });
    };
  }
};
"""

# A send's ack is held back until its run has reported "waiting": the ack (the run as it
# was created, "queued") then arrives after the run's own newer events.
ACK_AFTER_EVENTS = """
window.__acksAfterWaiting = 0;
const Real = window.WebSocket;
window.WebSocket = class extends Real {
  set onmessage(handler) {
    const held = [];
    let waited = false;
    super.onmessage = (event) => {
      const frame = JSON.parse(event.data);
      const isAck = frame.type === 'ack' && frame.command === 'send';
      if (isAck && !waited) { held.push(event); return; }
      handler(event);
      if (isAck) window.__acksAfterWaiting += 1;
      if (frame.type === 'run.status' && frame.status === 'waiting' && !waited) {
        waited = true;
        window.__acksAfterWaiting += held.length;
        held.splice(0).forEach(handler);
      }
    };
  }
};
"""


def test_first_message_sent_while_the_thread_list_is_still_loading(
    browser: Any, server: DaphneServer
) -> None:
    """Enter before the page's start-up finished: the new chat is not reopened (which closed
    its connection and left the send waiting forever), and it stays in the thread list."""
    context, page = open_chat(browser, server, init_script=HOLD_THREAD_LIST)
    send(page, "what is 6*7?")
    thread_id = thread_id_of(page)
    page.evaluate("window.__releaseThreads = true")
    run_id = start_run_id(page)
    settle(page, run_id)
    page.locator(f"#threads a[data-thread-id='{thread_id}']").wait_for()
    assert page.locator("article.message.assistant .text").last.inner_text() == "6*7 = 42"
    assert page.errors == []
    context.close()


def start_run_id(page: Any) -> str:
    handle = page.wait_for_function(
        "() => document.querySelector('#run-status').dataset.runId || null", timeout=LONG
    )
    return str(handle.json_value())


def test_an_ack_overtaken_by_its_runs_events_does_not_turn_the_run_back(
    browser: Any, server: DaphneServer
) -> None:
    """The run waits for approval before the send's ack reaches the page: the page shows
    "waiting" (not the ack's stale "queued", with a Cancel button for a run that waits)."""
    context, page = open_chat(browser, server, init_script=ACK_AFTER_EVENTS)
    run_id = start(page, "email the team that the demo works")
    settle(page, run_id, "waiting")
    page.wait_for_function("() => window.__acksAfterWaiting === 1")
    page.locator(".tool[data-tool-name=send_email] .approve").wait_for()
    assert page.locator("#run-status").get_attribute("data-status") == "waiting"
    assert page.locator("#cancel").is_hidden()
    assert page.errors == []
    context.close()

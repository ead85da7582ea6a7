"""The golden scenarios, each driven through one transport of a real server.

A :class:`Session` is one browser on one new thread, with a websocket :class:`Observer`
recording every frame from before the first step to after the last. The transport decides
how each step reaches the server:

* ``ws``: commands on the observer's own websocket (``send``, ``submit-action``, ``cancel``,
  ``regenerate``); their ``ack`` frames are part of the recording;
* ``http``: the JSON API (``POST /threads/{id}/messages``, ``/actions/{id}``,
  ``/runs/{id}/cancel``, ``/threads/{id}/regenerate``); the responses are recorded;
* ``sse``: the AI SDK endpoint, as ``useChat`` uses it (``POST /ai-sdk/chat`` with the
  message, an approval answer or ``trigger: regenerate-message``); its chunk lines are
  recorded. A client tool's answer and a cancel have no AI SDK form, so they go through the
  JSON API, and the run is followed on the resume stream (``GET /ai-sdk/chat/{id}/stream``)
  or on the stream already open.

Every step ends with :func:`~.recorder.quiesce`, so the next one starts with nothing in
flight. The ``pai_chat`` transport is in :mod:`.cli`, the crash scenario in
:mod:`.test_golden_crash`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pai_agents.ids import new_id
from tests.golden.recorder import Gates, Observer, SseStream, quiesce, read_sse
from tests.support.golden_agents import HANG_WORDS
from tests.support.server import Browser

__all__ = ["SCENARIOS", "Scenario", "Session", "stored"]

Frame = dict[str, Any]


class Session:
    """One scenario run through one transport; :meth:`recording` is what it saw."""

    def __init__(
        self, browser: Browser, thread_id: str, gates: Gates, observer: Observer, transport: str
    ) -> None:
        self.browser = browser
        self.thread_id = thread_id
        self.gates = gates
        self.observer = observer
        self.transport = transport
        self.http: list[dict[str, Any]] = []
        self.sse: list[dict[str, Any]] = []

    # -- the steps ------------------------------------------------------------------------

    async def send(self, text: str) -> None:
        if self.transport == "ws":
            await self.observer.command({"type": "send", "text": text})
            self.gates.release_held()
        elif self.transport == "http":
            await self._api("POST", f"/threads/{self.thread_id}/messages", {"text": text})
            self.gates.release_held()
        else:
            message = {"id": new_id("msg"), "role": "user", "parts": [_text(text)]}
            await self._chat({"messages": [message], "trigger": "submit-message"})
        await self.settle()

    async def approve(self) -> None:
        action = self.pending_action()
        if self.transport == "sse":
            part = {
                "type": f"tool-{action['toolName']}",
                "toolCallId": action["toolCallId"],
                "state": "approval-responded",
                "input": action["input"],
                "approval": {"id": action["approvalId"], "approved": True},
            }
            message = {"id": action["messageId"], "role": "assistant", "parts": [part]}
            await self._chat({"messages": [message], "trigger": "submit-message"})
            await self.settle()
        else:
            await self._submit(action, {"approved": True})

    async def answer(self, output: Any) -> None:
        action = self.pending_action()
        if self.transport != "sse":
            await self._submit(action, {"output": output})
            return
        await self._api("POST", f"/actions/{action['id']}", {"output": output})
        # The run is queued, held by its gate: the resume stream subscribes first.
        path = f"/ai-sdk/chat/{self.thread_id}/stream"
        await self._follow(await read_sse(self.browser, "GET", path), f"GET {path}")
        await self.settle()

    async def cancel_mid_stream(self, text: str) -> None:
        """Send ``text`` to the hanging agent, cancel once its last word is in."""
        last = HANG_WORDS[-1]
        stream: SseStream | None = None
        if self.transport == "ws":
            await self.observer.command({"type": "send", "text": text})
        elif self.transport == "http":
            await self._api("POST", f"/threads/{self.thread_id}/messages", {"text": text})
        else:
            message = {"id": new_id("msg"), "role": "user", "parts": [_text(text)]}
            body = {"id": self.thread_id, "messages": [message], "trigger": "submit-message"}
            stream = await read_sse(self.browser, "POST", "/ai-sdk/chat", body)
        (run_id,) = self.gates.release_held()
        await self.observer.wait_for(lambda f: _delta(f) == last)
        if stream is not None:
            await stream.read_until(lambda item: _sse_delta(item) == last)
        await self._cancel(run_id)
        self.gates.open(f"{run_id}.cancel")  # now the run may end
        if stream is not None:
            await stream.read_to_end()
            self.sse.append(stream.recording("POST /ai-sdk/chat"))
        await self.settle()

    async def cancel_waiting(self) -> None:
        """Cancel the run that waits (for an approval or a client)."""
        await self._cancel(self.gates.last_run)
        await self.settle()

    async def regenerate(self) -> None:
        latest = (await self.browser.messages(self.thread_id))[-1]["id"]
        if self.transport == "ws":
            await self.observer.command({"type": "regenerate", "messageId": latest})
            self.gates.release_held()
        elif self.transport == "http":
            await self._api("POST", f"/threads/{self.thread_id}/regenerate", None)
            self.gates.release_held()
        else:
            message = {"id": latest, "role": "assistant", "parts": []}
            body = {"messages": [message], "trigger": "regenerate-message", "messageId": latest}
            await self._chat(body)
        await self.settle()

    # -- helpers -----------------------------------------------------------------------

    def pending_action(self) -> dict[str, Any]:
        frame = [f for f in self.observer.frames if f["type"] == "actions.changed"][-1]
        (action,) = frame["pendingActions"]
        return dict(action)

    async def settle(self) -> None:
        await quiesce(self.browser, self.thread_id, self.gates, self.observer)

    async def _cancel(self, run_id: str) -> None:
        if self.transport == "ws":
            await self.observer.command({"type": "cancel", "runId": run_id})
        else:
            await self._api("POST", f"/runs/{run_id}/cancel", None)

    async def _submit(self, action: dict[str, Any], value: dict[str, Any]) -> None:
        if self.transport == "ws":
            await self.observer.command(
                {"type": "submit-action", "actionId": action["id"], "value": value}
            )
        else:
            await self._api("POST", f"/actions/{action['id']}", value)
        self.gates.release_held()
        await self.settle()

    async def _api(self, method: str, path: str, body: Any) -> dict[str, Any]:
        response = await self.browser.api(method, path, body)
        assert response.status_code < 300, response.text
        payload = response.json()
        self.http.append(
            {"request": f"{method} {path}", "status": response.status_code, "body": payload}
        )
        return dict(payload)

    async def _chat(self, body: dict[str, Any]) -> None:
        body = {"id": self.thread_id, **body}
        stream = await read_sse(self.browser, "POST", "/ai-sdk/chat", body)
        await self._follow(stream, "POST /ai-sdk/chat")

    async def _follow(self, stream: SseStream, request: str) -> None:
        """Release what the request dispatched, then read its stream to the end."""
        assert stream.status == 200, stream.status
        self.gates.release_held()
        await stream.read_until(lambda item: item == "[DONE]")
        await stream.read_to_end()
        self.sse.append(stream.recording(request))


async def stored(browser: Browser, thread_id: str) -> dict[str, Any]:
    """The thread as the HTTP API returns it after the scenario."""
    messages = await browser.messages(thread_id)
    state = await browser.api("GET", f"/threads/{thread_id}/state")
    assert state.status_code == 200, state.text
    return {"messages": messages, "state": state.json()}


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _delta(frame: Frame) -> str | None:
    if frame.get("type") != "generation.message.chunk":
        return None
    return _sse_delta(frame["chunk"])


def _sse_delta(item: Any) -> str | None:
    if isinstance(item, dict) and item.get("type") == "text-delta":
        return str(item["delta"])
    return None


# -- the scenarios ------------------------------------------------------------------------------

Scenario = Callable[[Session], Awaitable[None]]


async def plain(session: Session) -> None:
    await session.send("Hello there.")


async def tools(session: Session) -> None:
    await session.send("What is 2 + 40?")


async def approval(session: Session) -> None:
    await session.send("Transfer 42, please.")
    await session.approve()


async def client_tool(session: Session) -> None:
    await session.send("Pick one for me.")
    await session.answer("the blue one")


async def cancel(session: Session) -> None:
    await session.cancel_mid_stream("Work on it, please.")


async def cancel_waiting(session: Session) -> None:
    await session.send("Transfer 42, please.")
    await session.cancel_waiting()


async def regenerate(session: Session) -> None:
    await session.send("Hello there.")
    await session.regenerate()


async def lifecycle(session: Session) -> None:
    await session.send("Add 2 and 3.")
    await session.regenerate()


ALL = ("ws", "http", "sse")
# A cancel has no AI SDK form (it would be the JSON API's, as for http).
NO_SSE = ("ws", "http")

# name -> (agent, scenario, transports)
SCENARIOS: dict[str, tuple[str, Scenario, tuple[str, ...]]] = {
    "plain": ("golden_plain", plain, ALL),
    "tools": ("golden_tools", tools, ALL),
    "approval": ("golden_approval", approval, ALL),
    "client_tool": ("golden_client", client_tool, ALL),
    "cancel": ("golden_hang", cancel, ALL),
    "cancel_waiting": ("golden_approval", cancel_waiting, NO_SSE),
    "regenerate": ("golden_plain", regenerate, ALL),
    "lifecycle": ("golden_lifecycle", lifecycle, ALL),
}

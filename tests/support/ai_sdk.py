"""The real Vercel AI SDK (``ai``, pinned in ``tests/sdk/node/package.json``) as a test client.

Two Node scripts in ``tests/sdk/node/`` do the SDK's side:

- ``read-stream.mjs`` folds recorded chunks with the SDK's ``readUIMessageStream`` (after its
  own ``parseJsonEventStream`` + ``uiMessageChunkSchema``, the path ``DefaultChatTransport``
  takes). :func:`read_ui_message_stream` runs it.
- ``chat.mjs`` drives the SDK's ``Chat`` (``AbstractChat``, what ``useChat`` wraps) with
  ``DefaultChatTransport`` against a live server. :func:`run_chat` runs it.

``scripts/test`` installs the package once (``npm ci``, cached in the gitignored
``tests/sdk/node/node_modules``); :func:`require_sdk` installs it too when a test runs without
it, and skips the test only when Node.js is absent.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.server import REPO_ROOT, Browser

__all__ = [
    "NODE_DIR",
    "ChatResult",
    "StreamResult",
    "WebsocketFold",
    "WebsocketView",
    "fold_websocket",
    "read_ui_message_stream",
    "require_sdk",
    "run_chat",
    "run_chat_as",
]

NODE_DIR = REPO_ROOT / "tests" / "sdk" / "node"
_INSTALL_TIMEOUT = 300.0
_SCRIPT_TIMEOUT = 120.0


@dataclass(frozen=True, kw_only=True)
class StreamResult:
    """What ``readUIMessageStream`` made of a chunk stream."""

    messages: list[dict[str, Any]]
    invalid: list[dict[str, Any]]  # chunks the SDK's schema rejected: {"index", "error"}
    errors: list[str]  # errors the SDK's reducer reported (unknown tool call id, ...)
    valid: bool  # validateUIMessages accepts the result
    validation_error: str | None = None

    @property
    def message(self) -> dict[str, Any]:
        """The one message of an unsplit stream."""
        assert len(self.messages) == 1, self.messages
        return self.messages[0]


@dataclass(frozen=True, kw_only=True)
class ChatResult:
    """What the SDK's ``Chat`` held after each action, and what its callbacks saw."""

    steps: list[dict[str, Any]]  # {"op", "status", "error", "messages", "http"?}
    messages: list[dict[str, Any]]  # chat.messages at the end
    finishes: list[dict[str, Any]] = field(default_factory=list)  # onFinish arguments
    errors: list[str] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)  # onData parts
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # onToolCall calls
    chunks: int = 0


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the real AI SDK conformance tests need `node`")
    return node


def _installed_version() -> str | None:
    try:
        manifest = json.loads((NODE_DIR / "node_modules" / "ai" / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return str(manifest.get("version"))


def _pinned_version() -> str:
    manifest = json.loads((NODE_DIR / "package.json").read_text())
    return str(manifest["dependencies"]["ai"])


def require_sdk() -> str:
    """The ``node`` executable, with the pinned SDK installed (``npm ci`` under a file lock,
    so parallel test processes install it once). Skips when Node.js is absent."""
    node = _node()
    if _installed_version() == _pinned_version():
        return node
    npm = shutil.which("npm")
    if npm is None:
        raise AssertionError("node is installed but npm is not: run scripts/test or install npm")
    with (NODE_DIR / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _installed_version() != _pinned_version():
                subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                    cwd=NODE_DIR,
                    check=True,
                    timeout=_INSTALL_TIMEOUT,
                )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return node


def _parse(stdout: str, stderr: str, script: str) -> dict[str, Any]:
    try:
        return dict(json.loads(stdout.strip().splitlines()[-1]))
    except (IndexError, ValueError) as exc:
        raise AssertionError(
            f"{script} printed no result\nstdout: {stdout}\nstderr: {stderr}"
        ) from exc


def read_ui_message_stream(
    chunks: Sequence[Any] | str,
    *,
    split: bool = False,
    message: dict[str, Any] | None = None,
) -> StreamResult:
    """Fold ``chunks`` (chunk dicts, or the raw text of an SSE body / JSON lines) with the SDK.

    ``split`` folds each ``start``..``finish`` on its own (PAI's websocket and ``pai_chat
    --jsonl`` carry one message per model step); ``message`` is a message to continue, as
    ``useChat`` continues the last assistant message after an approval.
    """
    node = require_sdk()
    text = chunks if isinstance(chunks, str) else "".join(json.dumps(c) + "\n" for c in chunks)
    argv = [node, str(NODE_DIR / "read-stream.mjs")]
    if split:
        argv.append("--split")
    with contextlib.ExitStack() as stack:
        if message is not None:
            handle = stack.enter_context(
                tempfile.NamedTemporaryFile("w", suffix=".json", delete=True)
            )
            json.dump(message, handle)
            handle.flush()
            argv.append(f"--message={handle.name}")
        done = subprocess.run(
            argv, input=text, capture_output=True, text=True, timeout=_SCRIPT_TIMEOUT, check=False
        )
    if done.returncode != 0:
        raise AssertionError(f"read-stream.mjs failed ({done.returncode}):\n{done.stderr}")
    out = _parse(done.stdout, done.stderr, "read-stream.mjs")
    return StreamResult(
        messages=out["messages"],
        invalid=out["invalid"],
        errors=out["errors"],
        valid=out["valid"],
        validation_error=out.get("validationError"),
    )


@dataclass(frozen=True, kw_only=True)
class WebsocketFold:
    """One generation of a thread websocket, folded by the SDK."""

    message_id: str
    continued: bool
    chunks: list[dict[str, Any]]
    result: StreamResult
    finished: dict[str, Any] | None  # its generation.finished frame (None: none came)

    @property
    def message(self) -> dict[str, Any]:
        return self.result.message


@dataclass(frozen=True, kw_only=True)
class WebsocketView:
    """What a client running only the SDK's reducer makes of websocket frames."""

    folds: list[WebsocketFold]  # per generation, in order
    messages: dict[str, dict[str, Any]]  # the latest state of each message, by id


def fold_websocket(
    frames: Sequence[dict[str, Any]], *, held: Sequence[dict[str, Any]] = ()
) -> WebsocketView:
    """Fold each generation of the websocket ``frames`` with the SDK's
    ``readUIMessageStream``: a generation starts from nothing, a ``continued`` one (results
    joining a committed message) from the client's latest state of that message; a
    ``message.committed`` replaces a message whole (a client tool's answer, written into
    its stored step). ``held``: messages the client had before (e.g. a snapshot's)."""
    latest = {str(m["id"]): m for m in held}
    folds: list[WebsocketFold] = []
    open_: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}

    def fold(message_id: str, finished: dict[str, Any] | None) -> None:
        started, chunks = open_.pop(message_id)
        continued = bool(started.get("continued"))
        seed = latest.get(message_id) if continued else None
        result = read_ui_message_stream(chunks, message=seed)
        folds.append(
            WebsocketFold(
                message_id=message_id,
                continued=continued,
                chunks=chunks,
                result=result,
                finished=finished,
            )
        )
        latest[message_id] = result.message

    for frame in frames:
        kind = frame.get("type")
        message_id = str(frame.get("messageId"))
        if kind == "generation.started":
            if message_id in open_:
                fold(message_id, None)
            open_[message_id] = (frame, [])
        elif kind == "generation.message.chunk":
            assert message_id in open_, f"no generation.started for {frame}"
            open_[message_id][1].append(frame["chunk"])
        elif kind == "generation.finished":
            fold(message_id, frame)
        elif kind == "message.committed":
            latest[str(frame["message"]["id"])] = frame["message"]
    for message_id in list(open_):
        fold(message_id, None)
    return WebsocketView(folds=folds, messages=latest)


async def run_chat(
    *,
    base_url: str,
    cookie: str,
    csrf: str,
    chat_id: str,
    actions: Sequence[dict[str, Any]],
    messages: Sequence[dict[str, Any]] = (),
    auto_send: str = "both",
    api: str = "/api/pai/ai-sdk/chat",
) -> ChatResult:
    """Run ``actions`` (see ``tests/sdk/node/chat.mjs``) through the SDK's ``Chat`` against a
    live server, starting from the loaded history ``messages``."""
    node = require_sdk()
    config = {
        "baseUrl": base_url,
        "cookie": cookie,
        "csrf": csrf,
        "chatId": chat_id,
        "messages": list(messages),
        "actions": list(actions),
        "autoSend": auto_send,
        "api": api,
    }
    process = await asyncio.create_subprocess_exec(
        node,
        str(NODE_DIR / "chat.mjs"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(
            process.communicate(json.dumps(config).encode()), _SCRIPT_TIMEOUT
        )
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        raise AssertionError(f"chat.mjs failed ({process.returncode}):\n{stderr.decode()}")
    out = _parse(stdout.decode(), stderr.decode(), "chat.mjs")
    return ChatResult(
        steps=out["steps"],
        messages=out["messages"],
        finishes=out["finishes"],
        errors=out["errors"],
        data=out["data"],
        tool_calls=out["toolCalls"],
        chunks=out["chunks"],
    )


async def run_chat_as(
    browser: Browser,
    thread_id: str,
    actions: Sequence[dict[str, Any]],
    *,
    messages: Sequence[dict[str, Any]] = (),
    auto_send: str = "both",
) -> ChatResult:
    """:func:`run_chat` with ``browser``'s session (cookies and CSRF token) on its server."""
    return await run_chat(
        base_url=browser.server.url,
        cookie=browser.cookie_header(),
        csrf=browser.csrf,
        chat_id=thread_id,
        actions=actions,
        messages=messages,
        auto_send=auto_send,
    )

"""The ``pai_chat --jsonl`` transport: the scenario's first message, answered in a subprocess.

``manage.py pai_chat`` executes the run in its own process (not on the server's executor),
on a thread the browser created (``--thread``, ``--scope`` = the browser's session scope),
so the HTTP API reads back what it stored. It only sends: approvals and client tools end
the command with the run ``waiting`` (exit code 1), a cancel is Ctrl-C (SIGINT) once the
hanging agent's last word is printed, and regenerate has no ``pai_chat`` form.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from tests.golden.recorder import STEP_TIMEOUT, Gates
from tests.support.golden_agents import HANG_WORDS
from tests.support.golden_executor import GATES_ENV
from tests.support.server import REPO_ROOT, Browser, DaphneServer

__all__ = ["CLI_TEXTS", "run_pai_chat"]

# scenario -> the message pai_chat sends (the scenario's first one)
CLI_TEXTS = {
    "plain": "Hello there.",
    "tools": "What is 2 + 40?",
    "approval": "Transfer 42, please.",
    "client_tool": "Pick one for me.",
    "cancel": "Work on it, please.",
    "lifecycle": "Add 2 and 3.",
}


async def run_pai_chat(
    server: DaphneServer, gates: Gates, browser: Browser, thread_id: str, scenario: str
) -> dict[str, Any]:
    """Run ``pai_chat --jsonl`` for the scenario; its exit code and output lines."""
    scope = f"session:{browser.http.cookies['sessionid']}"
    argv = [sys.executable, "manage.py", "pai_chat", "--jsonl", "--thread", thread_id]
    argv += ["--scope", scope, CLI_TEXTS[scenario]]
    # The server's environment: the developer's service choices scrubbed, the test database.
    env = {**server.env, GATES_ENV: str(gates.directory), "PAI_LOG_LEVEL": "WARNING"}
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=REPO_ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    errors = asyncio.create_task(process.stderr.read())
    lines: list[Any] = []
    try:
        async with asyncio.timeout(STEP_TIMEOUT * 2):
            if scenario == "cancel":
                await _read_until_last_word(process.stdout, lines)
                process.send_signal(signal.SIGINT)  # Ctrl-C
                gates.open(f"{await _run_of(browser, thread_id)}.cancel")
            async for raw in process.stdout:
                lines.append(json.loads(raw))
            code = await process.wait()
    except BaseException:
        if process.returncode is None:
            process.kill()
        raise
    stderr = (await errors).decode("utf-8", "replace").splitlines()
    return {"exit": code, "stdout": lines, "stderr": [_plain(line, scope) for line in stderr]}


async def _read_until_last_word(stream: asyncio.StreamReader, lines: list[Any]) -> None:
    last = HANG_WORDS[-1]
    async for raw in stream:
        chunk = json.loads(raw)
        lines.append(chunk)
        if chunk.get("type") == "text-delta" and chunk.get("delta") == last:
            return
    raise AssertionError(f"pai_chat ended before its last word: {lines}")


async def _run_of(browser: Browser, thread_id: str) -> str:
    state = (await browser.api("GET", f"/threads/{thread_id}/state")).json()
    return str(state["runs"][-1]["id"])


def _plain(line: str, scope: str) -> str:
    return line.replace(scope, "session:<key>").replace(str(Path(REPO_ROOT)), "<repo>")

"""``manage.py pai_chat``: the terminal chat against the demo agent (offline model)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings

from pai_agents import define_agent
from pai_agents.messages.reducer import reduce_chunks
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Step, Thread

REPO_ROOT = Path(__file__).resolve().parents[2]
SCOPE = "cli:pytest"

db = pytest.mark.django_db(transaction=True)  # execution uses other threads' connections


@pytest.fixture(autouse=True)
def offline_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo agent picks a real model when these are set; the tests want the offline one."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def chat(*args: str, stdin: str | None = None) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    options: dict[str, Any] = {"stdout": out, "stderr": err}
    if stdin is not None:
        options["stdin"] = io.StringIO(stdin)
    call_command("pai_chat", *args, **options)
    return out.getvalue(), err.getvalue()


def split_jsonl(stdout: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(chunks, stored messages): chunks come first, each message line has a role."""
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert all(isinstance(line, dict) for line in lines)
    chunks = [line for line in lines if "role" not in line]
    messages = [line for line in lines if "role" in line]
    assert lines == chunks + messages, "the stored messages come after every chunk"
    return chunks, messages


def per_message(chunks: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Chunk streams of consecutive assistant messages: each begins with ``start``."""
    groups: list[list[dict[str, Any]]] = []
    for chunk in chunks:
        if chunk["type"] == "start":
            groups.append([])
        assert groups, f"chunk before any start: {chunk}"
        groups[-1].append(chunk)
    return groups


@db
def test_jsonl_prints_chunks_then_stored_messages() -> None:
    stdout, stderr = chat("what is 6*7?", "--jsonl", "--scope", SCOPE)

    # Every stdout line is compact JSON; diagnostics (the thread id) are on stderr.
    for line in stdout.splitlines():
        assert line == json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))
    thread = Thread.objects.get(scope_key=SCOPE)
    assert thread.id in stderr
    assert thread.id not in stdout

    chunks, messages = split_jsonl(stdout)
    assert chunks[0]["type"] == "start"
    assert chunks[0]["messageId"]
    assert chunks[1] == {"type": "start-step"}
    inputs = [c for c in chunks if c["type"] == "tool-input-available"]
    assert [(c["toolName"], c["input"]) for c in inputs] == [("calculator", {"expression": "6*7"})]
    outputs = [c for c in chunks if c["type"] == "tool-output-available"]
    assert len(outputs) == 1
    assert outputs[0]["toolCallId"] == inputs[0]["toolCallId"]
    assert outputs[0]["output"]["result"] == 42
    assert chunks[-1]["type"] == "finish" and chunks[-1]["finishReason"] == "stop"
    assert chunks[-1]["messageMetadata"]["pai"]["status"] == "committed"  # the stored step's

    groups = per_message(chunks)
    assert len(groups) == 2
    for group in groups:
        assert group[0]["type"] == "start"
        assert group[-2:][0] == {"type": "finish-step"}
        assert group[-1]["type"] == "finish"
    answer = "".join(c["delta"] for c in groups[-1] if c["type"] == "text-delta")
    assert "42" in answer

    # The stored messages: the user input, then one assistant message per step.
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]
    user, *assistant = messages
    assert user["parts"] == [{"type": "text", "text": "what is 6*7?"}]
    assert user["metadata"]["pai"]["relation"] == "input"
    run_id = user["metadata"]["pai"]["runId"]
    assert all(m["metadata"]["pai"]["runId"] == run_id for m in messages)

    # Replaying each message's chunks through the SDK reducer rebuilds exactly what was stored.
    assert [g[0]["messageId"] for g in groups] == [m["id"] for m in assistant]
    for group, stored in zip(groups, assistant, strict=True):
        replayed = reduce_chunks(group)
        assert replayed["id"] == stored["id"]
        assert replayed["role"] == stored["role"] == "assistant"
        assert replayed["parts"] == stored["parts"]
    tool_part = next(p for p in assistant[0]["parts"] if p["type"] == "tool-calculator")
    assert tool_part["state"] == "output-available"
    assert tool_part["output"] == {"expression": "6*7", "result": 42}

    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.COMPLETED
    assert Step.objects.filter(run=run).count() == 2
    stored = [m.to_ui_message() for m in Message.objects.filter(run=run).order_by("id")]
    assert [m["id"] for m in stored] == [m["id"] for m in messages]


@db
def test_plain_output_streams_text_and_shows_tool_calls() -> None:
    stdout, stderr = chat("what is 6*7?", "--scope", SCOPE)

    lines = stdout.splitlines()
    assert lines == [
        '→ calculator({"expression": "6*7"})',
        '← {"expression": "6*7", "result": 42}',
        "6*7 = 42",
    ]
    assert "\x1b[" not in stdout  # no colors when stdout is not a terminal
    assert Thread.objects.get(scope_key=SCOPE).id in stderr


@db
def test_interactive_mode_answers_every_line_on_one_thread() -> None:
    stdout, _ = chat("--scope", SCOPE, stdin="2+3\n\nwhat is 10/4?\n")

    assert stdout.count("you> ") == 4  # two questions, an empty line, then EOF
    assert "you> 2+3\n" in stdout  # piped input is echoed
    assert "2+3 = 5" in stdout
    assert "10/4 = 2.5" in stdout
    assert stdout.index("2+3 = 5") < stdout.index("10/4 = 2.5")
    thread = Thread.objects.get(scope_key=SCOPE)
    runs = list(Run.objects.filter(thread=thread).order_by("created_at"))
    assert [r.status for r in runs] == ["completed", "completed"]
    users = Message.objects.filter(thread=thread, role="user").order_by("id")
    assert [m.parts[0]["text"] for m in users] == ["2+3", "what is 10/4?"]
    assert Message.objects.filter(thread=thread, role="assistant").count() == 4


@db
def test_interactive_mode_quits_on_exit_and_continues_a_thread() -> None:
    _, stderr = chat("1+1", "--scope", SCOPE)
    thread = Thread.objects.get(scope_key=SCOPE)
    assert thread.id in stderr

    stdout, _ = chat("--scope", SCOPE, "--thread", thread.id, stdin="2*5\n/exit\n3*3\n")
    assert "2*5 = 10" in stdout
    assert "3*3" not in stdout
    assert Thread.objects.filter(scope_key=SCOPE).count() == 1
    assert Run.objects.filter(thread=thread).count() == 2


@db
def test_thread_of_another_scope_is_rejected() -> None:
    other = services.create_thread(Identity(scope_key="cli:someone-else"))
    with pytest.raises(CommandError, match="not found"):
        chat("2+2", "--scope", SCOPE, "--thread", other.id)
    with pytest.raises(CommandError, match="not found"):
        chat("2+2", "--scope", SCOPE, "--thread", "thr_does_not_exist")
    assert not Message.objects.filter(thread=other).exists()
    assert not Thread.objects.filter(scope_key=SCOPE).exists()


@db
def test_unknown_agent_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="unknown agent"):
        chat("hi", "--scope", SCOPE, "--agent", "no-such-agent")


def _broken_model(behavior: Any) -> Any:
    raise RuntimeError("the model is down")


broken = define_agent("broken", instructions="never works", model=_broken_model)


@db
def test_failed_run_exits_non_zero_with_the_status() -> None:
    with override_settings(PAI={**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], broken]}):
        with pytest.raises(CommandError, match=r"ended failed: RuntimeError: the model is down"):
            chat("hello", "--scope", SCOPE, "--agent", "broken", "--jsonl")
        run = Run.objects.get(scope_key=SCOPE)
    assert run.status == Run.Status.FAILED


def test_manage_py_pai_chat_jsonl_in_a_subprocess(tmp_path: Path) -> None:
    """The README command, for real: migrate a fresh SQLite file, then chat once."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"REDIS_URL", "PAI_EXECUTOR", "PAI_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
    }
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'chat.sqlite3'}"
    env["DJANGO_SETTINGS_MODULE"] = "pai_project.settings"
    manage = [sys.executable, "manage.py"]

    migrate = subprocess.run(
        [*manage, "migrate", "-v", "0"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 0, migrate.stderr
    chat_run = subprocess.run(
        [*manage, "pai_chat", "--jsonl", "2+2"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert chat_run.returncode == 0, chat_run.stderr
    assert "thread thr_" in chat_run.stderr

    chunks, messages = split_jsonl(chat_run.stdout)
    assert chunks[0]["type"] == "start"
    assert any(c["type"] == "tool-output-available" and c["output"]["result"] == 4 for c in chunks)
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]
    assert messages[-1]["parts"][-1]["text"] == "2+2 = 4"

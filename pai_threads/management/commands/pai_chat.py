"""``manage.py pai_chat``: chat with an agent from the terminal.

A management command that only delegates: it resolves a CLI identity, stores the user
message with :func:`pai_threads.services.send` (``dispatch=False``) and executes the run in
this process with :func:`pai_threads.execution.execute.aexecute_run`, streaming its events to a sink
from :mod:`pai_threads.execution.terminal`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import getpass
import signal as signals
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TextIO, TypeVar

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.db import connections

from pai_agents.abort import AbortSignal
from pai_agents.engine.events import EventSink
from pai_agents.engine.store import RunOutcome
from pai_threads import services
from pai_threads.errors import PaiError
from pai_threads.events.projections import messages_out
from pai_threads.execution.execute import aexecute_run
from pai_threads.execution.terminal import JsonlSink, TerminalSink, dumps_line
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread

P = ParamSpec("P")
T = TypeVar("T")

PROMPT = "you> "
QUIT_COMMANDS = frozenset({"/exit", "/quit"})


def step_notes(diagnostics: dict[str, Any]) -> list[str]:
    """What a user must know about how one stored step ended (``metadata.pai.diagnostics``),
    beyond the run's status: a cut-off answer, refused tool calls, the step budget spent,
    retries."""
    notes: list[str] = []
    if diagnostics.get("finishReason") == "length":
        notes.append("the answer was cut off by the output token limit (finish reason length)")
    refused = diagnostics.get("toolCallsRefused")
    if refused:
        notes.append(f"{refused} tool call(s) were not executed")
    if diagnostics.get("maxStepsReached"):
        notes.append("the run stopped at its step limit (max_steps)")
    retries = diagnostics.get("retries")
    if retries:
        notes.append(f"the model call was retried {retries} time(s) after provider errors")
    return notes


class _Raw:
    """A Writer over a command's OutputWrapper that adds no line endings or styles."""

    def __init__(self, wrapper: OutputWrapper) -> None:
        self._wrapper = wrapper

    def write(self, text: str, /) -> None:
        self._wrapper.write(text, style_func=_plain, ending="")

    def flush(self) -> None:
        self._wrapper.flush()


def _plain(text: str) -> str:
    return text


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER
        return "unknown"


class Command(BaseCommand):
    help = (
        "Chat with an agent in the terminal, streaming its answer and showing tool calls and "
        "results. With MESSAGE it answers once and exits; without, it reads lines from stdin "
        "(prompt 'you> '; Ctrl-D or /exit quits), all on one thread. The run always executes "
        "in this process (not on PAI['EXECUTOR']), so its tokens can stream here. The thread "
        "id is printed to stderr; pass it to --thread to continue the conversation."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("message", nargs="?", help="Answer this one message, then exit.")
        parser.add_argument(
            "--agent", help="Agent for a new thread (default: the first in PAI['AGENTS'])."
        )
        parser.add_argument("--thread", help="Continue this thread (it must belong to the scope).")
        parser.add_argument("--scope", help="Storage scope_key (default: cli:<os user>).")
        parser.add_argument(
            "--jsonl",
            action="store_true",
            help=(
                "Machine-readable output: every UIMessageChunk of the answer as one JSON line, "
                "then the run's stored messages as JSON lines, as the HTTP API shows them. "
                "Diagnostics go to stderr."
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = _os_user()
        identity = Identity(scope_key=options["scope"] or f"cli:{user}", data={"cliUser": user})
        jsonl: bool = options["jsonl"]
        color = (
            not jsonl
            and not options["no_color"]
            and (options["force_color"] or self.stdout.isatty())
        )
        out = _Raw(self.stdout)
        thread = self._thread(
            identity,
            thread_id=options["thread"],
            agent=options["agent"],
            message=options["message"],
        )
        self._diag(f"thread {thread.id} (agent {thread.agent_name}, scope {identity.scope_key})")

        if options["message"] is not None:
            self._turn(identity, thread, options["message"], out=out, jsonl=jsonl, color=color)
            return

        stdin: TextIO = options.get("stdin") or sys.stdin
        while True:
            if not jsonl:
                out.write(PROMPT)
                out.flush()
            try:
                line = stdin.readline()
            except KeyboardInterrupt:  # Ctrl-C at the prompt quits like Ctrl-D
                line = ""
            if not line:  # EOF (Ctrl-D)
                if not jsonl:
                    out.write("\n")
                break
            if not jsonl and not _isatty(stdin):
                out.write(line if line.endswith("\n") else line + "\n")  # echo piped input
            text = line.strip()
            if not text:
                continue
            if text in QUIT_COMMANDS:
                break
            try:
                self._turn(identity, thread, text, out=out, jsonl=jsonl, color=color)
            except CommandError as exc:
                # A failed run ends that turn, not the conversation.
                self._diag(f"error: {exc}")

    # -- helpers --

    def _diag(self, text: str) -> None:
        self.stderr.write(text, style_func=_plain)

    def _thread(
        self, identity: Identity, *, thread_id: str | None, agent: str | None, message: str | None
    ) -> Thread:
        if thread_id:
            try:
                thread = services.get_thread(identity, thread_id)
            except PaiError:
                raise CommandError(
                    f"thread {thread_id} not found in scope {identity.scope_key!r}"
                ) from None
            if agent and agent != thread.agent_name:
                raise CommandError(
                    f"thread {thread.id} belongs to agent {thread.agent_name!r}, not {agent!r}"
                )
            return thread
        try:
            return services.create_thread(identity, agent=agent, title=(message or "")[:80])
        except PaiError as exc:
            raise CommandError(exc.message) from exc

    def _turn(
        self, identity: Identity, thread: Thread, text: str, *, out: _Raw, jsonl: bool, color: bool
    ) -> None:
        """Send ``text`` on ``thread``, execute the run here, render it; CommandError on failure."""
        message = {"role": "user", "parts": [{"type": "text", "text": text}]}
        try:
            result = services.send(identity, thread.id, message, dispatch=False)
        except PaiError as exc:
            raise CommandError(exc.message) from exc
        if result.run is None or result.message is None:
            raise CommandError("the thread has an active run; the input was queued behind it")
        run_id = result.run.id
        sink: EventSink
        terminal: TerminalSink | None = None
        if jsonl:
            sink = JsonlSink(out)
        else:
            sink = terminal = TerminalSink(out, color=color)
        try:
            outcome = asyncio.run(_execute(run_id, sink))
        finally:
            if terminal is not None:
                terminal.close()
        run = Run.objects.get(pk=run_id)
        rows = list(Message.objects.filter(run_id=run_id, in_transcript=True).order_by("id"))
        if jsonl:
            # As every client sees them (MF-011): reserved parts projected, suspensions joined.
            for message in messages_out(rows):
                out.write(dumps_line(message))
            out.flush()
        for row in rows:
            for note in step_notes(row.diagnostics or {}):
                self._diag(f"note: {note}")
        if outcome is None:
            raise CommandError(f"run {run_id} could not be claimed (status {run.status})")
        if run.status != Run.Status.COMPLETED:
            detail = ""
            if run.error:
                detail = f": {run.error.get('type', 'error')}: {run.error.get('message', '')}"
            raise CommandError(f"run {run_id} ended {run.status}{detail}")


class _ClosingExecutor(ThreadPoolExecutor):
    """The loop's default executor (where the store's ORM calls run), closing the calling
    thread's database connections after each call: ``asyncio.run`` discards the threads at
    the end of every turn, and connections left in them would leak until garbage collection."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        return super().submit(_closing_connections, functools.partial(fn, *args, **kwargs))


def _closing_connections(call: Callable[[], T]) -> T:
    try:
        return call()
    finally:
        connections.close_all()


async def _execute(run_id: str, sink: EventSink) -> RunOutcome | None:
    """Execute the run; Ctrl-C aborts it cleanly (the run ends ``cancelled``)."""
    abort = AbortSignal()
    loop = asyncio.get_running_loop()
    loop.set_default_executor(_ClosingExecutor(thread_name_prefix="pai-chat"))
    handled = False
    with contextlib.suppress(
        NotImplementedError, RuntimeError, ValueError
    ):  # not main thread / no signals
        loop.add_signal_handler(signals.SIGINT, abort.abort, "interrupted")
        handled = True
    try:
        return await aexecute_run(run_id, sink=sink, signal=abort)
    finally:
        if handled:
            loop.remove_signal_handler(signals.SIGINT)

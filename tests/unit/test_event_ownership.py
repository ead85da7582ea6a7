"""One event vocabulary and one place that publishes (issue 10).

Events are built by the constructors of :mod:`pai_agents.engine.events` and
:mod:`pai_threads.events`, and thread operations publish them after commit; the transports
(HTTP views, websocket commands and consumer, the AI SDK endpoint, the admin) only call
operations. These checks read the source, so a transport that starts publishing again, or
a module that builds an event as an ad-hoc dict, fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Literal, get_args, get_origin, get_type_hints

from pai_threads.events import types as thread_events

ROOT = Path(__file__).resolve().parents[2]

TRANSPORTS = [
    "pai_threads/api/views.py",
    "pai_threads/ai_sdk/endpoint.py",
    "pai_threads/api/files.py",
    "pai_threads/websocket/commands.py",
    "pai_threads/websocket/consumers.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pai_threads/admin").glob("*.py")),
]
# What publishing is: the delivery of events to subscribers, and the after-commit helper.
PUBLISHING = {
    "pai_threads.events.publishing",
    "pai_threads.realtime.delivery",
    "pai_threads.realtime.publisher",
}
# Modules allowed to spell an event's type: the vocabulary itself, and the readers that
# dispatch on a type (they never build events).
VOCABULARY = {
    "pai_agents/engine/events.py",
    "pai_threads/events/types.py",
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _event_types() -> set[str]:
    types: set[str] = set()
    for member in get_args(thread_events.ThreadEvent):
        kind = get_type_hints(member)["type"]
        assert get_origin(kind) is Literal
        types.update(get_args(kind))
    return types


def test_transports_never_publish_events() -> None:
    for name in TRANSPORTS:
        imported = _imports(ROOT / name)
        published = {m for m in imported if m in PUBLISHING or m.startswith("pai_threads.events.")}
        # Projections read events into client shapes (rows, the AI SDK's UI stream); they
        # neither build nor publish events.
        readers = ("pai_threads.events.projections", "pai_threads.events.ui_stream")
        allowed = {m for m in published if m.startswith(readers)}
        assert published <= allowed, f"{name} publishes or builds events: {published - allowed}"


def test_the_vocabulary_names_every_event_clients_receive() -> None:
    assert _event_types() == {
        "generation.started",
        "generation.message.chunk",
        "generation.finished",
        "run.status",
        "message.committed",
        "queue.changed",
        "actions.changed",
        "thread.updated",
        "thread.deleted",
    }


def test_no_module_builds_an_event_as_an_ad_hoc_dict() -> None:
    """A dict literal with ``"type": "<event type>"`` outside the vocabulary modules is an
    event built by hand (the copies drifted apart before issue 10)."""
    literal = re.compile(
        r'["\']type["\']\s*:\s*["\'](' + "|".join(map(re.escape, _event_types())) + r')["\']'
    )
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for package in ("pai_threads",)
        for path in sorted((ROOT / package).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in VOCABULARY
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert not offenders, f"events built as ad-hoc dicts: {offenders}"

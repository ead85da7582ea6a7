"""history_rewritten delivery through the per-thread database lease (LC-065, LC-062).

The lease protocol and the handover to the holder run on both databases; the two-process
test needs PostgreSQL: pytest-django's SQLite test database lives in memory, where another
process cannot reach it (and SQLite would serialize the writers anyway).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.utils import timezone

from pai_agents import ScriptedModel, define_agent
from pai_agents.engine.rewrites import dispatcher
from pai_agents.lifecycle.facade import MessageVisibility
from pai_agents.lifecycle.inputs import VisibilityChange, VisibilityRewrite
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, RewriteDelivery, Thread
from pai_threads.store import rewrite_delivery
from pai_threads.store.rewrite_delivery import LOST, acquire, offer, release, renew, take
from tests.support import rewrite_procs
from tests.support.workers import REPO_ROOT, database_url_from_settings, worker_env

pytestmark = pytest.mark.django_db(transaction=True)

TTL = 30.0


class Calls:
    """The hook's calls: (after_version, runtime_context, rewrite) in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[int | None, Any, Any]] = []

    def history_rewritten(self, input: Any) -> None:
        self.seen.append((input.rewrite.after_version, input.runtime_context, input.rewrite))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    recorder = Calls()
    agent = define_agent(
        "rewrite-delivery",
        instructions="x",
        model=ScriptedModel(steps=[]),
        runtime_context=lambda behavior: {"user": behavior.identity.get("userId")},
        lifecycle={"history_rewritten": recorder.history_rewritten},
    )
    agents = {**registry.agents(), agent.name: agent, rewrite_procs.agent.name: rewrite_procs.agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    return recorder


def _thread(identity: Identity, *message_ids: str, agent: str = "rewrite-delivery") -> Thread:
    thread = services.create_thread(identity, agent=agent)
    for message_id in message_ids:
        Message.objects.create(
            message_id=message_id,
            thread=thread,
            scope_key=thread.scope_key,
            role="user",
            parts=[{"type": "text", "text": message_id}],
            producer=Message.Producer.SEND,
        )
    return thread


def _rewrite(version: int) -> VisibilityRewrite:
    hidden = MessageVisibility(transcript=True, context=False)
    change = VisibilityChange(message_id="m1", before=MessageVisibility(), after=hidden)
    return VisibilityRewrite(changes=(change,), before_version=version - 1)


def _fact(version: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"rwf_test_{version}",
        "agent": "rewrite-delivery",
        "version": version,
        "runId": "",
        "rewrite": rewrite_delivery.encode_rewrite(_rewrite(version)),
        "identity": {"userId": "bob"},
        "clientData": {},
        **extra,
    }


# --------------------------------------------------------------------------- the protocol


@pytest.mark.usefixtures("calls")
def test_lc_065_a_fact_that_finds_the_lease_held_waits_for_the_holder_coalesced(
    alice: Identity,
) -> None:
    """LC-065: while one process holds a thread's lease, another records its fact as pending
    and returns; newer pending facts replace older ones (the latest after-version wins); the
    holder cannot release while a fact is pending, takes it, and only then releases."""
    thread = _thread(alice).id
    assert offer(thread, _fact(2)) and acquire(thread, "p1", TTL)
    assert take(thread, "p1", TTL)["version"] == 2

    assert offer(thread, _fact(3))
    assert not acquire(thread, "p2", TTL)  # held: p2 leaves its fact to p1
    assert offer(thread, _fact(5))  # coalesced: 3 is never delivered
    assert not offer(thread, _fact(4))  # older than the pending one
    assert not release(thread, "p1")  # something is pending: p1 goes on
    assert take(thread, "p1", TTL)["version"] == 5
    assert take(thread, "p1", TTL) is None
    assert not offer(thread, _fact(5)) and not offer(thread, _fact(4))  # already delivered
    assert release(thread, "p1")
    assert acquire(thread, "p2", TTL)


@pytest.mark.usefixtures("calls")
def test_lc_065_an_expired_lease_is_taken_over_and_the_old_holder_stops(alice: Identity) -> None:
    """LC-065: a holder that stopped renewing (a dead process) loses the lease once it
    expires; the new holder delivers, the old one finds it lost and writes nothing."""
    thread = _thread(alice).id
    assert offer(thread, _fact(2)) and acquire(thread, "dead", TTL)
    assert acquire(thread, "p2", TTL) is False
    RewriteDelivery.objects.filter(thread_id=thread).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert acquire(thread, "p2", TTL)
    assert take(thread, "dead", TTL) is LOST
    assert release(thread, "dead") is True and renew(thread, "dead", TTL) is False
    assert take(thread, "p2", TTL)["version"] == 2
    assert release(thread, "p2")


def test_lc_065_the_holder_delivers_a_fact_another_process_committed(
    alice: Identity, calls: Calls
) -> None:
    """LC-065, LC-062: with the lease held elsewhere, a committed rewrite is only recorded;
    the holder delivers it, with ``after_version``: its own facts with the runtime context
    the rewrite built, another process's with one rebuilt from the stored identity."""
    thread = _thread(alice, "m1")
    assert acquire_held(thread.id, "holder")
    done = services.update_visibility(alice, thread.id, {"m1": {"context": False}})
    assert done is not None and dispatcher().wait_idle(timeout=30)
    assert calls.seen == []  # waiting for the holder
    assert RewriteDelivery.objects.get(thread=thread).pending_version == done.after_version

    async_to_sync(rewrite_delivery.drain)(thread.id, "holder", TTL)
    assert [(v, c) for v, c, _ in calls.seen] == [(done.after_version, {"user": "alice"})]
    assert calls.seen[0][2] == done

    # A fact committed by another process (unknown here): rebuilt from the stored fact.
    assert acquire(thread.id, "holder", TTL)
    foreign = _fact(done.after_version + 1)
    assert offer(thread.id, foreign)
    async_to_sync(rewrite_delivery.drain)(thread.id, "holder", TTL)
    version, context, rewrite = calls.seen[-1]
    assert (version, context) == (done.after_version + 1, {"user": "bob"})
    assert rewrite == dataclasses.replace(_rewrite(version), after_version=version)
    assert RewriteDelivery.objects.get(thread=thread).owner == ""


def acquire_held(thread_id: str, owner: str) -> bool:
    RewriteDelivery.objects.get_or_create(thread_id=thread_id)
    return acquire(thread_id, owner, TTL)


def test_lc_065_a_rewrite_takes_over_an_expired_lease_and_delivers(
    alice: Identity, calls: Calls
) -> None:
    """LC-065: a lease left by a dead process does not block delivery once expired."""
    thread = _thread(alice, "m1")
    RewriteDelivery.objects.create(
        thread=thread, owner="dead", expires_at=timezone.now() - timedelta(seconds=1)
    )
    done = services.update_visibility(alice, thread.id, {"m1": {"transcript": False}})
    assert done is not None and dispatcher().wait_idle(timeout=30)
    assert [v for v, _, _ in calls.seen] == [done.after_version]
    assert RewriteDelivery.objects.get(thread=thread).owner == ""


# --------------------------------------------------------------------------- two processes


def _overlaps(lines: list[str]) -> list[str]:
    """Lines where a call entered while another was still inside (per thread)."""
    inside: dict[str, int] = {}
    bad = []
    for line in lines:
        event, _pid, thread_id, _version = line.split()
        inside[thread_id] = inside.get(thread_id, 0) + (1 if event == "enter" else -1)
        if inside[thread_id] > 1:
            bad.append(line)
    return bad


@pytest.mark.postgres
@pytest.mark.slow
def test_lc_065_two_processes_rewriting_one_thread_never_overlap(
    alice: Identity, calls: Calls, tmp_path: Path
) -> None:
    """LC-065: two OS processes rewrite the same thread concurrently; their
    history_rewritten calls (which record enter/exit in one shared file) never overlap,
    arrive in increasing after-version order, may be coalesced, and the newest version is
    always delivered. (PostgreSQL only: see the module docstring.)"""
    count = 6
    thread = _thread(alice, "ma", "mb", agent=rewrite_procs.AGENT_NAME)
    log, go = tmp_path / "calls.log", tmp_path / "go"
    log.touch()
    env = worker_env(
        database_url=database_url_from_settings(connection.settings_dict),
        redis_url="",
        PAI_EXECUTOR="thread",
        PAI_TEST_REWRITE_LOG=str(log),
    )
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.rewrite_procs",
                thread.id,
                mid,
                str(count),
                str(go),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for mid in ("ma", "mb")
    ]
    time.sleep(0.5)
    go.touch()
    outputs = [child.communicate(timeout=120) for child in children]
    for process, (_, err) in zip(children, outputs, strict=True):
        assert process.returncode == 0, err
    committer = {
        int(line.split()[1]): int(line.split()[2])
        for out, _ in outputs
        for line in out.splitlines()
    }
    assert sorted(committer) == list(range(2, 2 + 2 * count))

    lines = log.read_text().splitlines()
    assert _overlaps(lines) == [], "\n".join(lines)
    entered = [line.split() for line in lines if line.startswith("enter")]
    delivered = [int(version) for _, _, _, version in entered]
    assert delivered == sorted(set(delivered)), delivered  # increasing, none twice
    assert delivered[-1] == Thread.objects.get(id=thread.id).version == 1 + 2 * count
    assert len(delivered) < len(committer), "expected coalescing under contention"
    # Handover: some fact was delivered by the process that did not commit it.
    assert any(committer[int(v)] != int(pid) for _, pid, _, v in entered), lines
    assert RewriteDelivery.objects.get(thread=thread).owner == ""
    assert os.getpid() not in {int(line.split()[1]) for line in lines}

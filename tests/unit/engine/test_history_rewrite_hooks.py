"""History rewrite hooks on the in-memory store (LC-050, LC-057..LC-066)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import ScriptedModel, define_agent
from pai_agents.engine.rewrites import (
    RewriteBusy,
    RewriteDispatcher,
    memory_regenerate,
    memory_update_visibility,
)
from pai_agents.lifecycle import HistoryRewritePatch, MetadataSchemas
from pai_agents.lifecycle.facade import MessageVisibility
from pai_agents.lifecycle.memory import InMemoryLifecycleStore


class Cursor(BaseModel):
    cursor: list[str] = []
    rewrites: int = 0


class Public(BaseModel):
    title: str = "untitled"


THREAD = MetadataSchemas(private=Cursor, public=Public)


def _agent(lifecycle: Any, **options: Any) -> Any:
    return define_agent(
        "rw",
        instructions="x",
        model=ScriptedModel(steps=[]),
        lifecycle=lifecycle,
        thread_metadata=options.pop("thread_metadata", THREAD),
        **options,
    )


def _thread(store: InMemoryLifecycleStore) -> tuple[str, list[str]]:
    thread_id = store.create_thread("s")
    ids = []
    for role, text in (("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")):
        message = store.seed_message(
            "s", thread_id, role=role, parts=[{"type": "text", "text": text}]
        )
        ids.append(message.id)
    return thread_id, ids


def _store() -> InMemoryLifecycleStore:
    return InMemoryLifecycleStore(thread_metadata=THREAD)


def test_lc_057_lc_058_regenerate_commits_the_hook_patches_with_the_rewrite() -> None:
    store = _store()
    thread_id, (u1, a1, u2, a2) = _thread(store)
    seen: list[Any] = []

    def prepare_history_rewrite(input: Any) -> HistoryRewritePatch:
        seen.append(input)
        return HistoryRewritePatch(
            private_metadata={"cursor": list(input.rewrite.retained_message_ids), "rewrites": 1},
            metadata={"title": "rewritten"},
        )

    agent = _agent({"prepare_history_rewrite": prepare_history_rewrite})
    before = store.thread_version("s", thread_id)
    done = asyncio.run(memory_regenerate(store, agent, "s", thread_id))
    rewrite = seen[0].rewrite
    assert rewrite.kind == "regenerate"
    assert rewrite.target_message_id == u2
    assert rewrite.retained_message_ids == (u1, a1, u2)
    assert rewrite.removed_message_ids == (a2,)
    assert rewrite.before_version == before and rewrite.after_version is None
    assert done.after_version == before + 1 == store.thread_version("s", thread_id)
    bags = store.thread_bags("s", thread_id)
    assert bags.private == {"cursor": [u1, a1, u2], "rewrites": 1}
    assert bags.public == {"title": "rewritten"}
    hidden = {m.id: m.visibility for m in store.stored_messages("s", thread_id)}[a2]
    assert hidden == MessageVisibility(transcript=False, context=False)


@pytest.mark.parametrize(
    "result",
    [RuntimeError("hook broke"), HistoryRewritePatch(private_metadata={"rewrites": "many"})],
)
def test_lc_057_a_failing_hook_or_invalid_patch_commits_neither(result: Any) -> None:
    """Both or neither: the rewrite and the metadata patches roll back together; a patch
    is validated as the complete merged object against the agent's thread schema."""
    store = _store()
    thread_id, _ids = _thread(store)

    def prepare_history_rewrite(input: Any) -> Any:
        if isinstance(result, Exception):
            raise result
        return result

    agent = _agent({"prepare_history_rewrite": prepare_history_rewrite})
    version = store.thread_version("s", thread_id)
    with pytest.raises(ValueError if not isinstance(result, Exception) else RuntimeError):
        asyncio.run(memory_regenerate(store, agent, "s", thread_id))
    assert store.thread_version("s", thread_id) == version
    assert all(m.visibility.transcript for m in store.stored_messages("s", thread_id))
    assert store.thread_bags("s", thread_id).private == {"cursor": [], "rewrites": 0}


def test_lc_059_visibility_rewrite_has_complete_before_and_after() -> None:
    store = _store()
    thread_id, (u1, a1, _u2, _a2) = _thread(store)
    seen: list[Any] = []
    agent = _agent({"prepare_history_rewrite": seen.append})
    done = asyncio.run(
        memory_update_visibility(
            store,
            agent,
            "s",
            thread_id,
            {a1: {"context": False}, u1: {"transcript": True}},  # u1 unchanged: no entry
        )
    )
    assert done is not None
    (change,) = seen[0].rewrite.changes
    assert seen[0].rewrite.kind == "visibility"
    assert change.message_id == a1
    assert change.before == MessageVisibility(transcript=True, context=True)
    assert change.after == MessageVisibility(transcript=True, context=False)
    assert done.after_version == seen[0].rewrite.before_version + 1
    assert asyncio.run(memory_update_visibility(store, agent, "s", thread_id, {})) is None


def test_lc_060_the_hook_gets_the_version_and_the_typed_metadata() -> None:
    store = _store()
    thread_id, _ = _thread(store)
    seen: list[Any] = []
    agent = _agent({"prepare_history_rewrite": seen.append})
    asyncio.run(memory_regenerate(store, agent, "s", thread_id))
    (input,) = seen
    assert input.version == input.rewrite.before_version
    assert input.private_metadata == {"cursor": [], "rewrites": 0}  # parsed {} defaults
    assert input.metadata == {"title": "untitled"}
    assert input.thread_id == thread_id


def test_lc_061_a_stale_version_retry_prepares_again_with_fresh_input() -> None:
    store = _store()
    thread_id, _ = _thread(store)
    seen: list[int] = []

    def prepare_history_rewrite(input: Any) -> None:
        seen.append(input.version)
        if len(seen) == 1:
            store.touch("s", thread_id)  # a concurrent revision: the first attempt is stale

    agent = _agent({"prepare_history_rewrite": prepare_history_rewrite})
    asyncio.run(memory_regenerate(store, agent, "s", thread_id))
    assert len(seen) == 2 and seen[1] == seen[0] + 1


def test_lc_061_a_locked_visibility_rewrite_prepares_exactly_once() -> None:
    store = _store()
    thread_id, ids = _thread(store)
    seen: list[Any] = []
    agent = _agent({"prepare_history_rewrite": seen.append})
    asyncio.run(
        memory_update_visibility(store, agent, "s", thread_id, {ids[1]: {"context": False}})
    )
    assert len(seen) == 1


def test_lc_062_lc_064_history_rewritten_runs_after_commit_with_after_version() -> None:
    store = _store()
    thread_id, _ = _thread(store)
    seen: list[Any] = []

    def history_rewritten(input: Any) -> None:
        seen.append((input, store.thread_version("s", thread_id), input.signal.aborted))

    agent = _agent({"history_rewritten": history_rewritten})
    rewritten = RewriteDispatcher()
    done = asyncio.run(memory_regenerate(store, agent, "s", thread_id, rewritten=rewritten))
    assert rewritten.wait_idle()
    ((input, committed_version, aborted),) = seen
    assert input.rewrite.after_version == done.after_version == committed_version
    assert aborted is False  # its own post-commit signal (LC-064)


def test_lc_063_a_failing_history_rewritten_is_reported_and_not_rolled_back() -> None:
    store = _store()
    thread_id, (_u1, _a1, _u2, a2) = _thread(store)
    reports: list[Any] = []

    def history_rewritten(input: Any) -> None:
        raise RuntimeError("reconcile failed")

    agent = _agent({"history_rewritten": history_rewritten}, on_runtime_error=reports.append)
    rewritten = RewriteDispatcher()
    done = asyncio.run(memory_regenerate(store, agent, "s", thread_id, rewritten=rewritten))
    assert rewritten.wait_idle()
    assert store.thread_version("s", thread_id) == done.after_version
    assert not {m.id: m for m in store.stored_messages("s", thread_id)}[a2].visibility.transcript
    (report,) = reports
    assert report.phase == "history_rewritten" and report.thread_id == thread_id
    assert str(report.error) == "reconcile failed"


def test_lc_065_history_rewritten_never_overlaps_per_thread_and_coalesces() -> None:
    active: dict[str, int] = {}
    overlaps: list[str] = []
    ran: list[tuple[str, int]] = []
    lock = threading.Lock()
    gate = threading.Event()

    def job(key: str, n: int) -> Any:
        async def run() -> None:
            with lock:
                active[key] = active.get(key, 0) + 1
                if active[key] > 1:
                    overlaps.append(key)
            if n == 0:
                gate.wait(5)
            time.sleep(0.005)
            ran.append((key, n))
            with lock:
                active[key] -= 1

        return run

    dispatcher = RewriteDispatcher(max_workers=2, max_pending=3)
    for n in range(10):
        dispatcher.submit("t1", job("t1", n))
    dispatcher.submit("t2", job("t2", 0))
    gate.set()
    assert dispatcher.wait_idle()
    assert overlaps == []
    t1 = [n for key, n in ran if key == "t1"]
    assert t1[0] == 0 and t1[-1] == 9 and t1 == sorted(t1)  # newest facts survive, in order
    assert dispatcher.coalesced == 10 - len(t1) > 0
    assert ("t2", 0) in ran


def test_lc_050_regenerate_and_admin_rewrites_are_refused_while_a_run_holds_the_lease() -> None:
    store = _store()
    thread_id, ids = _thread(store)
    seen: list[Any] = []
    agent = _agent({"prepare_history_rewrite": seen.append})
    store.start_run("s", thread_id)
    with pytest.raises(RewriteBusy):
        asyncio.run(memory_regenerate(store, agent, "s", thread_id))
    with pytest.raises(RewriteBusy):
        asyncio.run(
            memory_update_visibility(store, agent, "s", thread_id, {ids[0]: {"context": False}})
        )
    assert seen == []


def test_lc_066_agents_without_rewrite_hooks_still_rewrite_and_bump_the_version() -> None:
    store = _store()
    thread_id, _ids = _thread(store)
    agent = _agent(None)
    version = store.thread_version("s", thread_id)
    done = asyncio.run(memory_regenerate(store, agent, "s", thread_id))
    assert done.after_version == version + 1 == store.thread_version("s", thread_id)

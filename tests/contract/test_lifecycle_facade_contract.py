"""The lifecycle ``thread`` facade contract: one set of cases, run against every backend.

The facade is written once (``pai_agents.lifecycle.thread_facade``); these cases pin what
each backend under it must make true. ``backend`` is:

* ``reference``: :class:`~pai_agents.lifecycle.memory.InMemoryLifecycleStore`, the
  executable description;
* ``memory``: the engine's :class:`~pai_agents.engine.memory.InMemoryThreadStore`, reached
  as the engine reaches it (``lifecycle_thread`` / ``lifecycle_run_metadata``);
* ``orm``: :class:`~pai_threads.store.ORMThreadStore` the same way, on the run's database
  (the suite runs once on SQLite and once with ``DATABASE_URL`` on PostgreSQL).

A case talks to the facade only; setting the scene (a thread with a claimed run, a takeover
by another worker, an unrelated revision) and reading back what was stored go through the
small :class:`Backend` harness of ``lifecycle_facade_backends``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from pai_agents.engine.store import LeaseLost
from pai_agents.lifecycle import InvalidLifecycleWrite, InvalidMetadata, MutationConflict
from pai_agents.lifecycle.metadata import AgentMetadataSchemas, MetadataSchemas
from tests.contract.lifecycle_facade_backends import (
    ORM_DB,
    Backend,
    MemoryBackend,
    ORMBackend,
    ReferenceBackend,
)


@pytest.fixture(params=["reference", "memory", pytest.param("orm", marks=ORM_DB)])
def backend(request: pytest.FixtureRequest) -> Backend:
    kinds: dict[str, Callable[[], Backend]] = {
        "reference": ReferenceBackend,
        "memory": MemoryBackend,
        "orm": ORMBackend,
    }
    return kinds[request.param]()


async def _append(thread: Any, text: str, **visibility: bool) -> str:
    message = await thread.messages.append(
        role="assistant", parts=[{"type": "text", "text": text}], visibility=visibility or None
    )
    return str(message.id)


def _texts(page: Any) -> list[str]:
    return [m.parts[0]["text"] for m in page.items]


# --------------------------------------------------------------------------- reading


async def test_lc_014_lc_016_views_filter_by_visibility(backend: Backend) -> None:
    """LC-014, LC-016: transcript=False is in context views only, context=False in the
    transcript only; ``all`` has both, in append order."""
    _, lease = await backend.start()
    thread = backend.thread(lease)
    await _append(thread, "both")
    await _append(thread, "model only", transcript=False)
    await _append(thread, "ui only", context=False)
    views = {}
    for view in ("all", "context", "transcript"):
        views[view] = _texts(await thread.messages.list(view=view))
    assert views == {
        "all": ["hi", "both", "model only", "ui only"],
        "context": ["hi", "both", "model only"],
        "transcript": ["hi", "both", "ui only"],
    }


async def test_lc_016_order_and_exclusive_bounds(backend: Backend) -> None:
    """LC-016: ``desc`` reverses; ``before``/``after_message_id`` bound the range, exclusive;
    a bound outside the thread is refused."""
    _, lease = await backend.start()
    thread = backend.thread(lease)
    ids = [await _append(thread, str(i)) for i in range(5)]
    page = await thread.messages.list(
        order="desc", before_message_id=ids[4], after_message_id=ids[0]
    )
    assert _texts(page) == ["3", "2", "1"] and page.next_page_token is None
    assert _texts(await thread.messages.list(after_message_id=ids[3])) == ["4"]
    with pytest.raises(LookupError):
        await thread.messages.list(before_message_id="msg_elsewhere")
    with pytest.raises(ValueError):
        await thread.messages.list(view="everything")


async def test_lc_021_lc_023_tokens_visit_every_message_once_in_each_order(
    backend: Backend,
) -> None:
    """LC-021, LC-022, LC-023: pages of two visit each match once in the requested order;
    only the last page has no token; a token carries no query (the bounds are re-sent)."""
    _, lease = await backend.start()
    thread = backend.thread(lease)
    ids = [await _append(thread, str(i)) for i in range(5)]
    for order, expected in (("asc", ["0", "1", "2", "3", "4"]), ("desc", ["4", "3", "2", "1"])):
        seen: list[str] = []
        token = None
        while True:
            page = await thread.messages.list(
                order=order, after_message_id=ids[0] if order == "desc" else None,
                view="transcript", limit=2, page_token=token,
            )  # fmt: skip
            assert len(page.items) <= 2
            seen += _texts(page)
            token = page.next_page_token
            if token is None:
                break
        assert [t for t in seen if t != "hi"] == expected
    with pytest.raises(ValueError):
        await thread.messages.list(page_token="not-a-token")


async def test_lc_022_the_page_size_is_capped(backend: Backend) -> None:
    """LC-022: a limit above the bound is capped at 50 messages and a token follows."""
    _, lease = await backend.start()
    thread = backend.thread(lease)

    def many(tx: Any) -> None:
        for i in range(50):
            tx.messages.append(role="assistant", parts=[{"type": "text", "text": str(i)}])

    await thread.mutate(many)
    page = await thread.messages.list(limit=500)
    assert len(page.items) == 50 and page.next_page_token is not None
    rest = await thread.messages.list(limit=500, page_token=page.next_page_token)
    assert _texts(rest) == ["49"] and rest.next_page_token is None


async def test_lc_018_context_current_pairs_messages_with_model_messages(
    backend: Backend,
) -> None:
    """LC-018, LC-019: context.current() holds the context view and its provider content."""
    _, lease = await backend.start()
    thread = backend.thread(lease)
    await _append(thread, "hidden", context=False)
    await _append(thread, "answer")
    projection = await thread.context.current()
    assert [m.parts[0]["text"] for m in projection.messages] == ["hi", "answer"]
    assert projection.model_messages[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
    }
    assert projection.next_page_token is None
    assert _texts(await thread.context.messages(limit=1)) == ["hi"]


async def test_lc_004_lc_015_get_and_get_many_stay_in_their_thread(backend: Backend) -> None:
    """LC-004, LC-015: get_many keeps the requested order and leaves out unknown ids and
    another thread's messages, which ``get`` reads as None."""
    _, lease = await backend.start()
    _, other_lease = await backend.start()
    theirs = await _append(backend.thread(other_lease), "theirs")
    thread = backend.thread(lease)
    first, second = await _append(thread, "a"), await _append(thread, "b")
    found = await thread.messages.get_many([second, theirs, "msg_unknown", first])
    assert [m.id for m in found] == [second, first]
    assert await thread.messages.get(theirs) is None
    assert await thread.messages.get("msg_unknown") is None
    message = await thread.messages.get(first)
    assert message is not None and message.parts == ({"type": "text", "text": "a"},)


# --------------------------------------------------------------------------- writing


async def test_lc_011_lc_012_append_refuses_roles_and_parts_and_stores_nothing(
    backend: Backend,
) -> None:
    """LC-011, LC-012, LC-026: a tool role, reserved or application data parts, non-JSON
    content and ``metadata.pai`` are refused when called; nothing is stored."""
    thread_id, lease = await backend.start()
    thread = backend.thread(lease)
    before = await backend.stored(thread_id)
    text = [{"type": "text", "text": "x"}]
    refused: list[dict[str, Any]] = [
        {"role": "tool", "parts": text},
        {"role": "assistant", "parts": [{"type": "data-pai-run", "data": {}}]},
        {"role": "assistant", "parts": [{"type": "data-report", "data": {}}]},
        {"role": "assistant", "parts": [{"type": "text", "text": math.nan}]},
        {"role": "assistant", "parts": text, "metadata": {"pai": {}}},
    ]
    for arguments in refused:
        with pytest.raises(InvalidLifecycleWrite):
            thread.messages.append(**arguments)
    assert await backend.stored(thread_id) == before
    stored = await thread.messages.append(
        role="system", parts=text, visibility={"transcript": False}, private_metadata={"k": 1}
    )
    assert (stored.visibility.transcript, stored.visibility.context) == (False, True)
    assert await thread.messages.get(stored.id) == stored


async def test_lc_013_visibility_changes_are_partial_and_stay_in_the_thread(
    backend: Backend,
) -> None:
    """LC-013: update_visibility sets only the keys given; an id outside the thread is
    refused and nothing changes."""
    thread_id, lease = await backend.start()
    _, other_lease = await backend.start()
    theirs = await _append(backend.thread(other_lease), "theirs")
    thread = backend.thread(lease)
    mine = await _append(thread, "mine", transcript=False)
    await thread.messages.update_visibility([mine], context=False)
    assert (await backend.stored(thread_id))[-1] == (mine, False, False)
    await thread.messages.update_visibility([mine], transcript=True)
    assert (await backend.stored(thread_id))[-1] == (mine, True, False)
    before = await backend.stored(thread_id)
    with pytest.raises(InvalidLifecycleWrite):
        await thread.messages.update_visibility([mine, theirs], context=True)
    assert await backend.stored(thread_id) == before


async def test_lc_049_the_resolver_facade_has_no_visibility_writes(backend: Backend) -> None:
    """LC-049: neither the resolver's messages nor its tx.messages have update_visibility."""
    _, lease = await backend.start()
    resolver = backend.thread(lease, resolver=True)
    inside: list[bool] = []
    await resolver.mutate(lambda tx: inside.append(hasattr(tx.messages, "update_visibility")))
    assert not hasattr(resolver.messages, "update_visibility") and inside == [False]
    assert hasattr(backend.thread(lease).messages, "update_visibility")


async def test_lc_024_lc_027_lc_028_metadata_bags(backend: Backend) -> None:
    """LC-024, LC-027, LC-028: merge is shallow, replace swaps the bag, run merge returns the
    merged bag; thread and run, private and public, are separate bags."""
    thread_id, lease = await backend.start()
    thread = backend.thread(lease)
    await thread.metadata.merge({"topic": "billing", "nested": {"a": 1}})
    await thread.metadata.merge({"nested": {"b": 2}})
    await thread.private_metadata.replace({"cursor": "c1"})
    await thread.private_metadata.replace({"other": True})
    private_run, public_run = backend.run_metadata(lease)
    assert await public_run.merge({"rating": "good"}) == {"rating": "good"}
    assert await private_run.merge({"job": "j1"}) == {"job": "j1"}
    assert await thread.metadata.get() == {"topic": "billing", "nested": {"b": 2}}
    assert await thread.private_metadata.get() == {"other": True}
    assert await public_run.get() == {"rating": "good"}
    state = await backend.state(thread_id, lease)
    assert state["thread"] == ({"other": True}, {"topic": "billing", "nested": {"b": 2}})
    assert state["run"] == ({"job": "j1"}, {"rating": "good"})


class Public(BaseModel):
    category: str | None = None


class Private(BaseModel):
    model_config = ConfigDict(extra="allow")


async def test_lc_025_lc_026_invalid_metadata_is_refused_and_nothing_changes(
    backend: Backend,
) -> None:
    """LC-025, LC-026: non-JSON values and a merged bag the schema refuses are rejected
    (InvalidMetadata) for thread and run bags alike; the stored bags stay as they were."""
    thread_id, lease = await backend.start()
    thread = backend.thread(lease)
    await thread.metadata.merge({"kept": 1})
    private_run, _ = backend.run_metadata(lease)
    before = await backend.state(thread_id, lease)
    for write in (
        lambda: thread.metadata.merge({"bad": math.inf}),
        lambda: thread.private_metadata.replace({"bad": object()}),
        lambda: private_run.merge({"bad": math.nan}),
    ):
        with pytest.raises(InvalidMetadata):
            await write()
    pair = MetadataSchemas(private=Private, public=Public)
    typed = backend.thread(lease, schemas=AgentMetadataSchemas(thread=pair))
    with pytest.raises(InvalidMetadata):
        await typed.metadata.merge({"category": 5})
    assert await backend.state(thread_id, lease) == before
    await typed.metadata.merge({"category": "sales"})
    assert (await thread.metadata.get())["category"] == "sales"


# --------------------------------------------------------------------------- mutate


async def test_lc_035_lc_037_mutate_commits_everything_once_and_reads_persisted_state(
    backend: Backend,
) -> None:
    """LC-035, LC-037: staged writes (sync, not awaited) commit together with one new thread
    version; reads inside see persisted state only; mutate returns fn's result."""
    thread_id, lease = await backend.start()
    thread = backend.thread(lease)
    version = (await backend.state(thread_id, lease))["version"]
    seen: dict[str, Any] = {}

    async def fn(tx: Any) -> str:
        note = tx.messages.append(role="system", parts=[{"type": "text", "text": "n"}])
        tx.metadata.merge({"topic": "t"})
        tx.private_metadata.merge({"cursor": "c"})
        seen["metadata"] = await tx.metadata.get()
        seen["listed"] = _texts(await tx.messages.list())
        message = await note
        tx.messages.update_visibility([message.id], transcript=False)  # appended just now
        return str(message.id)

    note_id = await thread.mutate(fn)
    assert seen == {"metadata": {}, "listed": ["hi"]}
    state = await backend.state(thread_id, lease)
    assert state["version"] == version + 1
    assert state["thread"] == ({"cursor": "c"}, {"topic": "t"})
    assert (await backend.stored(thread_id))[-1] == (note_id, False, True)


async def test_lc_036_a_raising_fn_writes_nothing(backend: Backend) -> None:
    """LC-036: a callback that raises, or a staged op that fails at commit, leaves no write."""
    thread_id, lease = await backend.start()
    thread = backend.thread(lease)
    before = (await backend.state(thread_id, lease), await backend.stored(thread_id))

    def raising(tx: Any) -> None:
        tx.metadata.merge({"topic": "t"})
        tx.messages.append(role="user", parts=[{"type": "text", "text": "x"}])
        raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError):
        await thread.mutate(raising)

    def unknown_message(tx: Any) -> None:
        tx.metadata.merge({"topic": "t"})
        tx.messages.update_visibility(["msg_unknown"], context=False)

    with pytest.raises(InvalidLifecycleWrite):
        await thread.mutate(unknown_message)
    assert (await backend.state(thread_id, lease), await backend.stored(thread_id)) == before


async def test_lc_038_lc_039_compare_and_set(backend: Backend) -> None:
    """LC-038, LC-039: a stale expected_version or a different expected private bag rejects
    the whole mutation (MutationConflict, nothing written); an unrelated revision (a lease
    heartbeat) does not disturb the private-bag comparison; a current version commits."""
    thread_id, lease = await backend.start()
    thread = backend.thread(lease)
    await thread.private_metadata.replace({"cursor": "c1"})
    version = (await backend.state(thread_id, lease))["version"]

    def write(tx: Any) -> None:
        tx.metadata.merge({"k": "v"})

    before = await backend.state(thread_id, lease)
    with pytest.raises(MutationConflict):
        await thread.mutate(write, expected_version=version - 1)
    with pytest.raises(MutationConflict):
        await thread.mutate(write, expected_private_metadata={"cursor": "c0"})
    assert await backend.state(thread_id, lease) == before
    await backend.unrelated_revision(lease)
    await thread.mutate(write, expected_private_metadata={"cursor": "c1"})
    version = (await backend.state(thread_id, lease))["version"]
    await thread.mutate(lambda tx: tx.metadata.merge({"n": 2}), expected_version=version)
    assert await thread.metadata.get() == {"k": "v", "n": 2}


# --------------------------------------------------------------------------- the lease


async def test_lc_032_lc_033_writes_after_a_takeover_raise_lease_lost_and_write_nothing(
    backend: Backend,
) -> None:
    """LC-032, LC-033: once another worker took the run over, every write through the old
    execution's facade and run clients (kept from before) raises LeaseLost and stores
    nothing, mutate included; reads still work; the new owner's writes go through."""
    thread_id, lease = await backend.start()
    thread = backend.thread(lease)
    private_run, public_run = backend.run_metadata(lease)
    mine = await _append(thread, "before")
    new_lease = await backend.take_over(lease)
    before = (await backend.state(thread_id, lease), await backend.stored(thread_id))
    attempts: dict[str, Callable[[], Any]] = {
        "append": lambda: thread.messages.append(
            role="assistant", parts=[{"type": "text", "text": "stale"}]
        ),
        "visibility": lambda: thread.messages.update_visibility([mine], context=False),
        "merge": lambda: thread.metadata.merge({"topic": "stale"}),
        "replace": lambda: thread.private_metadata.replace({"cursor": "stale"}),
        "mutate": lambda: thread.mutate(lambda tx: tx.metadata.merge({"a": 1})),
        "run": lambda: public_run.merge({"rating": "stale"}),
        "private run": lambda: private_run.merge({"job": "stale"}),
    }
    refused = []
    for name, attempt in attempts.items():
        with pytest.raises(LeaseLost):
            await attempt()
        refused.append(name)
    assert refused == list(attempts)
    assert (await backend.state(thread_id, lease), await backend.stored(thread_id)) == before
    assert _texts(await thread.messages.list()) == ["hi", "before"]
    await backend.thread(new_lease).metadata.merge({"topic": "fresh"})
    assert await backend.run_metadata(new_lease)[1].merge({"rating": "ok"}) == {"rating": "ok"}
    assert (await backend.state(thread_id, lease))["thread"][1] == {"topic": "fresh"}

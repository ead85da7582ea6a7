"""The lease-fenced thread facade on the in-memory backend (LC-003, LC-004, LC-011..LC-039,
LC-049)."""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_support import World

from pai_agents.engine.store import LeaseLost
from pai_agents.lifecycle import (
    InvalidLifecycleWrite,
    InvalidMetadata,
    MutationConflict,
)


def test_lc_003_the_facade_offers_only_the_scoped_surface(world: World) -> None:
    """LC-003: thread_id, messages, private_metadata, metadata, context and mutate only."""
    facade = world.facade()
    public = {name for name in dir(facade) if not name.startswith("_")}
    assert public == {"thread_id", "messages", "private_metadata", "metadata", "context", "mutate"}
    assert facade.thread_id == world.thread_id


async def test_lc_004_messages_of_other_threads_and_partitions_are_invisible(world: World) -> None:
    """LC-004/LC-015: another thread's or partition's message reads like an unknown id."""
    mine = world.user("mine")
    other_thread = world.store.create_thread(world.scope)
    theirs = world.store.seed_message(
        world.scope, other_thread, role="user", parts=[{"type": "text", "text": "x"}]
    )
    world.store.create_thread("scope-b", world.thread_id)  # same id, other partition
    foreign = world.store.seed_message(
        "scope-b", world.thread_id, role="user", parts=[{"type": "text", "text": "y"}]
    )
    messages = world.facade().messages
    assert await messages.get(theirs.id) is None
    assert await messages.get(foreign.id) is None
    assert await messages.get("msg_unknown") is None
    assert [m.id for m in await messages.get_many([foreign.id, mine.id, theirs.id, "nope"])] == [
        mine.id
    ]


async def test_lc_011_append_accepts_system_user_assistant_and_returns_the_stored_message(
    world: World,
) -> None:
    """LC-011/LC-017: append returns the LifecycleMessage with visibility and private metadata;
    its client shape carries neither."""
    message = await world.facade().messages.append(
        role="system", parts=[{"type": "text", "text": "note"}], private_metadata={"source": "rag"}
    )
    assert (await world.facade().messages.get(message.id)) == message
    assert message.private_metadata == {"source": "rag"}
    assert set(message.to_ui_message()) == {"id", "role", "parts"}
    with pytest.raises(InvalidLifecycleWrite):
        await world.facade().messages.append(role="tool", parts=[])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "part",
    [
        {"type": "data-pai-run", "data": {}},
        {"type": "data-report", "data": {}},
        {"type": "tool-search", "toolCallId": "c", "state": "input-available", "input": {}},
        {"type": "text", "text": float("nan")},
    ],
)
async def test_lc_012_append_rejects_reserved_application_and_tool_parts(
    world: World, part: dict[str, Any]
) -> None:
    """LC-012: data-pai-*, application data-* and static tool parts are refused; nothing stored."""
    with pytest.raises(InvalidLifecycleWrite):
        await world.facade().messages.append(role="assistant", parts=[part])
    assert world.store.stored_messages(world.scope, world.thread_id) == []


async def test_lc_013_visibility_is_partial_on_append_and_update(world: World) -> None:
    """LC-013: only supplied visibility keys change."""
    messages = world.facade().messages
    hidden = await messages.append(
        role="user", parts=[{"type": "text", "text": "x"}], visibility={"transcript": False}
    )
    assert (hidden.visibility.transcript, hidden.visibility.context) == (False, True)
    await messages.update_visibility([hidden.id], context=False)
    stored = await messages.get(hidden.id)
    assert stored is not None and (stored.visibility.transcript, stored.visibility.context) == (
        False,
        False,
    )


async def test_lc_014_lc_016_views_filter_by_visibility(world: World) -> None:
    """LC-014/LC-016: a transcript=False, context=True message is in context views only."""
    world.user("visible")
    await world.facade().messages.append(
        role="system", parts=[{"type": "text", "text": "ctx"}], visibility={"transcript": False}
    )
    world.assistant("ui-only", context=False)
    messages = world.facade().messages

    async def texts(view: str) -> list[str]:
        page = await messages.list(view=view, limit=10)  # type: ignore[arg-type]
        return [m.parts[0]["text"] for m in page.items]

    assert await texts("context") == ["visible", "ctx"]
    assert await texts("transcript") == ["visible", "ui-only"]
    assert await texts("all") == ["visible", "ctx", "ui-only"]


async def test_lc_016_order_and_bounds(world: World) -> None:
    """LC-016: order asc/desc; before/after_message_id bound the range (exclusive)."""
    ids = [world.user(str(i)).id for i in range(5)]
    messages = world.facade().messages
    page = await messages.list(order="desc", before_message_id=ids[4], after_message_id=ids[0])
    assert [m.id for m in page.items] == [ids[3], ids[2], ids[1]]


async def test_lc_018_context_current_returns_messages_and_model_messages(world: World) -> None:
    """LC-018/LC-019: context.current() pairs LifecycleMessages with provider-only content."""
    for i in range(4):
        world.user(f"u{i}")
    projection = await world.facade().context.current()
    assert len(projection.messages) == 3 and projection.next_page_token is not None
    assert projection.model_messages[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "u0"}],
    }
    rest = await world.facade().context.messages(page_token=projection.next_page_token)
    assert [m.parts[0]["text"] for m in rest.items] == ["u3"] and rest.next_page_token is None


async def test_lc_021_lc_022_pages_visit_every_message_once_and_are_capped(world: World) -> None:
    """LC-021/LC-022: tokens visit each match once in order; limit is capped at the bound."""
    ids = [world.user(str(i)).id for i in range(8)]
    messages = world.facade().messages
    for order in ("asc", "desc"):
        seen: list[str] = []
        token = None
        while True:
            page = await messages.list(order=order, limit=100, page_token=token)  # type: ignore[arg-type]
            assert len(page.items) <= 3
            seen += [m.id for m in page.items]
            token = page.next_page_token
            if token is None:
                break
        assert seen == (ids if order == "asc" else ids[::-1])


async def test_lc_023_page_tokens_carry_position_only(world: World) -> None:
    """LC-023: the view comes from each call's arguments, not from the first page."""
    for i in range(4):
        world.user(f"u{i}")
    world.assistant("ui", context=False)
    world.user("u5")
    messages = world.facade().messages
    first = await messages.list(view="all", limit=2)
    second = await messages.list(view="context", limit=10, page_token=first.next_page_token)
    assert [m.parts[0]["text"] for m in second.items] == ["u2", "u3", "u5"]
    with pytest.raises(ValueError):
        await messages.list(page_token="not-a-token")


async def test_lc_024_lc_025_merge_is_shallow_and_validates_the_merged_object(world: World) -> None:
    """LC-024/LC-025: supplied keys replace whole values; an invalid merged bag is refused."""
    metadata = world.facade().metadata
    await metadata.merge({"tags": {"a": "1", "b": "2"}, "category": "x"})
    await metadata.merge({"tags": {"c": "3"}})
    assert await metadata.get() == {"category": "x", "tags": {"c": "3"}}
    with pytest.raises(InvalidMetadata):
        await metadata.merge({"tags": {"d": 4}})
    assert await metadata.get() == {"category": "x", "tags": {"c": "3"}}


async def test_lc_026_metadata_must_be_strict_json(world: World) -> None:
    """LC-026: NaN and non-JSON values are refused."""
    with pytest.raises(InvalidMetadata):
        await world.facade().private_metadata.merge({"cursor": float("nan")})
    private, _ = world.store.run_metadata_clients(world.lease)
    with pytest.raises(InvalidMetadata):
        await private.merge({"job": object()})


async def test_lc_027_run_merge_returns_the_bag_and_thread_replace_swaps_it(world: World) -> None:
    """LC-027: run merge returns the new bag; thread replace drops absent keys."""
    _, public = world.store.run_metadata_clients(world.lease)
    assert await public.merge({"rating": "up"}) == {"rating": "up"}
    assert await public.get() == {"rating": "up"}
    metadata = world.facade().metadata
    await metadata.merge({"category": "x", "tags": {"a": "b"}})
    await metadata.replace({"category": "y"})
    assert await metadata.get() == {"category": "y", "tags": {}}


async def test_lc_028_run_and_thread_metadata_are_separate_bags(world: World) -> None:
    """LC-028: writing run metadata never changes thread metadata and vice versa."""
    private, _ = world.store.run_metadata_clients(world.lease)
    await private.merge({"job": "j1"})
    await world.facade().private_metadata.merge({"cursor": "c1"})
    assert world.store.run_bags(world.lease.run_id).private == {"job": "j1"}
    assert world.store.thread_bags(world.scope, world.thread_id).private == {
        "cursor": "c1",
        "count": 0,
    }


async def test_lc_029_lc_031_only_public_writes_publish(world: World) -> None:
    """LC-029/LC-030/LC-031: public writes publish public values; private-only writes publish
    nothing; rejected writes publish nothing."""
    facade = world.facade()
    await facade.private_metadata.merge({"cursor": "secret-cursor"})
    assert world.store.events == []
    with pytest.raises(InvalidMetadata):
        await facade.metadata.merge({"category": 1})
    assert world.store.events == []
    await facade.metadata.merge({"category": "billing"})
    _, run_public = world.store.run_metadata_clients(world.lease)
    run_private, _ = world.store.run_metadata_clients(world.lease)
    await run_private.merge({"job": "secret-job"})
    await run_public.merge({"rating": "up"})
    assert [e["type"] for e in world.store.events] == ["thread.head", "run.metadata"]
    assert "secret" not in repr(world.store.events)


@pytest.mark.parametrize("how", ["takeover", "waiting", "completed"])
async def test_lc_032_lc_033_writes_after_lease_loss_are_rejected_and_write_nothing(
    world: World, how: str
) -> None:
    """LC-032/LC-033: once the run is waiting, terminal or taken over, every facade write and
    run-metadata write (even through a retained client) raises LeaseLost and stores nothing."""
    facade = world.facade()
    retained_metadata = facade.metadata
    run_private, run_public = world.store.run_metadata_clients(world.lease)
    world.user("before")
    before_messages = world.store.stored_messages(world.scope, world.thread_id)
    before_bags = world.store.thread_bags(world.scope, world.thread_id)
    version = world.store.thread_version(world.scope, world.thread_id)
    if how == "takeover":
        world.store.take_over(world.lease.run_id)
    else:
        world.store.set_run_status(world.lease.run_id, how)

    attempts = [
        lambda: facade.messages.append(role="user", parts=[{"type": "text", "text": "late"}]),
        lambda: facade.messages.update_visibility([before_messages[0].id], context=False),
        lambda: retained_metadata.merge({"category": "late"}),
        lambda: facade.private_metadata.replace({"cursor": "late"}),
        lambda: run_private.merge({"job": "late"}),
        lambda: run_public.merge({"rating": "late"}),
    ]
    for attempt in attempts:
        with pytest.raises(LeaseLost):
            await attempt()

    async def staged(tx: Any) -> None:
        await tx.metadata.merge({"category": "late"})

    with pytest.raises(LeaseLost):
        await facade.mutate(staged)
    assert world.store.stored_messages(world.scope, world.thread_id) == before_messages
    assert world.store.thread_bags(world.scope, world.thread_id) == before_bags
    assert world.store.run_bags(world.lease.run_id).private == {"job": None}
    assert world.store.thread_version(world.scope, world.thread_id) == version
    assert world.store.events == [] or all(e["version"] <= version for e in world.store.events)


async def test_lc_035_mutate_commits_all_staged_writes_atomically(world: World) -> None:
    """LC-035: every tx write lands in one commit (one version bump); fn's result returns."""
    facade = world.facade()
    version = world.store.thread_version(world.scope, world.thread_id)

    async def fn(tx: Any) -> str:
        message = await tx.messages.append(
            role="system", parts=[{"type": "text", "text": "summary"}]
        )
        await tx.private_metadata.merge({"cursor": message.id})
        await tx.metadata.merge({"category": "compacted"})
        return message.id

    message_id = await facade.mutate(fn)
    assert world.store.thread_version(world.scope, world.thread_id) == version + 1
    assert world.store.thread_bags(world.scope, world.thread_id).private["cursor"] == message_id
    assert [m.id for m in world.store.stored_messages(world.scope, world.thread_id)] == [message_id]


async def test_lc_035_sync_mutate_callbacks_stage_too(world: World) -> None:
    """LC-035/LC-001: a plain def callback stages writes the same way."""

    def fn(tx: Any) -> None:
        tx.metadata.merge({"category": "sync"})

    await world.facade().mutate(fn)
    assert world.store.thread_bags(world.scope, world.thread_id).public["category"] == "sync"


async def test_lc_036_a_raising_callback_persists_nothing(world: World) -> None:
    """LC-036: if fn raises, none of its staged writes are stored."""

    async def fn(tx: Any) -> None:
        await tx.messages.append(role="user", parts=[{"type": "text", "text": "x"}])
        await tx.metadata.merge({"category": "x"})
        raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError):
        await world.facade().mutate(fn)
    assert world.store.stored_messages(world.scope, world.thread_id) == []
    assert world.store.thread_bags(world.scope, world.thread_id).public == {
        "category": None,
        "tags": {},
    }


async def test_lc_036_an_invalid_staged_write_rejects_the_whole_mutation(world: World) -> None:
    """LC-036/LC-025: one invalid staged write aborts the commit; earlier ones are dropped."""

    async def fn(tx: Any) -> None:
        await tx.messages.append(role="user", parts=[{"type": "text", "text": "x"}])
        await tx.metadata.merge({"category": 5})

    with pytest.raises(InvalidMetadata):
        await world.facade().mutate(fn)
    assert world.store.stored_messages(world.scope, world.thread_id) == []


async def test_lc_037_reads_in_the_callback_see_persisted_state_only(world: World) -> None:
    """LC-037: staged writes are invisible to reads in the same callback."""
    seen: dict[str, Any] = {}

    async def fn(tx: Any) -> None:
        message = await tx.messages.append(role="user", parts=[{"type": "text", "text": "x"}])
        await tx.metadata.merge({"category": "staged"})
        seen["message"] = await tx.messages.get(message.id)
        seen["metadata"] = await tx.metadata.get()
        seen["context"] = (await tx.context.current()).messages

    await world.facade().mutate(fn)
    assert seen == {"message": None, "metadata": {"category": None, "tags": {}}, "context": ()}


async def test_lc_038_expected_version_is_a_root_compare_and_set(world: World) -> None:
    """LC-038: a stale expected_version rejects the mutation; nothing is written."""
    facade = world.facade()
    version = world.store.thread_version(world.scope, world.thread_id)
    world.store.touch(world.scope, world.thread_id)  # e.g. a heartbeat revision

    async def fn(tx: Any) -> None:
        await tx.metadata.merge({"category": "x"})

    with pytest.raises(MutationConflict):
        await facade.mutate(fn, expected_version=version)
    await facade.mutate(fn, expected_version=version + 1)
    assert world.store.thread_bags(world.scope, world.thread_id).public["category"] == "x"


async def test_lc_039_expected_private_metadata_ignores_unrelated_revisions(world: World) -> None:
    """LC-039: only private metadata is compared; status/usage/heartbeat revisions pass."""
    facade = world.facade()
    cursor = dict(await facade.private_metadata.get())
    world.store.touch(world.scope, world.thread_id)

    async def fn(tx: Any) -> None:
        await tx.private_metadata.merge({"cursor": "next"})

    await facade.mutate(fn, expected_private_metadata=cursor)
    with pytest.raises(MutationConflict):
        await facade.mutate(fn, expected_private_metadata=cursor)
    assert (await facade.private_metadata.get())["cursor"] == "next"


async def test_lc_049_the_resolver_facade_has_no_update_visibility(world: World) -> None:
    """LC-049: neither thread.messages nor tx.messages offers update_visibility in the
    resolver phase; other phases keep it."""
    resolver = world.facade(resolver=True)
    assert not hasattr(resolver.messages, "update_visibility")
    seen: list[bool] = []

    def fn(tx: Any) -> None:
        seen.append(hasattr(tx.messages, "update_visibility"))

    await resolver.mutate(fn)
    await world.facade().mutate(fn)
    assert seen == [False, True]
    assert hasattr(world.facade().messages, "update_visibility")

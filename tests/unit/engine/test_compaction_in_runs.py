"""The built-in context compactor run by the engine on the in-memory store (LC-053..056, TH-005)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel, Field

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_agents.engine.rewrites import memory_regenerate, memory_update_visibility
from pai_agents.engine.store import LeaseLost
from pai_agents.lifecycle import (
    CompactionState,
    MetadataSchemas,
    SummarizeInput,
    context_compaction,
    estimate_tokens,
)
from pai_agents.lifecycle.memory import InMemoryLifecycleStore
from pai_agents.lifecycle.metadata import MetadataSchemaError
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import ModelMessage
from tests.support.engine_harness import Harness, harness, request_texts, text_of, user

KEY = "pai_compaction"
SUMMARY = "system:Summary of the earlier conversation:\n"
CLEARED: dict[str, Any] = {"summary": None, "cursor": None, "boundaries": [], "usage": None}


def turns(count: int) -> list[UIMessage]:
    """``count`` alternating user/assistant messages with ids h0, h1, ..."""
    return [
        {
            "id": f"h{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "parts": [{"type": "text", "text": f"turn {i}"}],
        }
        for i in range(count)
    ]


def ten_per_message(messages: Sequence[ModelMessage]) -> int:
    """A deterministic token count: 10 per model message."""
    return 10 * len(messages)


class Summarizer:
    """Records every call; the summary names the folded ids."""

    def __init__(self) -> None:
        self.calls: list[SummarizeInput] = []

    def __call__(self, input: SummarizeInput) -> str:
        self.calls.append(input)
        return f"S{len(self.calls)}({','.join(m.id for m in input.messages)})"


def compactor(summarize: Any, **options: Any) -> Any:
    options.setdefault("threshold_tokens", 50)
    options.setdefault("keep_recent", 2)
    options.setdefault("count_tokens", ten_per_message)
    return context_compaction(summarize, **options)


def state_of(h: Harness) -> dict[str, Any]:
    return h.store.lifecycle.thread_bags("s", h.thread_id).private


async def run_again(h: Harness, text: str, message_id: str) -> Any:
    h.run_id = h.store.send(h.thread_id, user(text, message_id))
    return await h.run()


async def test_th_005_older_context_is_summarized_once_past_the_token_threshold() -> None:
    """TH-005: past the threshold, the user's summarizer folds all but the newest
    ``keep_recent`` messages; the model gets the summary plus the recent messages."""
    summarize = Summarizer()
    h = harness(
        [ScriptedStep.reply("ok")], parts=[compactor(summarize)], history=turns(6), tools=()
    )
    assert (await h.run()).status == "completed"
    (call,) = summarize.calls
    assert [m.id for m in call.messages] == ["h0", "h1", "h2", "h3", "h4"]
    assert call.previous_summary is None
    assert [m["role"] for m in call.model_messages] == ["user", "assistant"] * 2 + ["user"]
    assert request_texts(h.model.requests[0]) == [
        f"{SUMMARY}S1(h0,h1,h2,h3,h4)",
        "assistant:turn 5",
        "user:hello",
    ]
    state = state_of(h)[KEY]
    assert state["summary"] == "S1(h0,h1,h2,h3,h4)" and state["cursor"] == "h4"
    assert state["boundaries"] == [{"cursor": "h4", "folded": 5, "tokens": 50}]


async def test_th_005_below_the_threshold_nothing_is_summarized() -> None:
    """TH-005: under the threshold the context reaches the model unchanged."""
    summarize = Summarizer()
    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[compactor(summarize, threshold_tokens=1000)],
        history=turns(3),
        tools=(),
    )
    await h.run()
    assert summarize.calls == []
    assert request_texts(h.model.requests[0]) == [
        "user:turn 0",
        "assistant:turn 1",
        "user:turn 2",
        "user:hello",
    ]
    assert state_of(h)[KEY]["summary"] is None


async def test_th_005_the_default_estimate_counts_characters_and_async_summarizers_work() -> None:
    """TH-005: without ``count_tokens`` about four characters count as one token (each
    message here is about 113); the summarizer may be ``async def``."""
    seen: list[SummarizeInput] = []

    async def summarize(input: SummarizeInput) -> str:
        seen.append(input)
        return "short"

    long: list[UIMessage] = [
        {"id": f"h{i}", "role": "user", "parts": [{"type": "text", "text": "x" * 400}]}
        for i in range(4)
    ]
    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[context_compaction(summarize, threshold_tokens=400, keep_recent=2)],
        history=long,
        tools=(),
    )
    await h.run()
    assert 100 < estimate_tokens([{"role": "user", "content": "x" * 400}]) < 110
    assert [[m.id for m in call.messages] for call in seen] == [["h0", "h1", "h2"]]
    assert request_texts(h.model.requests[0]) == [
        f"{SUMMARY}short",
        "user:" + "x" * 400,
        "user:hello",
    ]


async def test_lc_053_the_decision_is_committed_from_the_durable_base_before_one_next_base() -> (
    None
):
    """LC-053: the compactor reads history (not the default leaf), commits summary and cursor,
    then calls ``next(base)`` exactly once: the inner resolver (which every ``next`` call
    runs) runs once, already sees the committed cursor, and gets the summary plus the
    messages after the cursor, never the default context."""
    summarize = Summarizer()
    inner: list[tuple[list[ModelMessage], Any]] = []

    async def resolve(input: Any, next: Any) -> Any:
        base = await next()
        stored = await input.thread.private_metadata.get()
        inner.append((base, stored[KEY]["cursor"]))
        return base

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[compactor(summarize), {"resolve_model_context": resolve, "name": "inner"}],
        history=turns(6),
        tools=(),
    )
    await h.run()
    ((base, cursor),) = inner  # next(base) exactly once
    assert cursor == "h4"  # committed before next(base)
    assert base[0]["content"].endswith("S1(h0,h1,h2,h3,h4)")
    assert [m["role"] for m in base] == ["system", "assistant", "user"]
    assert len(summarize.calls) == 1


async def test_lc_054_inner_resolvers_see_the_summary_and_reshape_without_moving_the_cursor() -> (
    None
):
    """LC-054: an inner resolver drops, adds and reorders model-input messages on the same
    step; the committed cursor stays where the compactor put it, and the next step's base
    still comes from the durable messages after that cursor."""
    summarize = Summarizer()
    bases: list[list[ModelMessage]] = []

    async def reshape(input: Any, next: Any) -> Any:
        base = await next()
        bases.append(base)
        summary, *rest = base
        kept = [m for m in rest if "turn 5" not in str(m["content"])]  # drop one message
        return [*kept, {"role": "system", "content": "retrieved"}, summary]  # and reorder

    h = harness(
        [ScriptedStep.reply("ok"), ScriptedStep.reply("ok again")],
        parts=[compactor(summarize, track_usage=False), {"resolve_model_context": reshape}],
        history=turns(6),
        tools=(),
    )
    await h.run()
    assert bases[0][0]["content"].endswith("S1(h0,h1,h2,h3,h4)")  # the same step's summary
    assert request_texts(h.model.requests[0]) == [
        "user:hello",
        "system:retrieved",
        f"{SUMMARY}S1(h0,h1,h2,h3,h4)",
    ]
    assert state_of(h)[KEY]["cursor"] == "h4"
    await run_again(h, "more", "u2")
    assert len(summarize.calls) == 1  # 10 (summary) + 4 messages * 10 = 50: not past it
    texts = [str(m["content"]) for m in bases[1]]
    assert "turn 5" in texts[1]  # the inner drop never moved the durable cursor
    assert state_of(h)[KEY]["cursor"] == "h4"


async def test_lc_053_a_backlog_is_folded_in_batches_each_extending_the_previous_summary() -> None:
    """LC-053, TH-005: a fold larger than the threshold goes to the summarizer in batches;
    each call gets the previous summary, and one commit records a boundary per batch."""
    summarize = Summarizer()
    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[compactor(summarize, threshold_tokens=30, keep_recent=1)],
        history=turns(6),
        tools=(),
    )
    await h.run()
    first, second = summarize.calls
    assert [m.id for m in first.messages] == ["h0", "h1", "h2"]
    assert [m.id for m in second.messages] == ["h3", "h4", "h5"]
    assert second.previous_summary == "S1(h0,h1,h2)"
    state = state_of(h)[KEY]
    assert state["cursor"] == "h5" and state["summary"] == "S2(h3,h4,h5)"
    assert [b["cursor"] for b in state["boundaries"]] == ["h2", "h5"]
    assert request_texts(h.model.requests[0]) == [f"{SUMMARY}S2(h3,h4,h5)", "user:hello"]


async def test_lc_053_the_provider_usage_anchor_is_preferred_over_the_estimate() -> None:
    """LC-053: after a step the compactor keeps the provider-reported input tokens (the
    usage anchor); the next step measures anchor + what came after it. Here the estimate
    alone (70) stays under the threshold but the anchored count (900 + 20) does not."""
    summarize = Summarizer()
    usage = {"inputTokens": 900, "outputTokens": 5, "totalTokens": 905}
    h = harness(
        [ScriptedStep.call("lookup", {"q": "x"}, usage=usage), ScriptedStep.reply("done")],
        parts=[compactor(summarize, threshold_tokens=100)],
        history=turns(4),
    )
    await h.run()
    (call,) = summarize.calls
    assert [m.id for m in call.messages] == ["h0", "h1", "h2", "h3"]
    first, second = h.model.requests
    assert not request_texts(first)[0].startswith(SUMMARY)
    assert request_texts(second)[0] == f"{SUMMARY}S1(h0,h1,h2,h3)"
    final = h.assistant()[-1]
    assert text_of(final) == "done"
    anchor = state_of(h)[KEY]["usage"]
    assert anchor["message_id"] == final["id"] and anchor["cursor"] == "h3"
    assert anchor["input_tokens"] != 900  # re-measured on the compacted request


async def test_lc_056_a_summary_is_rejected_when_the_cursor_moved_meanwhile() -> None:
    """LC-056: another writer changes the compactor's state while the summary is in flight:
    the commit (expected_private_metadata) is rejected, nothing of it is stored, and the
    step continues on the stored state."""
    captured: list[Any] = []
    theirs = {
        "summary": "theirs",
        "cursor": "h2",
        "boundaries": [{"cursor": "h2", "folded": 3, "tokens": 30}],
        "usage": None,
    }

    async def summarize(input: SummarizeInput) -> str:
        await captured[0].private_metadata.merge({KEY: theirs})  # a concurrent compaction
        return "mine"

    def prepare_run(input: Any) -> None:
        captured.append(input.thread)

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[compactor(summarize, track_usage=False), {"prepare_run": prepare_run}],
        history=turns(6),
        tools=(),
    )
    assert (await h.run()).status == "completed"
    assert state_of(h)[KEY] == theirs
    assert request_texts(h.model.requests[0]) == [
        f"{SUMMARY}theirs",
        "assistant:turn 3",
        "user:turn 4",
        "assistant:turn 5",
        "user:hello",
    ]


async def test_lc_056_unrelated_private_keys_do_not_reject_the_summary() -> None:
    """LC-056: only the compactor's own state rejects a commit; a concurrent write of
    another private key is kept and the summary commits on a fresh comparison."""
    captured: list[Any] = []

    async def summarize(input: SummarizeInput) -> str:
        await captured[0].private_metadata.merge({"note": "kept"})
        return "mine"

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[
            compactor(summarize, track_usage=False),
            {"prepare_run": lambda input: captured.append(input.thread)},
        ],
        history=turns(6),
        tools=(),
    )
    await h.run()
    private = state_of(h)
    assert private["note"] == "kept" and private[KEY]["summary"] == "mine"


async def test_lc_056_a_summary_finished_after_lease_loss_writes_nothing() -> None:
    """LC-056: the run's lease moved on while the summarizer ran: the commit raises
    LeaseLost, no state is stored and the model is never called."""
    holder: list[Harness] = []

    def summarize(input: SummarizeInput) -> str:
        h = holder[0]
        h.store.runs[h.run_id].lease_token += 1  # another worker took the run over
        return "stale"

    h = harness(
        [ScriptedStep.reply("ok")], parts=[compactor(summarize)], history=turns(6), tools=()
    )
    holder.append(h)
    with pytest.raises(LeaseLost):
        await h.run()
    assert KEY not in state_of(h)
    assert h.model.requests == []


class Empty(BaseModel):
    pass


class TypedPrivate(BaseModel):
    pai_compaction: CompactionState = Field(default_factory=CompactionState)
    note: str = ""


class UntypedPrivate(BaseModel):
    note: str = ""


async def test_lc_053_typed_thread_private_metadata_includes_compaction_state() -> None:
    """LC-053 with typed thread metadata: the app includes ``CompactionState`` under the key
    and compaction commits through its schema."""
    summarize = Summarizer()
    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[compactor(summarize)],
        history=turns(6),
        tools=(),
        thread_metadata=MetadataSchemas(private=TypedPrivate, public=Empty),
    )
    assert (await h.run()).status == "completed"
    assert state_of(h)[KEY]["cursor"] == "h4"
    assert state_of(h)["note"] == ""


async def test_lc_053_a_typed_schema_without_the_state_fails_loudly() -> None:
    """A typed private schema that drops the compactor's key would silently disable it: the
    run fails with a MetadataSchemaError naming the missing field."""
    reports: list[Any] = []
    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[compactor(Summarizer())],
        history=turns(6),
        tools=(),
        thread_metadata=MetadataSchemas(private=UntypedPrivate, public=Empty),
        on_runtime_error=reports.append,
    )
    assert (await h.run()).status == "failed"
    assert isinstance(reports[0].error, MetadataSchemaError)
    assert KEY in str(reports[0].error)


# -- LC-055: history rewrites clear the state (in-memory rewrite reference) --

STATE = {
    "summary": "S",
    "cursor": "m1",
    "boundaries": [{"cursor": "m1", "folded": 2, "tokens": 20}],
    "usage": {"message_id": "m3", "input_tokens": 500, "cursor": "m1"},
}


async def _rewrite_fixture() -> tuple[InMemoryLifecycleStore, str, list[str], Any]:
    store = InMemoryLifecycleStore()
    thread_id = store.create_thread("s")
    ids = [
        store.seed_message("s", thread_id, role=role, parts=[{"type": "text", "text": role}]).id
        for role in ("user", "assistant", "user", "assistant")
    ]
    lease = store.start_run("s", thread_id)
    await store.facade("s", thread_id, lease).private_metadata.merge({KEY: STATE, "other": 1})
    store.set_run_status(lease.run_id, "completed")
    agent = define_agent(
        "rw", instructions="x", model=ScriptedModel(steps=[]), lifecycle=compactor(Summarizer())
    )
    return store, thread_id, ids, agent


async def test_lc_055_regenerate_clears_the_boundary_stack_and_the_usage_anchor() -> None:
    """LC-055: a regenerate (retries are regenerates) clears summary, cursor, boundary stack
    and usage anchor in the rewrite's transaction; other private keys stay."""
    store, thread_id, _ids, agent = await _rewrite_fixture()
    await memory_regenerate(store, agent, "s", thread_id)
    assert store.thread_bags("s", thread_id).private == {KEY: CLEARED, "other": 1}


async def test_lc_055_context_visibility_rewrites_clear_transcript_only_ones_do_not() -> None:
    """LC-055: only a change of context eligibility invalidates the state."""
    store, thread_id, ids, agent = await _rewrite_fixture()
    await memory_update_visibility(store, agent, "s", thread_id, {ids[0]: {"transcript": False}})
    assert store.thread_bags("s", thread_id).private[KEY] == STATE
    await memory_update_visibility(store, agent, "s", thread_id, {ids[0]: {"context": False}})
    assert store.thread_bags("s", thread_id).private[KEY] == CLEARED


async def test_lc_055_a_cleared_state_starts_over_on_the_next_step() -> None:
    """LC-055: after the state was cleared the next step summarizes from the first message."""
    summarize = Summarizer()
    h = harness(
        [ScriptedStep.reply("ok"), ScriptedStep.reply("ok")],
        parts=[compactor(summarize, track_usage=False)],
        history=turns(6),
        tools=(),
    )
    await h.run()
    backend = h.store.lifecycle
    backend._threads[("s", h.thread_id)].private[KEY] = dict(CLEARED)  # what LC-055 commits
    await run_again(h, "again", "u2")
    restart = summarize.calls[1]  # the first call of the second run
    assert [m.id for m in restart.messages][:2] == ["h0", "h1"]
    assert restart.previous_summary is None

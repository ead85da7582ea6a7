"""The examples of docs/lifecycle.md, executed from the page and run in an agent.

Each ``<!-- example: name -->`` block is exec'd as written; the tests then drive RunEngine
on the in-memory store with what it defines and check the effect the page claims.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import ScriptedModel, ScriptedStep, define_agent, tool
from pai_agents.engine.memory import MemoryRun
from pai_agents.lifecycle import (
    ContextCompaction,
    InvalidMetadata,
    Respond,
    context_compaction,
)
from pai_agents.messages.types import UIMessage
from pai_agents.models import ModelError, ModelMessage, ModelRequest, StepStreamPart
from tests.support.engine_harness import (
    Harness,
    harness,
    request_texts,
    text_of,
    user,
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "lifecycle.md"
_BLOCK = re.compile(r"<!-- example: (\w+) -->\s*```python\n(.*?)```", re.DOTALL)


def examples() -> dict[str, str]:
    return dict(_BLOCK.findall(DOC.read_text()))


def run_example(name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"guide_example_{name}"}
    # dont_inherit: the page's code runs without this module's ``from __future__`` imports.
    exec(compile(examples()[name], f"{DOC}:{name}", "exec", dont_inherit=True), namespace)
    return namespace


class SearchArgs(BaseModel):
    query: str = ""


class PathArgs(BaseModel):
    path: str = ""


calls: list[str] = []


@tool(input=SearchArgs)
def search(args: SearchArgs) -> str:
    """Search the docs."""
    calls.append(f"search:{args.query}")
    return f"results for {args.query}"


@tool(input=PathArgs)
def delete(args: PathArgs) -> str:
    """Delete a file."""
    calls.append(f"delete:{args.path}")
    return "deleted"


@tool(input=SearchArgs)
def report(args: SearchArgs) -> str:
    """A long report."""
    return "x" * 5000


@tool(input=SearchArgs)
def flaky(args: SearchArgs) -> str:
    """Always raises."""
    raise RuntimeError("db password is hunter2")


@tool(input=SearchArgs)
def final_answer(args: SearchArgs) -> str:
    """Give the final answer."""
    return "ok"


TOOLS = [search, delete, report, flaky, final_answer]


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls.clear()


def both(*steps: ScriptedStep) -> ScriptedStep:
    """One model step making every tool call of ``steps``."""
    return ScriptedStep(tool_calls=[c for s in steps for c in s.tool_calls])


def tool_parts(message: UIMessage) -> dict[str, Any]:
    return {p["toolCallId"]: p for p in message["parts"] if p.get("toolCallId")}


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


async def run_again(h: Harness, text: str, message_id: str) -> str:
    h.run_id = h.store.send(h.thread_id, user(text, message_id))
    return (await h.run()).status


def test_every_example_of_the_page_is_tested() -> None:
    tested = {
        "define",
        "facade",
        "typed_metadata",
        "compaction",
        "tool_results",
        "stream_data",
        "stream_abort",
        "errors",
        "completion",
        "guardrail",
        "token_quota",
        "rag",
        "model_fallback",
        "pii_redaction",
        "tool_allow_list",
        "testing",
    }
    assert set(examples()) == tested


# -- defining and composing ---------------------------------------------------------------


async def test_define_a_subclass_and_a_named_dict_compose_left_to_right() -> None:
    """The subclass patches every step; the named dict part refuses deletes."""
    ns = run_example("define")
    h = harness(
        [
            both(ScriptedStep.call("search", {"query": "a"}), ScriptedStep.call("delete", id="d")),
            ScriptedStep.reply("done"),
        ],
        parts=ns["LIFECYCLE"],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert [r.settings.get("temperature") for r in h.model.requests] == [0, 0]
    assert calls == ["search:a"]
    assert tool_parts(h.assistant()[0])["d"]["errorText"] == "deleting is disabled"
    parts = {phase: part for part, phase in h.trace.calls}
    assert parts["prepare_model_step"] == "Deterministic"
    assert parts["before_tool_call"] == "no-deletes"


# -- the thread facade --------------------------------------------------------------------


async def test_facade_pins_a_hidden_note_once_in_one_atomic_mutation() -> None:
    """The note is model context (every later step and run), never transcript, and the
    private flag committed with it keeps a second run from pinning it again."""
    ns = run_example("facade")
    note = f"system:{ns['NOTE']}"
    views: dict[str, list[str]] = {}

    async def probe(input: Any) -> None:
        for view in ("transcript", "context"):
            views[view] = [m.role for m in await ns["all_messages"](input.thread, view)]

    h = harness(
        [ScriptedStep.reply("ok"), ScriptedStep.reply("ok again")],
        parts=[ns["PinnedNote"](), {"prepare_run": probe}],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert note in request_texts(h.model.requests[0])
    assert await run_again(h, "again", "u2") == "completed"
    assert note in request_texts(h.model.requests[1])
    pinned = [m for m in h.messages() if m["role"] == "system"]
    assert len(pinned) == 1
    assert views == {
        "transcript": ["user", "assistant", "user"],
        "context": ["user", "system", "assistant", "user"],
    }


async def test_facade_all_messages_follows_every_page() -> None:
    """all_messages() repeats the query with each page token until the last page."""
    ns = run_example("facade")
    seen: list[str] = []

    async def read_all(input: Any) -> None:
        seen.extend(m.id for m in await ns["all_messages"](input.thread, "all"))

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[{"prepare_run": read_all}],
        tools=TOOLS,
        history=turns(120),  # three pages of at most 50
    )
    assert (await h.run()).status == "completed"
    assert seen == [f"h{i}" for i in range(120)] + ["u1"]


# -- typed metadata -----------------------------------------------------------------------


async def test_typed_metadata_labels_the_thread_and_holds_the_hooks_state() -> None:
    """The public label is validated and stored; the quota counter and the compactor's state
    fit the private schema."""
    ns = run_example("typed_metadata")
    quota = run_example("token_quota")
    compaction = run_example("compaction")
    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[compaction["COMPACTION"], ns["TopicLabel"](), quota["TokenQuota"](1000)],
        tools=TOOLS,
        thread_metadata=ns["THREAD_METADATA"],
        prompt="Where is my invoice?",
    )
    assert (await h.run()).status == "completed"
    bags = h.store.lifecycle.thread_bags("s", h.thread_id)
    assert bags.public == {"topic": "billing"}
    tokens = bags.private["tokens_used"]
    assert isinstance(tokens, int) and tokens > 0
    assert set(bags.private) == {"tokens_used", "pai_compaction"}


async def test_typed_metadata_refuses_an_invalid_write() -> None:
    """A value outside the schema fails the hook's write, so the run fails, reported."""
    ns = run_example("typed_metadata")
    reports: list[Any] = []

    async def wrong(input: Any) -> None:
        await input.thread.metadata.merge({"topic": "sports"})

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[{"prepare_run": wrong}],
        tools=TOOLS,
        thread_metadata=ns["THREAD_METADATA"],
        on_runtime_error=reports.append,
    )
    assert (await h.run()).status == "failed"
    assert isinstance(reports[0].error, InvalidMetadata)
    assert h.store.lifecycle.thread_bags("s", h.thread_id).public == {"topic": None}


# -- context compaction -------------------------------------------------------------------


def ten_per_message(messages: Sequence[ModelMessage]) -> int:
    return 10 * len(messages)


async def test_compaction_summarizes_older_context_with_the_pages_summarizer() -> None:
    """Past the threshold the page's summarizer folds all but the newest messages; the model
    gets the summary first, then the recent messages."""
    ns = run_example("compaction")
    assert isinstance(ns["COMPACTION"], ContextCompaction)
    small = context_compaction(
        ns["summarize"], threshold_tokens=50, keep_recent=2, count_tokens=ten_per_message
    )
    h = harness([ScriptedStep.reply("ok")], parts=[small], tools=TOOLS, history=turns(6))
    assert (await h.run()).status == "completed"
    summary = "\n".join(f"{'user' if i % 2 == 0 else 'assistant'}: turn {i}" for i in range(5))
    assert request_texts(h.model.requests[0]) == [
        f"system:Summary of the earlier conversation:\n{summary}",
        "assistant:turn 5",
        "user:hello",
    ]
    state: Any = h.store.lifecycle.thread_bags("s", h.thread_id).private["pai_compaction"]
    assert state["cursor"] == "h4" and state["summary"] == summary


# -- tool hooks ---------------------------------------------------------------------------


async def test_tool_results_are_truncated_and_failures_reworded() -> None:
    """The model and the stored parts get the bounded output and the reworded error."""
    ns = run_example("tool_results")
    h = harness(
        [
            both(ScriptedStep.call("report", id="r"), ScriptedStep.call("flaky", id="f")),
            ScriptedStep.reply("done"),
        ],
        parts=[ns["ToolResultPolicy"]()],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    parts = tool_parts(h.assistant()[0])
    assert parts["r"]["output"] == "x" * 4000 + " [truncated]"
    assert parts["f"]["errorText"] == "flaky is unavailable; answer without it."
    sent = json.dumps(h.model.requests[1].messages)
    assert "x" * 4001 not in sent and "flaky is unavailable" in sent


# -- transform_step_stream ----------------------------------------------------------------


async def test_stream_data_adds_a_validated_links_part() -> None:
    """The data part is stored in the step's message and published with it."""
    ns = run_example("stream_data")
    h = harness(
        [ScriptedStep.reply("See https://example.com/docs or https://example.org.", chunk_size=5)],
        parts=[ns["LinkCards"]()],
        tools=TOOLS,
        ui_data_schemas={"links": ns["Links"]},
    )
    assert (await h.run()).status == "completed"
    message = h.assistant()[0]
    urls = ["https://example.com/docs", "https://example.org"]  # the period is left out
    links = {"type": "data-links", "id": "links", "data": {"urls": urls}}
    assert links in message["parts"]
    assert any(c["type"] == "data-links" for c in h.sink.chunks(message["id"]))


async def test_stream_abort_replaces_a_step_that_prints_key_material() -> None:
    """The marker is caught across deltas; the replacement is committed, the run blocked."""
    ns = run_example("stream_abort")
    leak = "Sure: -----BEGIN PRIVATE KEY-----MIIEvQ..."
    h = harness([ScriptedStep.reply(leak, chunk_size=5)], parts=[ns["KeyGuard"]()], tools=TOOLS)
    assert (await h.run()).status == "blocked"
    assert [text_of(m) for m in h.assistant()] == ["I can't share keys."]
    assert h.row.error == {"reason": "key-material"}

    fine = harness([ScriptedStep.reply("No keys here.")], parts=[ns["KeyGuard"]()], tools=TOOLS)
    assert (await fine.run()).status == "completed"


# -- errors and completion ----------------------------------------------------------------


async def test_errors_report_names_the_part_and_phase_and_clients_see_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = run_example("errors")

    def broken(input: Any) -> None:
        raise KeyError("secret internal state")

    h = harness(
        [ScriptedStep.reply("hi")],
        parts=[{"prepare_model_step": broken, "name": "quota"}],
        tools=TOOLS,
        on_runtime_error=ns["report"],
    )
    with caplog.at_level(logging.ERROR, logger="myapp.agents"):
        assert (await h.run()).status == "failed"
    [record] = [r for r in caplog.records if r.name == "myapp.agents"]
    assert record.getMessage() == f"run {h.run_id} failed in quota in prepare_model_step"
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "secret internal state" not in json.dumps(h.sink.events)


async def test_completion_stop_when_ends_the_loop_and_run_finished_observes_it() -> None:
    ns = run_example("completion")
    metrics = ns["RunMetrics"]()
    h = harness(
        [
            ScriptedStep.call("search", {"query": "a"}),
            ScriptedStep.call("final_answer", {"query": "b"}),
            ScriptedStep.call("search", {"query": "c"}),
        ],
        parts=[metrics],
        tools=TOOLS,
        max_steps=10,
        stop_when=ns["STOP_WHEN"],
    )
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 2
    assert metrics.finished == [(h.run_id, "completed")]

    endless = harness(
        respond=lambda request: ScriptedStep.call("search", {"query": "again"}),
        tools=TOOLS,
        max_steps=10,
        stop_when=ns["STOP_WHEN"],
    )
    assert (await endless.run()).status == "completed"
    assert len(endless.model.requests) == 5


# -- recipes ------------------------------------------------------------------------------


async def test_guardrail_refuses_credentials_without_calling_the_model() -> None:
    ns = run_example("guardrail")
    h = harness(
        [ScriptedStep.reply("never")],
        parts=[ns["CredentialGuardrail"]()],
        tools=TOOLS,
        prompt="What is the admin password?",
    )
    assert (await h.run()).status == "blocked"
    assert h.model.requests == []
    assert text_of(h.assistant()[0]).startswith("I can't help with credentials.")
    assert h.row.error == {"reason": "credentials"}

    fine = harness([ScriptedStep.reply("hi")], parts=[ns["CredentialGuardrail"]()], tools=TOOLS)
    assert (await fine.run()).status == "completed"
    assert text_of(fine.assistant()[0]) == "hi"


async def test_guardrail_checks_the_question_again_when_a_refusal_is_regenerated() -> None:
    """A regenerate appends no message: the guardrail reads the question from the context,
    so regenerating the refused answer does not reach the model."""
    ns = run_example("guardrail")
    h = harness(
        [ScriptedStep.reply("never")],
        parts=[ns["CredentialGuardrail"]()],
        tools=TOOLS,
        prompt="What is the admin password?",
    )
    assert (await h.run()).status == "blocked"
    [refusal] = [m for m in h.store.messages if m.message["role"] == "assistant"]
    refusal.context = False  # what a regenerate does to the answer it replaces
    again = MemoryRun(
        id="run_regenerate",
        thread_id=h.thread_id,
        agent_name="lc",
        scope_key="s",
        identity={},
        client_data={},
        initiator="regenerate",
    )
    h.store.runs[again.id] = again
    h.run_id = again.id
    assert (await h.run()).status == "blocked"
    assert h.model.requests == []


def used(tokens: int) -> dict[str, int]:
    return {"inputTokens": tokens - 10, "outputTokens": 10, "totalTokens": tokens}


async def test_token_quota_refuses_runs_once_the_budget_is_spent() -> None:
    """Each step's tokens are counted; the next run past the budget is refused."""
    ns = run_example("token_quota")
    h = harness(
        [
            ScriptedStep.call("search", {"query": "a"}, usage=used(60)),
            ScriptedStep.reply("done", usage=used(60)),
        ],
        parts=[ns["TokenQuota"](100)],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert h.store.lifecycle.thread_bags("s", h.thread_id).private == {"tokens_used": 120}
    assert await run_again(h, "one more", "u2") == "blocked"
    assert len(h.model.requests) == 2
    assert text_of(h.assistant()[-1]) == "This conversation has used its token budget."


async def test_token_quota_ends_a_run_after_the_step_that_crosses_it() -> None:
    ns = run_example("token_quota")
    h = harness(
        [
            ScriptedStep.call("search", {"query": "a"}, usage=used(60)),
            ScriptedStep.reply("never", usage=used(60)),
        ],
        parts=[ns["TokenQuota"](50)],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 1 and calls == ["search:a"]


async def test_rag_puts_the_passages_right_before_the_question_on_every_step() -> None:
    """Model context only: the passages are not stored in the thread."""
    ns = run_example("rag")
    h = harness(
        [ScriptedStep.call("search", {"query": "refund"}), ScriptedStep.reply("14 days")],
        parts=[ns["Retrieval"]()],
        tools=TOOLS,
        prompt="How do refunds work?",
    )
    assert (await h.run()).status == "completed"
    passage = {
        "role": "system",
        "content": "Relevant passages:\nRefunds are issued within 14 days of purchase.",
    }
    first, second = h.model.requests
    assert first.messages[0] == passage and first.messages[1]["role"] == "user"
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[0] == passage
    assert "Relevant passages" not in json.dumps(h.messages())

    other = harness([ScriptedStep.reply("hi")], parts=[ns["Retrieval"]()], tools=TOOLS)
    assert (await other.run()).status == "completed"
    assert [m["role"] for m in other.model.requests[0].messages] == ["user"]


class Down:
    """A provider that fails before streaming anything (connection refused, HTTP 503)."""

    provider, model_id = "down", "down-1"

    def __init__(self) -> None:
        self.calls = 0
        self.up = False

    async def stream(self, request: ModelRequest, *, signal: Any = None) -> AsyncIterator[Any]:
        self.calls += 1
        if not self.up:
            raise ModelError("503 Service Unavailable")
        part: StepStreamPart = {"type": "finish", "finishReason": "stop", "usage": {}}
        yield part


async def test_model_fallback_sends_the_same_request_to_the_backup() -> None:
    ns = run_example("model_fallback")
    primary = Down()
    backup = ScriptedModel(steps=[ScriptedStep.reply("from the backup")], model_name="backup")
    h = harness(parts=[ns["Fallback"](backup)], model=primary, tools=TOOLS)
    assert (await h.run()).status == "completed"
    assert primary.calls == 1
    assert text_of(h.assistant()[0]) == "from the backup"
    [request] = backup.requests
    assert request.system == "be brief" and request_texts(request) == ["user:hello"]
    assert [t["name"] for t in request.tools] == [t.name for t in TOOLS]


async def test_pii_redaction_covers_the_stream_the_store_and_later_steps() -> None:
    """Addresses split across deltas are caught; the redacted text is what is published,
    stored and sent back to the model."""
    ns = run_example("pii_redaction")
    h = harness(
        [
            ScriptedStep(
                text="Mail bob.smith@example.com",
                tool_calls=ScriptedStep.call("search", {"query": "a"}).tool_calls,
                chunk_size=3,
            ),
            ScriptedStep.reply("Or alice@corp.example.org,\nor me.", chunk_size=3),
        ],
        parts=[ns["RedactEmails"]()],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert [text_of(m) for m in h.assistant()] == ["Mail [email]", "Or [email],\nor me."]
    published = "".join(c.get("delta", "") for c in h.sink.chunks() if c["type"] == "text-delta")
    assert published == "Mail [email]Or [email],\nor me."
    assert "example" not in json.dumps(h.sink.events)
    assert "assistant:Mail [email]" in request_texts(h.model.requests[1])


async def test_pii_redaction_also_covers_hook_authored_responses() -> None:
    ns = run_example("pii_redaction")
    h = harness(
        [],
        parts=[
            {"prepare_run": lambda i: Respond("Write to help@example.com")},
            ns["RedactEmails"](),
        ],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert text_of(h.assistant()[0]) == "Write to [email]"


@pytest.mark.parametrize(
    ("role", "executed"),
    [(None, ["search:q"]), ("viewer", ["search:q"]), ("editor", ["search:q", "delete:/tmp/x"])],
)
async def test_tool_allow_list_follows_the_role(role: str | None, executed: list[str]) -> None:
    ns = run_example("tool_allow_list")
    h = harness(
        [
            both(
                ScriptedStep.call("search", {"query": "q"}),
                ScriptedStep.call("delete", {"path": "/tmp/x"}, id="d"),
            ),
            ScriptedStep.reply("done"),
        ],
        parts=[ns["ToolAllowList"]()],
        tools=TOOLS,
        runtime_context=lambda b: {"role": b.identity.get("role", "viewer")},
    )
    if role is not None:
        h.row.identity = {"role": role}
    assert (await h.run()).status == "completed"
    # The step's two calls run concurrently: which ran matters, not in which order.
    assert sorted(calls) == sorted(executed)
    delete_part = tool_parts(h.assistant()[0])["d"]
    if "delete:/tmp/x" in executed:
        assert delete_part["output"] == "deleted"
    else:
        assert delete_part["errorText"] == "delete is not allowed for the viewer role."


async def test_testing_helper_runs_an_agent_end_to_end() -> None:
    """The page's run_once() drives a real episode of an agent with a ScriptedModel."""
    ns = run_example("testing")
    guardrail = run_example("guardrail")["CredentialGuardrail"]
    agent = define_agent(
        "guarded",
        instructions="Be brief.",
        model=ScriptedModel(steps=[ScriptedStep.reply("hi")]),
        lifecycle=[guardrail()],
    )
    outcome, messages = await ns["run_once"](agent, "my password is 1234")
    assert outcome.status == "blocked" and len(messages) == 2
    outcome, messages = await ns["run_once"](agent, "hello")
    assert outcome.status == "completed" and text_of(messages[-1]) == "hi"

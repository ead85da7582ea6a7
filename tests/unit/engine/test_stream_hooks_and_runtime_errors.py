"""transform_step_stream, ui_data, abort, runtime errors, run_finished, the resolver."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import ScriptedStep
from pai_agents.lifecycle import AgentLifecycle, Continue, RunPatch
from tests.support.engine_harness import harness, request_texts, text_of


def redacting(word: str) -> dict[str, Any]:
    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                if part["type"] == "text-delta":
                    part = {**part, "delta": part["delta"].replace(word, "***")}
                yield part

        return stream()

    return {"transform_step_stream": transform, "name": f"redact-{word}"}


async def test_lc_107_lc_108_lc_109_the_transformed_stream_is_published_stored_and_seen() -> None:
    """LC-107..LC-110: what the transform chain yields is published, stored and what the
    next model step sees; parts chain left to right."""
    h = harness(
        [ScriptedStep.call("lookup", {"q": "x"}, chunk_size=100), ScriptedStep.reply("ok")],
        parts=[redacting("a"), redacting("b")],
        respond=None,
    )
    h.model._queue[0] = ScriptedStep(
        text="abc", chunk_size=100, tool_calls=h.model._queue[0].tool_calls
    )
    await h.run()
    first = h.assistant()[0]
    # "abc" -> "***bc" (redact-a) -> "******c" (redact-b, which sees redact-a's output)
    assert text_of(first) == "******c"
    deltas = "".join(c.get("delta", "") for c in h.sink.chunks(first["id"]))
    assert deltas == "******c"
    assert "assistant:******c" in request_texts(h.model.requests[1])
    assert [c for c in h.trace.calls if c[1] == "transform_step_stream"][:2] == [
        ("redact-a", "transform_step_stream"),
        ("redact-b", "transform_step_stream"),
    ]


class Progress(BaseModel):
    percent: int


async def test_lc_112_lc_115_ui_data_lands_in_the_same_message() -> None:
    """LC-112, LC-113, LC-115: registered data parts are validated, published and stored."""

    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            input.ui_data.write({"type": "data-progress", "id": "p", "data": {"percent": 50}})
            async for part in input.stream:
                yield part

        return stream()

    h = harness(
        [ScriptedStep.reply("done")],
        parts=[{"transform_step_stream": transform}],
        ui_data_schemas={"progress": Progress},
    )
    assert (await h.run()).status == "completed"
    message = h.assistant()[0]
    assert {"type": "data-progress", "id": "p", "data": {"percent": 50}} in message["parts"]
    assert any(c.get("type") == "data-progress" for c in h.sink.chunks(message["id"]))


async def test_lc_112_unregistered_ui_data_fails_the_run() -> None:
    """LC-112, LC-158: writing an unregistered data part is a runtime failure."""

    async def transform(input: Any) -> Any:
        input.ui_data.write({"type": "data-nope", "data": {}})
        return input.stream

    h = harness([ScriptedStep.reply("x")], parts=[{"transform_step_stream": transform}])
    assert (await h.run()).status == "failed"


def aborting(**options: Any) -> dict[str, Any]:
    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                if part["type"] == "text-delta" and "forb" in part["delta"]:
                    await input.abort("leak", **options)
                yield part

        return stream()

    return {"transform_step_stream": transform}


async def test_lc_116_lc_120_abort_drops_the_partial_step_and_ends_blocked() -> None:
    """LC-116, LC-120: no partial message is committed; published chunks stay published."""
    h = harness([ScriptedStep.reply("ok then forbidden", chunk_size=8)], parts=[aborting()])
    outcome = await h.run()
    assert outcome.status == "blocked" and h.row.error == {"reason": "leak"}
    assert h.assistant() == []
    assert "ok then" in "".join(c.get("delta", "") for c in h.sink.chunks())


async def test_lc_117_abort_replacement_is_committed() -> None:
    """LC-117: the replacement response is committed in place of the partial step."""
    h = harness(
        [ScriptedStep.reply("ok then forbidden", chunk_size=8)],
        parts=[aborting(replacement="I can't share that.")],
    )
    assert (await h.run()).status == "blocked"
    assert [text_of(m) for m in h.assistant()] == ["I can't share that."]


async def test_lc_118_abort_failed_ends_the_run_failed() -> None:
    """LC-118: abort(outcome="failed")."""
    h = harness(
        [ScriptedStep.reply("forbidden", chunk_size=100)], parts=[aborting(outcome="failed")]
    )
    assert (await h.run()).status == "failed"
    assert h.row.error == {"reason": "leak"}


async def test_lc_119_lc_158_a_raising_hook_fails_the_run_reported_and_redacted() -> None:
    """LC-119, LC-158, AD-068, TH-044: the run fails; on_runtime_error gets the error with
    the part and phase; clients see only the failed status."""
    reports: list[Any] = []

    async def transform(input: Any) -> Any:
        raise ValueError("secret internal state")

    h = harness(
        [ScriptedStep.reply("x")],
        parts=[{"transform_step_stream": transform, "name": "guard"}],
        on_runtime_error=reports.append,
    )
    assert (await h.run()).status == "failed"
    [report] = reports
    assert isinstance(report.error, ValueError)
    assert (report.part, report.phase) == ("guard", "transform_step_stream")
    assert h.row.error is not None and "secret internal state" in h.row.error["message"]
    assert "secret internal state" not in str(h.sink.events)
    assert [e["status"] for e in h.sink.events if e["type"] == "run.status"] == ["failed"]


@pytest.mark.parametrize(
    "phase",
    ["prepare_run", "prepare_model_step", "before_tool_call", "after_tool_result", "after_step"],
)
async def test_lc_158_every_hook_exception_fails_the_run(phase: str) -> None:
    """LC-158: an exception from any hook fails the run and is reported."""
    reports: list[Any] = []

    def broken(*args: Any) -> Any:
        raise RuntimeError(f"{phase} broke")

    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")],
        parts=[{phase: broken}],
        on_runtime_error=reports.append,
    )
    assert (await h.run()).status == "failed"
    assert reports[0].phase == phase


async def test_th_041_run_finished_observes_after_commit() -> None:
    """TH-041, TH-043: run_finished runs after the final commit with the folded status."""
    seen: list[Any] = []

    class Observer(AgentLifecycle):
        def __init__(self, h: Any = None) -> None:
            self.h = h

        def run_finished(self, input: Any) -> None:
            seen.append((input.status, input.run_status, self.h.row.status, input.message))

    observer = Observer()
    h = harness([ScriptedStep.reply("bye")], parts=[observer])
    observer.h = h
    await h.run()
    status, run_status, stored_status, message = seen[0]
    assert (status, run_status, stored_status) == ("completed", "completed", "completed")
    assert text_of(message) == "bye"

    seen.clear()
    observer = Observer()
    h = harness(
        [ScriptedStep.reply("x")],
        parts=[observer, {"prepare_model_step": lambda i: 1 / 0}],
    )
    observer.h = h
    await h.run()
    assert seen[0][:3] == ("error", "failed", "failed")


async def test_th_041_run_finished_errors_go_to_on_runtime_error_only() -> None:
    """TH-041: an observer failure never changes the committed run."""
    reports: list[Any] = []
    h = harness(
        [ScriptedStep.reply("bye")],
        parts=[{"run_finished": lambda i: 1 / 0}],
        on_runtime_error=reports.append,
    )
    assert (await h.run()).status == "completed"
    assert isinstance(reports[0].error, ZeroDivisionError)
    assert h.row.status == "completed"


async def test_lc_040_lc_043_lc_047_lc_052_resolver_middleware_over_anchored_history() -> None:
    """LC-040..LC-043, LC-047, LC-052: the resolver wraps the default context; a message
    it appends after the anchor is not in this step's base; the overlay comes after."""
    order: list[str] = []

    async def resolve(input: Any, next: Any) -> Any:
        order.append("resolve")
        await input.thread.messages.append(
            role="user", parts=[{"type": "text", "text": "late note"}]
        )
        base = await next()
        again = await next()  # memoized (LC-041)
        assert base == again
        return [{"role": "system", "content": "summary"}, *base]

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[
            {"resolve_model_context": resolve},
            {
                "prepare_run": lambda i: Continue(
                    patch=RunPatch(append_model_messages=[{"role": "user", "content": "overlay"}])
                )
            },
        ],
    )
    await h.run()
    texts = request_texts(h.model.requests[0])
    assert texts == ["system:summary", "user:hello", "user:overlay"]
    assert "late note" in str(h.messages())  # stored, but after this step's anchor


async def test_lc_032_facade_writes_work_during_the_episode_and_fail_after() -> None:
    """LC-032, LC-024, LC-027: facade metadata writes during the run; refused after it."""
    kept: list[Any] = []

    async def prepare(input: Any) -> Any:
        await input.thread.metadata.merge({"topic": "billing"})
        merged = await input.run.metadata.merge({"rating": "good"})
        kept.append((input.thread, merged))
        return None

    h = harness([ScriptedStep.reply("ok")], parts=[{"prepare_run": prepare}])
    await h.run()
    thread, merged = kept[0]
    assert merged == {"rating": "good"}
    assert await thread.metadata.get() == {"topic": "billing"}
    from pai_agents.engine.store import LeaseLost

    with pytest.raises(LeaseLost):
        await thread.metadata.merge({"topic": "late"})
    assert await thread.metadata.get() == {"topic": "billing"}

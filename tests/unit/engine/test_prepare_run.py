"""prepare_run in the engine: continue(patch) / respond / complete / fail (LC-067..LC-076)."""

from __future__ import annotations

from typing import Any

from pai_agents import ScriptedModel, ScriptedStep
from pai_agents.lifecycle import (
    AgentLifecycle,
    Complete,
    Continue,
    Fail,
    Respond,
    RunPatch,
)
from pai_agents.models.base import ModelSelection
from tests.support.engine_harness import harness, request_texts, text_of


class Tracing(AgentLifecycle):
    def __init__(self, log: list[str], result: Any = None) -> None:
        self.log = log
        self.result = result

    def prepare_run(self, input: Any) -> Any:
        self.log.append("prepare_run")
        return self.result

    def prepare_model_step(self, input: Any) -> Any:
        self.log.append(f"prepare_model_step:{input.step.index}")
        return None


async def test_lc_067_prepare_run_once_per_episode_before_the_model_resolver() -> None:
    """LC-067, AD-017: prepare_run runs once, before the resolver and any model step."""
    log: list[str] = []
    model = ScriptedModel(steps=[ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")])

    def resolver(behavior: Any) -> ModelSelection:
        log.append("resolve_model")
        return ModelSelection(model=model)

    h = harness(parts=[Tracing(log)], model=resolver)
    outcome = await h.run()
    assert outcome.status == "completed"
    assert log == ["prepare_run", "resolve_model", "prepare_model_step:0", "prepare_model_step:1"]


async def test_lc_069_latest_user_message_is_the_sent_message() -> None:
    """LC-069: latest_user_message is the message the send appended; input is None here."""
    seen: list[Any] = []
    h = harness(
        [ScriptedStep.reply("hi")],
        parts=[{"prepare_run": lambda i: seen.append(i.latest_user_message)}],
        prompt="what time is it",
    )
    await h.run()
    assert seen[0] is not None and seen[0].role == "user"
    assert seen[0].parts[0]["text"] == "what time is it"


async def test_lc_070_respond_commits_an_assistant_message_without_the_provider() -> None:
    """LC-070: respond commits a transcript-visible assistant message; no provider call."""
    h = harness([], parts=[{"prepare_run": lambda i: Respond("Closed for maintenance.")}])
    outcome = await h.run()
    assert outcome.status == "completed"
    assert h.model.requests == []
    [answer] = h.assistant()
    assert text_of(answer) == "Closed for maintenance."
    assert h.row.status == "completed"


async def test_lc_071_respond_blocked_ends_the_run_blocked_with_reason() -> None:
    """LC-071: respond(outcome="blocked") ends the run blocked with its reason."""
    h = harness(
        [], parts=[{"prepare_run": lambda i: Respond("No.", outcome="blocked", reason="policy")}]
    )
    outcome = await h.run()
    assert outcome.status == "blocked"
    assert h.row.error == {"reason": "policy"}
    assert text_of(h.assistant()[0]) == "No."


async def test_lc_072_complete_ends_completed_without_a_message() -> None:
    """LC-072: complete adds no message."""
    h = harness([], parts=[{"prepare_run": lambda i: Complete()}])
    outcome = await h.run()
    assert outcome.status == "completed"
    assert h.assistant() == [] and h.model.requests == []


async def test_lc_073_fail_ends_failed_with_reason_and_no_message() -> None:
    """LC-073: fail ends the run failed with reason and message, adding no message."""
    h = harness([], parts=[{"prepare_run": lambda i: Fail(reason="quota", message="over")}])
    outcome = await h.run()
    assert outcome.status == "failed"
    assert h.row.error == {"reason": "quota", "message": "over"}
    assert h.assistant() == []
    statuses = [e["status"] for e in h.sink.events if e["type"] == "run.status"]
    assert statuses == ["failed"]


async def test_lc_074_lc_075_run_patch_is_the_episode_default_and_overlay_is_model_only() -> None:
    """LC-074, LC-075, LC-152: patch values apply to every step; appended model messages
    reach every request after the context but are never stored."""
    patch = RunPatch(
        model_settings={"temperature": 0.1},
        append_model_messages=[{"role": "user", "content": "remember: be nice"}],
    )
    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("done")],
        parts=[{"prepare_run": lambda i: Continue(patch=patch)}],
    )
    await h.run()
    assert [r.settings.get("temperature") for r in h.model.requests] == [0.1, 0.1]
    assert request_texts(h.model.requests[0]) == ["user:hello", "user:remember: be nice"]
    assert request_texts(h.model.requests[1])[-1] == "user:remember: be nice"
    stored = [str(p.get("text")) for m in h.messages() for p in m["parts"]]
    assert "remember: be nice" not in stored


async def test_lc_076_max_steps_overrides_the_agent_ceiling_for_the_episode() -> None:
    """LC-076, TH-014: prepare_run max_steps replaces the agent's max_steps."""
    h = harness(
        [ScriptedStep.call("lookup", {"q": str(i)}) for i in range(5)],
        parts=[{"prepare_run": lambda i: Continue(patch=RunPatch(max_steps=2))}],
        max_steps=10,
    )
    outcome = await h.run()
    assert outcome.status == "completed"
    assert len(h.model.requests) == 2


async def test_ad_018_a_run_patch_model_skips_the_root_model_resolver() -> None:
    """AD-018, LC-089, TH-008: prepare_run model replaces the route; resolver never runs."""
    other = ScriptedModel(steps=[ScriptedStep.reply("from other")], model_name="other")
    called: list[str] = []

    def resolver(behavior: Any) -> Any:
        called.append("resolver")
        raise AssertionError("must not be called")

    h = harness(
        parts=[{"prepare_run": lambda i: Continue(patch=RunPatch(model=other))}], model=resolver
    )
    outcome = await h.run()
    assert outcome.status == "completed" and called == []
    assert len(other.requests) == 1
    assert text_of(h.assistant()[0]) == "from other"


async def test_lc_111_prepare_run_response_passes_through_transform_step_stream() -> None:
    """LC-111, AD-020: a respond passes the canonical output policy before commit."""

    async def redact(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                if part["type"] == "text-delta":
                    part = {**part, "delta": part["delta"].replace("secret", "[redacted]")}
                yield part

        return stream()

    h = harness(
        [],
        parts=[
            {"prepare_run": lambda i: Respond("the secret is 42")},
            {"transform_step_stream": redact},
        ],
    )
    await h.run()
    assert text_of(h.assistant()[0]) == "the [redacted] is 42"
    published = "".join(c.get("delta", "") for c in h.sink.chunks())
    assert "secret" not in published
    assert h.model.requests == []


async def test_lc_009_lc_010_one_runtime_context_and_the_run_signal_everywhere() -> None:
    """LC-009, LC-010, AD-014: every hook input and the request carry the same runtime
    context object and the run's abort signal."""
    seen: list[Any] = []
    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[
            {
                "prepare_run": lambda i: seen.append((i.runtime_context, i.signal)),
                "prepare_model_step": lambda i: seen.append(
                    (i.input.runtime_context, i.input.signal)
                ),
                "after_step": lambda i: seen.append((i.runtime_context, i.signal)),
            }
        ],
        runtime_context=lambda b: {"built": object()},
    )
    await h.run()
    contexts = {id(c) for c, _ in seen}
    signals = {id(s) for _, s in seen}
    assert len(seen) == 3 and len(contexts) == 1 and len(signals) == 1

"""Step-stream rules on the engine: canonical deltas (LC-104), what later steps see (LC-109),
model context from stored values (LC-051), provider-executed calls (LC-127) and the open
checkpoint of a step that is not committed (LC-116)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from pai_agents import ScriptedStep, ScriptedToolCall
from pai_agents.engine.step_stream import CanonicalStepTranslator, StepTranslator
from pai_agents.lifecycle import AssistantResponse, Block, Complete, Respond
from pai_agents.messages.chunks import validate_chunk
from pai_agents.messages.reducer import MessageReducer
from tests.support.engine_harness import Harness, executed, harness, request_texts, text_of

SECRET = "s3cret-private-value"


def transforming(edit: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> dict[str, Any]:
    """A transform_step_stream part that maps each canonical part to ``edit(part)``."""

    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                for out in edit(part):
                    yield out

        return stream()

    return {"transform_step_stream": transform}


def recording(seen: list[dict[str, Any]]) -> dict[str, Any]:
    def keep(part: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append(dict(part))
        return [part]

    return transforming(keep)


def tool_parts(message: Any) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p.get("toolCallId")]


# -- LC-104 -----------------------------------------------------------------------------


async def test_lc_104_canonical_reasoning_deltas_carry_text_tool_input_deltas_delta() -> None:
    """LC-104: in the canonical stream transform_step_stream sees, ``reasoning-delta``
    carries its fragment in ``text`` and ``tool-input-delta`` in ``delta``; what a hook puts
    there is what is published (as native UIMessageChunks: ``delta`` / ``inputTextDelta``,
    each valid for the SDK's chunk schema) and stored."""
    seen: list[dict[str, Any]] = []

    def shout(part: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append(dict(part))
        if part["type"] == "reasoning-delta":
            return [{**part, "text": part["text"].upper()}]
        return [part]

    call = ScriptedToolCall(name="lookup", input={"q": "x"})
    h = harness(
        [
            ScriptedStep(reasoning="think it over", text="ok", tool_calls=[call]),
            ScriptedStep.reply("done"),
        ],
        parts=[transforming(shout)],
    )
    assert (await h.run()).status == "completed"

    reasoning = [p for p in seen if p["type"] == "reasoning-delta"]
    assert reasoning and all("text" in p and "delta" not in p for p in reasoning)
    assert "".join(p["text"] for p in reasoning) == "think it over"
    tool_input = [p for p in seen if p["type"] == "tool-input-delta"]
    assert tool_input and all("delta" in p and "text" not in p for p in tool_input)
    assert json.loads("".join(p["delta"] for p in tool_input)) == {"q": "x"}

    first = h.assistant()[0]
    chunks = h.sink.chunks(first["id"])
    for chunk in chunks:
        validate_chunk(chunk)
    published = [c for c in chunks if c["type"] == "reasoning-delta"]
    assert all(set(c) == {"type", "id", "delta"} for c in published)
    assert "".join(c["delta"] for c in published) == "THINK IT OVER"
    typed = "".join(c["inputTextDelta"] for c in chunks if c["type"] == "tool-input-delta")
    assert json.loads(typed) == {"q": "x"}
    assert [p["text"] for p in first["parts"] if p["type"] == "reasoning"] == ["THINK IT OVER"]


async def test_lc_104_the_hook_free_loop_publishes_the_same_native_chunks() -> None:
    """LC-104, LC-106: without hooks the provider's parts are published as the same native
    chunks (the canonical names exist only where hooks can see them)."""
    h = harness([ScriptedStep(reasoning="hmm", text="ok")])
    assert (await h.run()).status == "completed"
    chunks = h.sink.chunks()
    for chunk in chunks:
        validate_chunk(chunk)
    assert "".join(c["delta"] for c in chunks if c["type"] == "reasoning-delta") == "hmm"


# -- LC-109 -----------------------------------------------------------------------------


def sanitizing(part: dict[str, Any]) -> list[dict[str, Any]]:
    """Redact text and reasoning, replace the call's input (its deltas are dropped)."""
    if part["type"] == "text-delta":
        return [{**part, "delta": part["delta"].replace("secret", "[redacted]")}]
    if part["type"] == "reasoning-delta":
        return [{**part, "text": part["text"].replace("secret", "[redacted]")}]
    if part["type"] == "tool-input-delta":
        return []
    if part["type"] == "tool-call":
        return [{**part, "input": {"q": "safe"}}]
    return [part]


async def test_lc_109_later_model_steps_see_the_transformed_message() -> None:
    """LC-109: the next model step's request holds the message as transform_step_stream
    made it (reasoning, text and tool call input), with the result of the call as executed
    with the transformed input; nothing of the original output reaches it."""
    h = harness(
        [
            ScriptedStep(
                reasoning="the secret plan",
                text="my secret",
                chunk_size=100,
                tool_calls=[ScriptedToolCall(name="lookup", input={"q": "secret"})],
            ),
            ScriptedStep.reply("done"),
        ],
        parts=[transforming(sanitizing)],
    )
    assert (await h.run()).status == "completed"
    assert executed == [("lookup", "safe")]
    second = h.model.requests[1]
    assert "secret" not in json.dumps(second.messages)
    [assistant] = [m for m in second.messages if m["role"] == "assistant"]
    content = assistant["content"]
    assert {"type": "reasoning", "text": "the [redacted] plan"} in content  # same turn: kept
    assert {"type": "text", "text": "my [redacted]"} in content
    [call] = [c for c in content if c["type"] == "tool-call"]
    assert call["input"] == {"q": "safe"}
    [tool] = [m for m in second.messages if m["role"] == "tool"]
    assert tool["content"][0]["output"] == {"type": "text", "value": "found safe"}


# -- LC-051 -----------------------------------------------------------------------------

STORED_USER: dict[str, Any] = {
    "id": "h1",
    "role": "user",
    "parts": [
        {"type": "text", "text": "original words"},
        {
            "type": "file",
            "mediaType": "application/pdf",
            "url": "https://files.example/report.pdf",
            "filename": "report.pdf",
            "providerReference": {"openai": "file-123"},
        },
    ],
}


def tamper(message: Any) -> None:
    for part in message.parts:
        if part.get("type") == "text":
            part["text"] = "tampered"
    if isinstance(message.private_metadata, dict):
        message.private_metadata["leak"] = SECRET


async def test_lc_051_model_context_is_converted_from_stored_values() -> None:
    """LC-051: the model request is converted from the stored native messages: hooks that
    mutate the LifecycleMessage projections they get (prepare_run, resolve_model_context)
    change nothing the model sees; private metadata never reaches it; a stored file part's
    provider reference becomes the model's file reference."""

    async def prepare_run(input: Any) -> None:
        await input.thread.messages.append(
            role="user",
            parts=[{"type": "text", "text": "context note"}],
            metadata={"kind": "note"},
            private_metadata={"audit": SECRET},
        )
        tamper(input.latest_user_message)
        for message in (await input.thread.messages.list(view="all")).items:
            tamper(message)

    async def resolve(input: Any, next: Any) -> Any:
        for message in await input.history.collect():
            tamper(message)
        return await next()

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[{"prepare_run": prepare_run}, {"resolve_model_context": resolve}],
        history=[
            STORED_USER,
            {"id": "h2", "role": "assistant", "parts": [{"type": "text", "text": "noted"}]},
        ],
    )
    assert (await h.run()).status == "completed"
    [request] = h.model.requests
    sent = json.dumps(request.messages)
    assert "tampered" not in sent and SECRET not in sent
    assert request_texts(request) == [
        "user:original words",
        "assistant:noted",
        "user:hello",
        "user:context note",
    ]
    assert request.messages[0]["content"][1] == {
        "type": "file",
        "mediaType": "application/pdf",
        "filename": "report.pdf",
        "data": {"type": "reference", "reference": {"openai": "file-123"}},
    }
    assert h.messages()[0] == STORED_USER  # the stored value is untouched too


# -- LC-127 -----------------------------------------------------------------------------


def provider_call(name: str, input: Any, **options: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, input=input, provider_executed=True, **options)


async def test_lc_127_a_valid_provider_executed_call_is_recorded_never_run() -> None:
    """LC-127: a provider-executed call reaches transform_step_stream marked
    ``providerExecuted`` with its result (canonical ``output``); it is validated and stored
    with its result, and the runtime neither runs it, calls the tool hooks for it, nor waits
    for it: a step with only provider-executed calls ends the run."""
    seen: list[dict[str, Any]] = []
    hooked: list[str] = []
    search = provider_call("web_search", {"q": "pai"}, dynamic=True, result={"hits": 2})
    h = harness(
        [ScriptedStep(text="Searching.", tool_calls=[search])],
        parts=[recording(seen), {"before_tool_call": lambda i: hooked.append(i.tool.name)}],
    )
    assert (await h.run()).status == "completed"
    [call] = [p for p in seen if p["type"] == "tool-call"]
    assert call["providerExecuted"] is True
    [result] = [p for p in seen if p["type"] == "tool-result"]
    assert result["output"] == {"hits": 2} and "result" not in result
    [part] = tool_parts(h.assistant()[0])
    assert part == {
        "type": "dynamic-tool",
        "toolName": "web_search",
        "toolCallId": part["toolCallId"],
        "state": "output-available",
        "input": {"q": "pai"},
        "output": {"hits": 2},
        "providerExecuted": True,
    }
    assert (executed, hooked, h.store.actions) == ([], [], {})
    assert len(h.model.requests) == 1
    for chunk in h.sink.chunks():
        validate_chunk(chunk)


async def test_lc_127_an_invalid_provider_executed_call_is_an_error_never_run() -> None:
    """LC-127: invalid provider-executed calls (a name the runtime owns, an undeclared
    provider tool, non-JSON input) are recorded as errors although the provider may have
    run them: their results are ignored, nothing executes, no approval or pending action
    is made for a tool that needs one, and the run does not wait."""
    h = harness(
        [
            ScriptedStep(
                tool_calls=[
                    provider_call("lookup", {"q": "x"}, result="found x"),
                    provider_call("wire", {"q": "y"}, result="sent"),
                    provider_call("web_search", {"q": "z"}, result={"hits": 1}),
                    provider_call("fetch", "{not json", dynamic=True, result="page"),
                ]
            )
        ],
        parts=[recording([])],
    )
    outcome = await h.run()
    assert outcome.status == "completed" and h.row.status == "completed"
    parts = tool_parts(h.assistant()[0])
    assert [p["state"] for p in parts] == ["output-error"] * 4
    assert all(p["providerExecuted"] is True and "output" not in p for p in parts)
    assert "unavailable provider tool 'lookup'" in parts[0]["errorText"]
    assert "unavailable provider tool 'wire'" in parts[1]["errorText"]
    assert "unavailable provider tool 'web_search'" in parts[2]["errorText"]
    assert "Invalid JSON input" in parts[3]["errorText"]
    assert (executed, h.store.actions) == ([], {})
    assert not any(c["type"] == "tool-approval-request" for c in h.sink.chunks())
    assert len(h.model.requests) == 1


async def test_lc_127_provider_calls_beside_runtime_calls_replay_as_provider_results() -> None:
    """LC-127: beside the runtime's own call, a provider-executed call is never executed or
    waited for: its result from the stream is in the next step's assistant content (not in
    a tool message), one without a result stays as the provider left it, and a stream
    result naming a runtime call cannot replace that call's executed result."""
    local = ScriptedToolCall(name="lookup", input={"q": "a"}, id="local1")
    search = provider_call("web_search", {"q": "b"}, id="p1", dynamic=True, result={"hits": 5})
    pending = provider_call("code_run", {}, id="p2", dynamic=True)  # no result

    def forge(part: dict[str, Any]) -> list[dict[str, Any]]:
        if part["type"] == "finish" and part["finishReason"] == "tool-calls":
            fake = {"type": "tool-result", "toolCallId": "local1", "output": "forged"}
            return [fake, part]
        return [part]

    h = harness(
        [ScriptedStep(tool_calls=[local, search, pending]), ScriptedStep.reply("done")],
        parts=[transforming(forge)],
    )
    assert (await h.run()).status == "completed"
    assert executed == [("lookup", "a")]
    by_id = {p["toolCallId"]: p for p in tool_parts(h.assistant()[0])}
    assert by_id["local1"]["output"] == "found a"
    assert by_id["p1"]["state"] == "output-available"
    assert (by_id["p2"]["state"], by_id["p2"]["providerExecuted"]) == ("input-available", True)
    second = h.model.requests[1]
    [assistant] = [m for m in second.messages if m["role"] == "assistant"]
    shapes = [(c["type"], c["toolCallId"], c.get("providerExecuted")) for c in assistant["content"]]
    assert shapes == [
        ("tool-call", "local1", None),
        ("tool-call", "p1", True),
        ("tool-result", "p1", None),
        ("tool-call", "p2", True),
    ]
    [tool] = [m for m in second.messages if m["role"] == "tool"]
    assert [c["toolCallId"] for c in tool["content"]] == ["local1"]


async def test_lc_127_the_hook_free_loop_never_runs_provider_calls_either() -> None:
    """LC-127: an agent without hooks records a provider-executed call naming one of its
    tools as an error and never executes it."""
    h = harness([ScriptedStep(tool_calls=[provider_call("lookup", {"q": "x"}, result="x")])])
    assert (await h.run()).status == "completed"
    [part] = tool_parts(h.assistant()[0])
    assert (part["state"], part["providerExecuted"]) == ("output-error", True)
    assert executed == []


class SearchArgs(BaseModel):
    query: str


def fold(translator: StepTranslator, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reducer = MessageReducer({"id": "m", "role": "assistant", "parts": []})
    for part in parts:
        for chunk in translator.translate(part):
            validate_chunk(chunk)
            reducer.apply(chunk)
    return tool_parts(reducer.message)


def test_lc_127_declared_provider_tools_are_validated_against_their_input_model() -> None:
    """LC-127: with the attempt's provider tools declared, a call is validated against the
    definition's input model: a valid one is a static part with its result, an invalid one
    an error whose result is ignored; a provider's own ``tool-result`` shape (``result``,
    ``isError``) is read too."""
    tools = {"web_search": {"type": "provider", "id": "x.search", "inputSchema": SearchArgs}}
    translator = CanonicalStepTranslator({}, provider_tools=tools)
    call = {"type": "tool-call", "toolName": "web_search", "providerExecuted": True}
    parts = fold(
        translator,
        [
            {**call, "toolCallId": "ok", "input": '{"query": "pai"}'},
            {"type": "tool-result", "toolCallId": "ok", "toolName": "web_search", "result": [1]},
            {**call, "toolCallId": "bad", "input": {"q": 1}},
            {"type": "tool-result", "toolCallId": "bad", "output": "ran anyway"},
            {**call, "toolCallId": "err", "input": {"query": "x"}},
            {"type": "tool-result", "toolCallId": "err", "result": "quota", "isError": True},
        ],
    )
    ok, bad, err = parts
    assert (ok["type"], ok["state"], ok["output"]) == ("tool-web_search", "output-available", [1])
    assert (bad["state"], "output" in bad) == ("output-error", False)
    assert bad["errorText"].startswith("Invalid input for provider tool 'web_search'")
    assert (err["state"], err["errorText"]) == ("output-error", "quota")
    assert translator.calls == [] and translator.tool_call_count == 0
    assert translator.provider_call_count == 3


# -- LC-116: an uncommitted step leaves no open row -----------------------------------


def aborting(**options: Any) -> dict[str, Any]:
    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                if part["type"] == "text-delta" and "forb" in part["delta"]:
                    await input.abort("leak", **options)
                yield part

        return stream()

    return {"transform_step_stream": transform}


def counting_checkpoints(h: Harness) -> list[str]:
    calls: list[str] = []
    original = h.store.checkpoint_message

    async def checkpoint(lease: Any, *, message: Any, step_index: int) -> None:
        calls.append(message["id"])
        await original(lease, message=message, step_index=step_index)

    h.store.checkpoint_message = checkpoint
    return calls


def stored_rows(h: Harness) -> list[tuple[str, str]]:
    return [(m.message["id"], m.status) for m in h.store.messages if m.run_id == h.run_id]


async def test_lc_116_an_abort_after_a_checkpoint_leaves_no_open_message() -> None:
    """LC-116: a policy abort without replacement after the engine checkpointed the partial
    step deletes that open row as the run ends blocked: nothing of the step is stored."""
    h = harness([ScriptedStep.reply("ok then forbidden", chunk_size=4)], parts=[aborting()])
    checkpoints = counting_checkpoints(h)
    assert (await h.run(checkpoint_seconds=0)).status == "blocked"
    assert checkpoints  # the partial step had been checkpointed
    assert h.assistant() == []
    assert stored_rows(h) == [(h.messages()[0]["id"], "committed")]  # the user message only


async def test_lc_117_a_replacement_after_a_checkpoint_replaces_the_open_row() -> None:
    """LC-117: the replacement is committed in place of the checkpointed partial step."""
    h = harness(
        [ScriptedStep.reply("ok then forbidden", chunk_size=4)],
        parts=[aborting(replacement="I can't share that.")],
    )
    checkpoints = counting_checkpoints(h)
    assert (await h.run(checkpoint_seconds=0)).status == "blocked"
    [message] = h.assistant()
    assert text_of(message) == "I can't share that." and message["id"] == checkpoints[0]
    assert ("open" not in {status for _, status in stored_rows(h)}) is True


async def crashed_attempt(h: Harness) -> str:
    """A dead worker's open checkpoint of step 0 (claimed, checkpointed, lease expired)."""
    claim = await h.store.claim_run(h.run_id, owner="dead", lease_seconds=30)
    partial = {"id": "msg_dead", "role": "assistant", "parts": [{"type": "text", "text": "ha"}]}
    await h.store.checkpoint_message(claim.lease, message=partial, step_index=0)
    h.row.lease_expires_at = datetime.now(UTC) - timedelta(seconds=1)
    return "msg_dead"


async def test_lc_116_ending_before_the_model_drops_a_dead_attempts_open_row() -> None:
    """LC-116, LC-072, LC-081: when the repeated step is not run (prepare_run complete,
    prepare_model_step block) the dead attempt's open row goes with the run's end."""
    for part in (
        {"prepare_run": lambda i: Complete()},
        {"prepare_model_step": lambda i: Block(reason="no")},
    ):
        h = harness([], parts=[part])
        await crashed_attempt(h)
        assert (await h.run()).status in ("completed", "blocked")
        assert h.assistant() == [] and "open" not in {s for _, s in stored_rows(h)}


async def test_lc_080_a_response_replaces_a_dead_attempts_open_row() -> None:
    """LC-080, LC-070: a hook response for the repeated step is committed under the open
    message's id, replacing it."""
    response = Respond(response=AssistantResponse(text="safe answer"))
    for part in ({"prepare_run": lambda i: response}, {"prepare_model_step": lambda i: response}):
        h = harness([], parts=[part])
        dead = await crashed_attempt(h)
        assert (await h.run()).status == "completed"
        [message] = h.assistant()
        assert (message["id"], text_of(message)) == (dead, "safe answer")
        assert "open" not in {s for _, s in stored_rows(h)}

"""OpenAIChatModel against a real local HTTP server through the real openai SDK."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pai_agents.abort import Aborted, AbortSignal
from pai_agents.models.base import LanguageModel, ModelError, ModelRequest, StepStreamPart
from pai_agents.models.openai_chat import OpenAIChatModel
from tests.support.fake_openai import (
    ErrorResponse,
    FakeOpenAIServer,
    Pause,
    SSEResponse,
    chunk,
    finish_chunk,
    reasoning_chunks,
    text_chunks,
    text_response,
    tool_call_chunks,
    usage_chunk,
)

API_KEY = "sk-test-secret-0123456789abcdef"
HELLO = ModelRequest(messages=[{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])


@pytest.fixture
def server() -> Any:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
async def model(server: FakeOpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel(
        model="fake-model", api_key=API_KEY, base_url=server.base_url, max_retries=0, timeout=10
    ) as chat_model:
        yield chat_model


async def collect(
    model: OpenAIChatModel, request: ModelRequest = HELLO, *, signal: AbortSignal | None = None
) -> list[StepStreamPart]:
    return [part async for part in model.stream(request, signal=signal)]


def of_type(parts: list[StepStreamPart], *types: str) -> list[StepStreamPart]:
    return [part for part in parts if part["type"] in types]


# -- output stream --------------------------------------------------------------------------------


async def test_text_deltas_arrive_in_order_inside_one_text_block(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(text_response("The quick brown fox jumps"))

    parts = await collect(model)

    assert parts[0] == {"type": "response-metadata", "id": "chatcmpl-fake", "modelId": "fake-model"}
    assert len(of_type(parts, "response-metadata")) == 1
    text_parts = of_type(parts, "text-start", "text-delta", "text-end")
    assert [p["type"] for p in text_parts] == ["text-start"] + ["text-delta"] * 5 + ["text-end"]
    assert len({p["id"] for p in text_parts}) == 1
    assert "".join(p["delta"] for p in of_type(parts, "text-delta")) == "The quick brown fox jumps"
    assert parts[-1]["type"] == "finish"
    assert parts[-1]["finishReason"] == "stop"


async def test_tool_call_arguments_split_across_chunks_form_the_tool_call_input(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    arguments = '{"city": "Paris", "unit": "celsius"}'
    server.add(
        [
            *tool_call_chunks("call_1", "get_weather", arguments, split_into=4),
            finish_chunk("tool_calls"),
            usage_chunk(20, 9),
        ]
    )

    parts = await collect(model)

    tool_parts = of_type(
        parts, "tool-input-start", "tool-input-delta", "tool-input-end", "tool-call"
    )
    assert tool_parts[0] == {"type": "tool-input-start", "id": "call_1", "toolName": "get_weather"}
    deltas = tool_parts[1:-2]
    assert [p["type"] for p in deltas] == ["tool-input-delta"] * 4
    assert all(p["id"] == "call_1" for p in deltas)
    assert "".join(p["delta"] for p in deltas) == arguments
    assert tool_parts[-2:] == [
        {"type": "tool-input-end", "id": "call_1"},
        {
            "type": "tool-call",
            "toolCallId": "call_1",
            "toolName": "get_weather",
            "input": arguments,
        },
    ]
    assert parts[-1]["finishReason"] == "tool-calls"
    assert parts[-1]["rawFinishReason"] == "tool_calls"


async def test_parallel_tool_calls_are_tracked_by_index(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    first = tool_call_chunks("call_a", "lookup", '{"q": "alpha"}', split_into=2, index=0)
    second = tool_call_chunks("call_b", "search", '{"q": "beta"}', split_into=2, index=1)
    interleaved = [first[0], second[0], first[1], second[1], first[2], second[2]]
    server.add([*interleaved, finish_chunk("tool_calls")])

    parts = await collect(model)

    calls = of_type(parts, "tool-call")
    assert calls == [
        {
            "type": "tool-call",
            "toolCallId": "call_a",
            "toolName": "lookup",
            "input": '{"q": "alpha"}',
        },
        {
            "type": "tool-call",
            "toolCallId": "call_b",
            "toolName": "search",
            "input": '{"q": "beta"}',
        },
    ]
    starts = of_type(parts, "tool-input-start")
    assert [(p["id"], p["toolName"]) for p in starts] == [
        ("call_a", "lookup"),
        ("call_b", "search"),
    ]
    for call_id, arguments in (("call_a", '{"q": "alpha"}'), ("call_b", '{"q": "beta"}')):
        pieces = [p["delta"] for p in of_type(parts, "tool-input-delta") if p["id"] == call_id]
        assert "".join(pieces) == arguments


async def test_tool_call_without_arguments_gets_an_empty_object_input(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add([*tool_call_chunks("call_1", "now", "", split_into=1), finish_chunk("tool_calls")])

    parts = await collect(model)

    assert of_type(parts, "tool-call")[0]["input"] == "{}"


async def test_text_before_a_tool_call_is_closed_before_the_call_finishes(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(
        [
            *text_chunks("Let me check."),
            *tool_call_chunks("call_1", "lookup", "{}", split_into=1),
            finish_chunk("tool_calls"),
        ]
    )

    parts = await collect(model)

    types = [p["type"] for p in parts]
    assert types.index("text-end") < types.index("tool-input-start")
    assert types[-3:] == ["tool-input-end", "tool-call", "finish"]


async def test_usage_comes_from_the_final_usage_chunk(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(
        [*text_chunks("ok"), finish_chunk("stop"), usage_chunk(12, 30, reasoning=20, cached=8)]
    )

    parts = await collect(model)

    assert parts[-1]["usage"] == {
        "inputTokens": 12,
        "outputTokens": 30,
        "totalTokens": 42,
        "reasoningTokens": 20,
        "cachedInputTokens": 8,
    }


async def test_absent_usage_values_are_omitted_not_none(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add([*text_chunks("ok"), finish_chunk("stop")])
    server.add([*text_chunks("ok"), finish_chunk("stop"), usage_chunk(3, 1)])

    without_usage = await collect(model)
    plain_usage = await collect(model)

    assert without_usage[-1]["usage"] == {}
    assert plain_usage[-1]["usage"] == {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_become_a_reasoning_block_closed_before_text(
    server: FakeOpenAIServer, model: OpenAIChatModel, field: str
) -> None:
    server.add(
        [
            *reasoning_chunks("First, think hard.", field=field),
            *text_chunks("Answer."),
            finish_chunk("stop"),
        ]
    )

    parts = await collect(model)

    types = [p["type"] for p in parts if p["type"] != "response-metadata"]
    assert types == [
        "reasoning-start",
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
        "finish",
    ]
    reasoning = of_type(parts, "reasoning-delta")
    assert "".join(p["delta"] for p in reasoning) == "First, think hard."
    assert len({p["id"] for p in of_type(parts, "reasoning-start", "reasoning-delta")}) == 1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("content_filter", "content-filter"),
        ("tool_calls", "tool-calls"),
        ("function_call", "tool-calls"),
        ("something_new", "other"),
        (None, "other"),
    ],
)
async def test_finish_reasons_map_to_ai_sdk_names(
    server: FakeOpenAIServer, model: OpenAIChatModel, raw: str | None, expected: str
) -> None:
    server.add([*text_chunks("x"), finish_chunk(raw)])

    finish = (await collect(model))[-1]

    assert finish["finishReason"] == expected
    if raw is None:
        assert "rawFinishReason" not in finish
    else:
        assert finish["rawFinishReason"] == raw


async def test_tool_calls_finish_as_tool_calls_even_when_the_server_says_stop(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add([*tool_call_chunks("call_1", "lookup", "{}"), finish_chunk("stop")])

    finish = (await collect(model))[-1]

    assert finish["finishReason"] == "tool-calls"
    assert finish["rawFinishReason"] == "stop"


# -- request body -------------------------------------------------------------------------------


async def test_request_body_converts_messages_tools_and_settings(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(text_response("done"))
    request = ModelRequest(
        system="You are terse.",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "file", "mediaType": "image/png", "data": "iVBORw0KGgo="},
                    {"type": "file", "mediaType": "image/jpeg", "data": "https://x.test/a.jpg"},
                    {
                        "type": "file",
                        "mediaType": "application/pdf",
                        "data": "JVBE",
                        "filename": "r.pdf",
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "hidden thoughts"},
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool-call",
                        "toolCallId": "call_1",
                        "toolName": "lookup",
                        "input": {"q": "cat"},
                    },
                    {"type": "tool-call", "toolCallId": "call_2", "toolName": "fail", "input": {}},
                ],
            },
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "call_1",
                        "toolName": "lookup",
                        "output": {"type": "json", "value": {"animal": "cat", "n": 1}},
                    },
                    {
                        "type": "tool-result",
                        "toolCallId": "call_2",
                        "toolName": "fail",
                        "output": {"type": "error-text", "value": "boom"},
                    },
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
        ],
        tools=[
            {
                "name": "lookup",
                "description": "Look things up.",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
        ],
        tool_choice={"type": "tool", "toolName": "lookup"},
        settings={
            "maxOutputTokens": 256,
            "temperature": 0.2,
            "topP": 0.9,
            "topK": 40,
            "presencePenalty": 0.1,
            "frequencyPenalty": 0.3,
            "stopSequences": ["END"],
            "seed": 7,
            "reasoning": {"effort": "low"},
        },
    )

    await collect(model, request)

    body = server.requests[0]
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg"}},
                {
                    "type": "text",
                    "text": "[Attachment 'r.pdf' (application/pdf) omitted: "
                    "this model accepts only image attachments.]",
                },
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "cat"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "fail", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"animal": "cat", "n": 1}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "boom"},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "Thanks"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look things up.",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert body["max_completion_tokens"] == 256
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["presence_penalty"] == 0.1
    assert body["frequency_penalty"] == 0.3
    assert body["stop"] == ["END"]
    assert body["seed"] == 7
    assert body["reasoning_effort"] == "low"
    assert "top_k" not in body
    assert "reasoning" not in json.dumps(body["messages"])  # reasoning parts are not sent back


async def test_assistant_message_with_only_tool_calls_has_null_content(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(text_response("ok"))
    request = ModelRequest(
        messages=[
            {
                "role": "assistant",
                "content": [
                    {"type": "tool-call", "toolCallId": "c", "toolName": "t", "input": {"a": 1}}
                ],
            },
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "c",
                        "toolName": "t",
                        "output": {"type": "text", "value": "plain"},
                    }
                ],
            },
        ]
    )

    await collect(model, request)

    assistant, tool = server.requests[0]["messages"]
    assert assistant["content"] is None
    assert tool == {"role": "tool", "tool_call_id": "c", "content": "plain"}


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
async def test_string_tool_choices_pass_through(
    server: FakeOpenAIServer, model: OpenAIChatModel, choice: str
) -> None:
    server.add(text_response("ok"))
    request = ModelRequest(
        messages=HELLO.messages,
        tools=[{"name": "t", "inputSchema": {"type": "object"}}],
        tool_choice=choice,  # type: ignore[arg-type]
    )

    await collect(model, request)

    body = server.requests[0]
    assert body["tool_choice"] == choice
    assert body["tools"] == [
        {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}
    ]


async def test_no_tools_means_no_tools_or_tool_choice_in_the_body(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(text_response("ok"))

    await collect(model, ModelRequest(messages=HELLO.messages, tool_choice="auto"))

    assert "tools" not in server.requests[0]
    assert "tool_choice" not in server.requests[0]


async def test_provider_options_for_this_provider_are_merged_into_the_body(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(text_response("ok"))
    request = ModelRequest(
        messages=HELLO.messages,
        settings={"temperature": 0.5},
        provider_options={
            "openai": {
                "parallelToolCalls": False,
                "temperature": 0.9,
                "top_k": 20,
                "chat_template_kwargs": {"enable_thinking": False},
                "stream": False,
            },
            "anthropic": {"ignored": True},
        },
    )

    await collect(model, request)

    body = server.requests[0]
    assert body["parallel_tool_calls"] is False
    assert body["temperature"] == 0.9  # provider options win over portable settings
    assert body["top_k"] == 20
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["stream"] is True
    assert "ignored" not in body


async def test_requests_carry_the_api_key_as_a_bearer_token(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(text_response("ok"))

    await collect(model)

    assert server.exchanges[0].headers["authorization"] == f"Bearer {API_KEY}"


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retryable"), [(500, True), (503, True), (429, True), (400, False), (401, False)]
)
async def test_http_errors_become_model_errors_with_a_retry_hint(
    server: FakeOpenAIServer, model: OpenAIChatModel, status: int, retryable: bool
) -> None:
    server.add(ErrorResponse(status, f"Incorrect API key provided: {API_KEY}"))

    with pytest.raises(ModelError) as caught:
        await collect(model)

    assert caught.value.retryable is retryable
    assert f"HTTP {status}" in str(caught.value)
    assert API_KEY not in str(caught.value)
    assert "sk-test" not in str(caught.value)


async def test_unreachable_server_is_a_retryable_model_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with OpenAIChatModel(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=5
    ) as unreachable:
        with pytest.raises(ModelError) as caught:
            await collect(unreachable)

    assert caught.value.retryable is True


async def test_error_event_inside_the_stream_is_a_model_error(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(
        [*text_chunks("partial"), {"error": {"message": "engine died", "type": "server_error"}}]
    )

    parts: list[StepStreamPart] = []
    with pytest.raises(ModelError, match="engine died") as caught:
        async for part in model.stream(HELLO):
            parts.append(part)

    assert caught.value.retryable is True
    assert of_type(parts, "text-delta")[0]["delta"] == "partial"


# -- abort --------------------------------------------------------------------------------------


async def test_abort_mid_stream_raises_aborted_and_hangs_up(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(SSEResponse(chunks=text_chunks(" word" * 200), delay=0.02))
    signal = AbortSignal()

    received: list[StepStreamPart] = []
    with pytest.raises(Aborted, match="user stopped"):
        async for part in model.stream(HELLO, signal=signal):
            received.append(part)
            if part["type"] == "text-delta":
                signal.abort("user stopped")

    assert len(of_type(received, "text-delta")) == 1
    exchange = server.exchanges[0]
    assert await asyncio.to_thread(exchange.client_disconnected.wait, 5)
    assert exchange.chunks_sent < 200
    assert not exchange.completed


async def test_abort_from_another_thread_interrupts_a_stalled_read(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(SSEResponse(chunks=text_chunks("waiting forever"), done=False, hang=True))
    signal = AbortSignal()
    received: list[StepStreamPart] = []

    async def consume() -> None:
        async for part in model.stream(HELLO, signal=signal):
            received.append(part)
            if part["type"] == "text-delta" and part["delta"] == " forever":
                threading.Timer(0.05, signal.abort, args=("timeout",)).start()

    with pytest.raises(Aborted, match="timeout"):
        await asyncio.wait_for(consume(), timeout=5)

    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # our own cancel was undone
    assert await asyncio.to_thread(server.exchanges[0].client_disconnected.wait, 5)


async def test_abort_while_waiting_for_response_headers(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    # The server holds its headers back until the test has seen the abort: the abort cannot
    # pass for a finished response, however slow the machine (a 0.3 s sleep against a
    # 0.25 s wait raced a loaded CI machine and lost).
    aborted = threading.Event()

    def slow_to_answer(body: dict[str, Any]) -> list[dict[str, Any] | Pause]:
        aborted.wait(10)  # runs in the server thread before any header is sent
        return text_response("late")

    server.add(slow_to_answer)
    signal = AbortSignal()
    asyncio.get_running_loop().call_later(0.05, signal.abort)

    try:
        with pytest.raises(Aborted):
            await asyncio.wait_for(collect(model, signal=signal), timeout=5)
    finally:
        aborted.set()


async def test_an_already_aborted_signal_sends_no_request(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    signal = AbortSignal()
    signal.abort()

    with pytest.raises(Aborted):
        await collect(model, signal=signal)

    assert server.requests == []


async def test_stopping_iteration_early_closes_the_connection(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(SSEResponse(chunks=text_chunks(" word" * 200), delay=0.02))

    stream = model.stream(HELLO)
    async for part in stream:
        if part["type"] == "text-delta":
            break
    await stream.aclose()  # type: ignore[attr-defined]

    assert await asyncio.to_thread(server.exchanges[0].client_disconnected.wait, 5)


# -- construction -------------------------------------------------------------------------------


def test_construction_without_any_key_or_base_url_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIChatModel(model="gpt-4o-mini")


async def test_a_local_base_url_needs_no_key(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.add(text_response("local"))

    async with OpenAIChatModel(model="llama", base_url=server.base_url) as local:
        parts = await collect(local)

    assert "".join(p["delta"] for p in of_type(parts, "text-delta")) == "local"


async def test_from_env_reads_key_base_url_and_model(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123456789")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("PAI_MODEL", "env-model")
    server.add(text_response("hi"))

    async with OpenAIChatModel.from_env() as from_env:
        assert from_env.model_id == "env-model"
        assert from_env.provider == "openai"
        assert isinstance(from_env, LanguageModel)
        await collect(from_env)

    assert server.requests[0]["model"] == "env-model"
    assert server.exchanges[0].headers["authorization"] == "Bearer sk-from-env-123456789"


def test_from_env_defaults_to_gpt_4o_mini(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-whatever-123456789")
    monkeypatch.delenv("PAI_MODEL", raising=False)

    assert OpenAIChatModel.from_env().model_id == "gpt-4o-mini"
    assert OpenAIChatModel.from_env("gpt-4.1").model_id == "gpt-4.1"


async def test_chunk_helper_builds_valid_raw_chunks() -> None:
    raw = chunk({"content": "x"}, finish_reason="stop")
    assert raw["object"] == "chat.completion.chunk"
    assert raw["choices"][0] == {
        "index": 0,
        "delta": {"content": "x"},
        "logprobs": None,
        "finish_reason": "stop",
    }


# -- peer parity: structured output, prompt caching, headers (docs/coming-from-think.md) ------


async def test_th_021_response_format_becomes_json_schema_or_json_object(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    """TH-021: the AI SDK responseFormat reaches the wire as Chat Completions
    ``response_format``; a schema-less JSON request is ``json_object``."""
    schema = {"type": "object", "properties": {"severity": {"type": "string"}}}
    server.add(text_response('{"severity": "low"}'))
    request = ModelRequest(
        messages=HELLO.messages,
        response_format={"type": "json", "schema": schema, "name": "Result"},
    )
    await collect(model, request)
    assert server.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Result", "schema": schema},
    }
    plain = ModelRequest(messages=HELLO.messages, response_format={"type": "json"})
    assert model.build_request_params(plain)["response_format"] == {"type": "json_object"}
    assert "response_format" not in model.build_request_params(HELLO)


def test_th_021_schema_names_are_made_valid_for_openai(model: OpenAIChatModel) -> None:
    """TH-021: OpenAI accepts ``^[a-zA-Z0-9_-]{1,64}$`` only; a generic pydantic name such
    as ``Page[Item]`` is rewritten instead of failing the request."""
    request = ModelRequest(
        messages=HELLO.messages,
        response_format={"type": "json", "schema": {"type": "object"}, "name": "Page[Item]"},
    )
    name = model.build_request_params(request)["response_format"]["json_schema"]["name"]
    assert name == "Page_Item_"
    long = ModelRequest(
        messages=HELLO.messages,
        response_format={"type": "json", "schema": {"type": "object"}, "name": "N" * 80},
    )
    assert len(model.build_request_params(long)["response_format"]["json_schema"]["name"]) == 64


async def test_th_006_message_local_provider_options_ride_on_the_wire_message(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    """TH-006: a message's options for this provider are sent on that message (e.g. a
    gateway's cache_control); other providers' options, wire-owned keys and part-level
    options (which clients may send) are not."""
    cache = {"cache_control": {"type": "ephemeral"}, "role": "user", "content": "x"}
    request = ModelRequest(
        messages=[
            {
                "role": "system",
                "content": "Long stable prompt.",
                "providerOptions": {"openai": cache, "other": {"ignored": True}},
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Hi", "providerOptions": {"openai": {"x": 1}}},
                    {"type": "text", "text": "there"},
                ],
            },
        ]
    )
    server.add(text_response("ok"))
    await collect(model, request)
    system, user = server.requests[0]["messages"]
    assert system == {
        "role": "system",
        "content": "Long stable prompt.",
        "cache_control": {"type": "ephemeral"},
    }
    assert user == {
        "role": "user",
        "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}],
    }


async def test_th_020_default_headers_go_with_every_request(server: FakeOpenAIServer) -> None:
    """TH-020: a model configured with default headers sends them on each request."""
    server.add(text_response("one"), text_response("two"))
    async with OpenAIChatModel(
        model="fake-model",
        api_key=API_KEY,
        base_url=server.base_url,
        max_retries=0,
        default_headers={"X-Tenant": "acme"},
    ) as tagged:
        await collect(tagged)
        await collect(tagged)
    assert [e.headers["x-tenant"] for e in server.exchanges] == ["acme", "acme"]
    with pytest.raises(ValueError, match="default_headers"):
        OpenAIChatModel(model="m", client=tagged.client, default_headers={"X-Tenant": "a"})


# -- provider tools (AD-071, LC-127) ------------------------------------------------------------


async def test_ad_071_provider_tools_ride_in_tools_as_declared(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    """AD-071: provider tool definitions are appended to ``tools`` unchanged, after the
    function tools; they alone are enough to send ``tools`` and ``tool_choice``, and the
    definitions held by the request are not touched."""
    server.add(text_response("one"), text_response("two"))
    web = {"type": "web_search", "filters": {"allowed_domains": ["a.example"]}}
    request = ModelRequest(
        messages=HELLO.messages,
        tools=[{"name": "lookup", "inputSchema": {"type": "object"}}],
        tool_choice="auto",
        provider_tools={"web_search": web, "code": {"type": "code_interpreter"}},
    )
    await collect(model, request)
    await collect(model, ModelRequest(messages=HELLO.messages, provider_tools={"web": web}))

    first, second = server.requests
    assert first["tools"] == [
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
        {"type": "web_search", "filters": {"allowed_domains": ["a.example"]}},
        {"type": "code_interpreter"},
    ]
    assert first["tool_choice"] == "auto"
    assert second["tools"] == [web]
    assert request.provider_tools["web_search"] == web


async def test_lc_127_a_streamed_call_of_a_provider_tool_is_provider_executed(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    """LC-127, AD-071: a streamed tool call naming a provider tool of the request is marked
    ``providerExecuted``; a result the server put on it (``output``, or ``error``) follows as
    its ``tool-result``; without one none does. Only the runtime's own calls make the step
    finish with ``tool-calls``."""
    with_output = tool_call_chunks("ws_1", "web_search", '{"query": "pai"}', index=0)
    with_output[0]["choices"][0]["delta"]["tool_calls"][0]["output"] = {"hits": 2}
    failed = tool_call_chunks("ws_2", "web_search", "{}", index=1)
    failed[0]["choices"][0]["delta"]["tool_calls"][0]["error"] = "quota"
    bare = tool_call_chunks("ws_3", "web_search", "{}", index=2)
    server.add([*with_output, *failed, *bare, finish_chunk("stop")])
    server.add([*tool_call_chunks("c1", "lookup", "{}"), *bare, finish_chunk("tool_calls")])
    request = ModelRequest(
        messages=HELLO.messages,
        tools=[{"name": "lookup", "inputSchema": {"type": "object"}}],
        provider_tools={"web_search": {"type": "web_search"}},
    )

    parts = await collect(model, request)

    starts = of_type(parts, "tool-input-start")
    assert all(p["providerExecuted"] is True for p in starts)
    assert of_type(parts, "tool-call", "tool-result") == [
        {
            "type": "tool-call",
            "toolCallId": "ws_1",
            "toolName": "web_search",
            "input": '{"query": "pai"}',
            "providerExecuted": True,
        },
        {
            "type": "tool-result",
            "toolCallId": "ws_1",
            "toolName": "web_search",
            "result": {"hits": 2},
            "providerExecuted": True,
        },
        {
            "type": "tool-call",
            "toolCallId": "ws_2",
            "toolName": "web_search",
            "input": "{}",
            "providerExecuted": True,
        },
        {
            "type": "tool-result",
            "toolCallId": "ws_2",
            "toolName": "web_search",
            "result": "quota",
            "isError": True,
            "providerExecuted": True,
        },
        {
            "type": "tool-call",
            "toolCallId": "ws_3",
            "toolName": "web_search",
            "input": "{}",
            "providerExecuted": True,
        },
    ]
    assert parts[-1]["finishReason"] == "stop"

    parts = await collect(model, request)

    calls = of_type(parts, "tool-call")
    assert [(c["toolName"], c.get("providerExecuted")) for c in calls] == [
        ("lookup", None),
        ("web_search", True),
    ]
    assert parts[-1]["finishReason"] == "tool-calls"

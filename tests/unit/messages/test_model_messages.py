"""UIMessage to ModelMessage conversion (PROTOCOL.md section 8) and reasoning pruning."""

from __future__ import annotations

from typing import Any

from pai_agents.messages import UIMessage, prune_reasoning, to_model_messages

PM = {"openai": {"itemId": "x"}}
PM2 = {"openai": {"itemId": "y"}}


def user(*parts: dict[str, Any]) -> UIMessage:
    return {"id": "u", "role": "user", "parts": list(parts)}


def assistant(*parts: dict[str, Any]) -> UIMessage:
    return {"id": "a", "role": "assistant", "parts": list(parts)}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, "state": "done", **extra}


def weather(call: str = "c1", state: str = "output-available", **extra: Any) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "tool-weather",
        "toolCallId": call,
        "state": state,
        "input": {"city": "Paris"},
    }
    if state == "output-available":
        part["output"] = "sunny"
    part.update(extra)
    return part


def call(call_id: str = "c1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "tool-call",
        "toolCallId": call_id,
        "toolName": "weather",
        "input": {"city": "Paris"},
        **extra,
    }


def result(call_id: str = "c1", output: Any = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "tool-result",
        "toolCallId": call_id,
        "toolName": "weather",
        "output": output if output is not None else {"type": "text", "value": "sunny"},
        **extra,
    }


def test_system_message_joins_text_parts_and_merges_provider_options() -> None:
    system: UIMessage = {
        "id": "s",
        "role": "system",
        "parts": [
            text("You are ", providerMetadata={"a": {"x": 1}}),
            text("helpful.", providerMetadata={"b": {"y": 2}}),
        ],
    }
    assert to_model_messages([system]) == [
        {
            "role": "system",
            "content": "You are helpful.",
            "providerOptions": {"a": {"x": 1}, "b": {"y": 2}},
        }
    ]


def test_system_message_without_provider_metadata_has_no_provider_options() -> None:
    system: UIMessage = {"id": "s", "role": "system", "parts": [text("Be brief.")]}
    assert to_model_messages([system]) == [{"role": "system", "content": "Be brief."}]


def test_user_text_and_files_convert_and_other_parts_drop() -> None:
    message = user(
        text("hi", providerMetadata=PM),
        {"type": "file", "mediaType": "image/png", "url": "https://x/a.png", "filename": "a.png"},
        {
            "type": "file",
            "mediaType": "application/pdf",
            "url": "https://x/b",
            "providerReference": {"openai": "file-1"},
        },
        {"type": "data-note", "data": 1},
        {"type": "source-url", "sourceId": "s", "url": "https://x"},
    )
    assert to_model_messages([message]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi", "providerOptions": PM},
                {
                    "type": "file",
                    "mediaType": "image/png",
                    "filename": "a.png",
                    "data": {"type": "url", "url": "https://x/a.png"},
                },
                {
                    "type": "file",
                    "mediaType": "application/pdf",
                    "data": {"type": "reference", "reference": {"openai": "file-1"}},
                },
            ],
        }
    ]


def test_data_parts_go_through_the_converter() -> None:
    def convert(part: dict[str, Any]) -> dict[str, Any] | None:
        return (
            {"type": "text", "text": f"note: {part['data']}"}
            if part["type"] == "data-note"
            else None
        )

    messages = [
        user({"type": "data-note", "data": 1}, {"type": "data-skip", "data": 2}),
        assistant({"type": "data-note", "data": 3}),
    ]
    assert to_model_messages(messages, convert_data_part=convert) == [
        {"role": "user", "content": [{"type": "text", "text": "note: 1"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "note: 3"}]},
    ]


def test_assistant_content_keeps_part_order_and_provider_options() -> None:
    """MF-032: replay keeps text, reasoning, files and provider metadata; sources are dropped."""
    message = assistant(
        {"type": "step-start"},
        {"type": "reasoning", "id": "r", "text": "think", "state": "done", "providerMetadata": PM},
        {"type": "reasoning-file", "mediaType": "image/png", "url": "data:image/png;base64,AA"},
        {"type": "source-url", "sourceId": "s", "url": "https://x"},
        {"type": "custom", "kind": "openai.compaction", "providerMetadata": PM2},
        {"type": "file", "mediaType": "image/png", "url": "https://x/a.png"},
        text("answer"),
    )
    assert to_model_messages([message]) == [
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "think", "providerOptions": PM},
                {
                    "type": "reasoning-file",
                    "data": "data:image/png;base64,AA",
                    "mediaType": "image/png",
                },
                {"type": "custom", "kind": "openai.compaction", "providerOptions": PM2},
                {
                    "type": "file",
                    "mediaType": "image/png",
                    "data": {"type": "url", "url": "https://x/a.png"},
                },
                {"type": "text", "text": "answer"},
            ],
        }
    ]


def test_tool_round_trip_splits_blocks_at_step_start() -> None:
    """MF-033 / MF-047: tool results become tool-role messages paired by toolCallId per block."""
    message = assistant(
        {"type": "step-start"},
        text("Let me check."),
        weather(callProviderMetadata=PM),
        {"type": "step-start"},
        text("It is sunny."),
    )
    assert to_model_messages([user(text("weather?")), message]) == [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Let me check."}, call(providerOptions=PM)],
        },
        {"role": "tool", "content": [result(providerOptions=PM)]},
        {"role": "assistant", "content": [{"type": "text", "text": "It is sunny."}]},
    ]


def test_without_step_start_all_calls_land_in_one_assistant_and_one_tool_message() -> None:
    """(verified, sample 04) No step-start: one assistant message, then one tool message."""
    message = assistant(weather("c1"), text("and"), weather("c2", output={"t": 20}))
    assert to_model_messages([message]) == [
        {
            "role": "assistant",
            "content": [call("c1"), {"type": "text", "text": "and"}, call("c2")],
        },
        {
            "role": "tool",
            "content": [result("c1"), result("c2", {"type": "json", "value": {"t": 20}})],
        },
    ]


def test_null_output_is_replayed_as_json_null() -> None:
    """MF-034: output None is replayed as null."""
    converted = to_model_messages([assistant(weather(output=None))])
    assert converted[1]["content"][0]["output"] == {"type": "json", "value": None}


def test_output_error_becomes_error_text_and_uses_raw_input() -> None:
    part = {
        "type": "tool-weather",
        "toolCallId": "c1",
        "state": "output-error",
        "rawInput": "{bad",
        "errorText": "Invalid JSON",
        "resultProviderMetadata": PM2,
    }
    assert to_model_messages([assistant(part)]) == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool-call",
                    "toolCallId": "c1",
                    "toolName": "weather",
                    "input": "{bad",
                    "providerOptions": PM2,
                }
            ],
        },
        {
            "role": "tool",
            "content": [result(output={"type": "error-text", "value": "Invalid JSON"})],
        },
    ]


def test_output_denied_uses_approval_reason_or_default_text() -> None:
    denied = weather(
        state="output-denied", approval={"id": "a1", "approved": False, "reason": "no"}
    )
    plain = weather("c2", state="output-denied", approval={"id": "a2", "approved": False})
    converted = to_model_messages([assistant(denied, plain)])
    tool_content = converted[1]["content"]
    assert tool_content == [
        {"type": "tool-approval-response", "approvalId": "a1", "approved": False, "reason": "no"},
        result(output={"type": "error-text", "value": "no"}),
        {"type": "tool-approval-response", "approvalId": "a2", "approved": False},
        result("c2", output={"type": "error-text", "value": "Tool call execution denied."}),
    ]
    assert converted[0]["content"][1] == {
        "type": "tool-approval-request",
        "approvalId": "a1",
        "toolCallId": "c1",
    }


def test_approval_responded_denial_adds_execution_denied_result() -> None:
    part = weather(
        state="approval-responded", approval={"id": "a1", "approved": False, "reason": "x"}
    )
    converted = to_model_messages([assistant(part)])
    assert converted[1]["content"] == [
        {"type": "tool-approval-response", "approvalId": "a1", "approved": False, "reason": "x"},
        result(output={"type": "execution-denied", "reason": "x"}),
    ]


def test_approved_call_without_output_stays_unpaired_but_sends_response() -> None:
    part = weather(state="approval-responded", approval={"id": "a1", "approved": True})
    converted = to_model_messages([assistant(part)])
    assert converted[1]["content"] == [
        {"type": "tool-approval-response", "approvalId": "a1", "approved": True}
    ]


def test_input_available_call_gets_no_result() -> None:
    converted = to_model_messages([assistant(weather(state="input-available"))])
    assert converted == [{"role": "assistant", "content": [call()]}]


def test_input_streaming_call_is_not_sent() -> None:
    assert to_model_messages([assistant(weather(state="input-streaming"))]) == []


def test_ignore_incomplete_tool_calls_drops_unfinished_and_preliminary_parts() -> None:
    message = assistant(
        weather("c1", state="input-available"),
        weather("c2", state="approval-requested", approval={"id": "a"}),
        weather("c3", preliminary=True),
        weather("c4"),
    )
    converted = to_model_messages([message], ignore_incomplete_tool_calls=True)
    assert converted == [
        {"role": "assistant", "content": [call("c4")]},
        {"role": "tool", "content": [result("c4")]},
    ]


def test_approval_requested_parts_before_last_user_message_are_dropped() -> None:
    pending = weather("c1", state="approval-requested", approval={"id": "a"})
    converted = to_model_messages([assistant(pending, text("waiting")), user(text("never mind"))])
    assert converted[0] == {"role": "assistant", "content": [{"type": "text", "text": "waiting"}]}
    kept = to_model_messages([user(text("go")), assistant(pending)])
    assert kept[1]["content"] == [
        call(),
        {"type": "tool-approval-request", "approvalId": "a", "toolCallId": "c1"},
    ]


def test_provider_executed_result_stays_in_assistant_content() -> None:
    """LC-105: the result uses resultProviderMetadata, the call callProviderMetadata."""
    search = {
        "type": "tool-web_search",
        "toolCallId": "s1",
        "state": "output-available",
        "input": {"q": "x"},
        "output": {"hits": 1},
        "providerExecuted": True,
        "callProviderMetadata": PM,
        "resultProviderMetadata": PM2,
    }
    failed = {**search, "toolCallId": "s2", "state": "output-error", "errorText": "down"}
    del failed["output"]
    assert to_model_messages([assistant(search, failed)]) == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool-call",
                    "toolCallId": "s1",
                    "toolName": "web_search",
                    "input": {"q": "x"},
                    "providerExecuted": True,
                    "providerOptions": PM,
                },
                {
                    "type": "tool-result",
                    "toolCallId": "s1",
                    "toolName": "web_search",
                    "output": {"type": "json", "value": {"hits": 1}},
                    "providerOptions": PM2,
                },
                {
                    "type": "tool-call",
                    "toolCallId": "s2",
                    "toolName": "web_search",
                    "input": {"q": "x"},
                    "providerExecuted": True,
                    "providerOptions": PM,
                },
                {
                    "type": "tool-result",
                    "toolCallId": "s2",
                    "toolName": "web_search",
                    "output": {"type": "error-json", "value": "down"},
                    "providerOptions": PM2,
                },
            ],
        }
    ]


def test_dynamic_tool_uses_its_tool_name() -> None:
    part = {
        "type": "dynamic-tool",
        "toolName": "mcp_lookup",
        "toolCallId": "d1",
        "state": "output-error",
        "input": {"id": 1},
        "errorText": "gone",
    }
    assert to_model_messages([assistant(part)]) == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool-call",
                    "toolCallId": "d1",
                    "toolName": "mcp_lookup",
                    "input": {"id": 1},
                }
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "d1",
                    "toolName": "mcp_lookup",
                    "output": {"type": "error-text", "value": "gone"},
                }
            ],
        },
    ]


def test_dynamic_false_tool_missing_from_tools_gets_omitted_output() -> None:
    part = {
        "type": "dynamic-tool",
        "toolName": "old",
        "toolCallId": "d1",
        "state": "output-available",
        "input": {},
        "output": "secret",
        "dynamic": False,
    }
    converted = to_model_messages([assistant(part)], tools={"other": object()})
    assert converted[1]["content"][0]["output"] == {
        "type": "text",
        "value": "Tool output omitted because the tool is no longer available.",
    }


def test_tool_to_model_output_shapes_the_result() -> None:
    class Shaped:
        def to_model_output(self, *, tool_call_id: str, input: Any, output: Any) -> dict[str, Any]:
            return {"type": "text", "value": f"{tool_call_id}:{input['city']}:{output}"}

    converted = to_model_messages([assistant(weather())], tools={"weather": Shaped()})
    assert converted[1]["content"][0]["output"] == {"type": "text", "value": "c1:Paris:sunny"}


def test_steering_message_ends_block_and_becomes_user_message() -> None:
    message = assistant(
        text("working"),
        {"type": "steering-message", "id": "s", "parts": [{"type": "text", "text": "use Rome"}]},
        text("ok, Rome"),
    )
    assert to_model_messages([message]) == [
        {"role": "assistant", "content": [{"type": "text", "text": "working"}]},
        {"role": "user", "content": [{"type": "text", "text": "use Rome"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok, Rome"}]},
    ]


def test_empty_assistant_blocks_produce_no_message() -> None:
    message = assistant({"type": "step-start"}, {"type": "source-url", "sourceId": "s", "url": "u"})
    assert to_model_messages([message]) == []


def test_conversion_does_not_share_containers_with_stored_message() -> None:
    message = assistant(weather(output={"t": 1}))
    converted = to_model_messages([message])
    converted[1]["content"][0]["output"]["value"]["t"] = 2
    assert message["parts"][0]["output"] == {"t": 1}


# --- reasoning pruning ---------------------------------------------------------------------


def test_prune_reasoning_removes_reasoning_before_latest_user_message() -> None:
    """LC-097 / LC-098: older reasoning goes, reasoning after the latest user message stays."""
    old = {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "old"},
            {"type": "reasoning-file", "data": "d", "mediaType": "image/png"},
            {"type": "text", "text": "answer", "providerOptions": PM},
        ],
    }
    new = {"role": "assistant", "content": [{"type": "reasoning", "text": "new"}, call()]}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "q1"}]},
        old,
        {"role": "user", "content": [{"type": "text", "text": "q2"}]},
        new,
        {"role": "tool", "content": [result()]},
    ]
    pruned = prune_reasoning(messages)
    assert pruned[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "answer", "providerOptions": PM}],
    }
    assert pruned[3] is new
    assert old["content"][0] == {"type": "reasoning", "text": "old"}  # LC-102: input unchanged


def test_prune_reasoning_without_user_message_keeps_everything() -> None:
    """LC-099: no user message, nothing is removed."""
    messages = [{"role": "assistant", "content": [{"type": "reasoning", "text": "r"}]}]
    assert prune_reasoning(messages) == messages


def test_prune_reasoning_drops_messages_left_empty() -> None:
    """LC-100: historical messages left empty by pruning are dropped."""
    messages = [
        {"role": "assistant", "content": [{"type": "reasoning", "text": "r"}]},
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
    ]
    assert prune_reasoning(messages) == [messages[1]]

"""The chunk reducer against PROTOCOL.md sections 4 and 5 (the SDK's processUIMessageStream)."""

from __future__ import annotations

from typing import Any

import pytest

from pai_agents.messages import (
    MessageReducer,
    UIMessage,
    UIMessageStreamError,
    merge_metadata,
    parse_partial_json,
    reduce_chunks,
)

PM = {"openai": {"itemId": "x"}}
PM2 = {"openai": {"itemId": "y"}}


def fold(*chunks: dict[str, Any], message: UIMessage | None = None) -> MessageReducer:
    reducer = MessageReducer(message)
    for chunk in chunks:
        reducer.apply(chunk)
    return reducer


def parts(*chunks: dict[str, Any], message: UIMessage | None = None) -> list[dict[str, Any]]:
    return fold(*chunks, message=message).message["parts"]


def tool_start(call: str = "c1", name: str = "weather", **extra: Any) -> dict[str, Any]:
    return {"type": "tool-input-start", "toolCallId": call, "toolName": name, **extra}


def tool_input(call: str = "c1", name: str = "weather", **extra: Any) -> dict[str, Any]:
    return {
        "type": "tool-input-available",
        "toolCallId": call,
        "toolName": name,
        "input": {"city": "Paris"},
        **extra,
    }


def tool_output(call: str = "c1", output: Any = "sunny", **extra: Any) -> dict[str, Any]:
    return {"type": "tool-output-available", "toolCallId": call, "output": output, **extra}


# --- message lifecycle (4.1, 4.2) ---------------------------------------------------------


def test_default_message_is_empty_assistant_with_empty_id() -> None:
    assert MessageReducer().message == {"id": "", "role": "assistant", "parts": []}


def test_start_sets_message_id_and_merges_metadata() -> None:
    """MF-027: the folded message takes the id and metadata of the start chunk."""
    reducer = fold({"type": "start", "messageId": "m1", "messageMetadata": {"a": 1}})
    assert reducer.message == {"id": "m1", "role": "assistant", "parts": [], "metadata": {"a": 1}}


def test_start_with_changed_message_id_resets_all_parts() -> None:
    """(verified) readUIMessageStream drops everything when the start messageId changes."""
    reducer = fold(
        {"type": "start", "messageId": "m1", "messageMetadata": {"a": 1}},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "old"},
        {"type": "start", "messageId": "m2"},
    )
    assert reducer.message == {"id": "m2", "role": "assistant", "parts": []}
    with pytest.raises(UIMessageStreamError):
        reducer.apply({"type": "text-delta", "id": "t", "delta": "x"})


def test_start_with_same_message_id_continues_existing_message() -> None:
    existing: UIMessage = {
        "id": "m1",
        "role": "assistant",
        "parts": [{"type": "text", "text": "a"}],
    }
    reducer = fold({"type": "start", "messageId": "m1"}, message=existing)
    assert reducer.message["parts"] == [{"type": "text", "text": "a"}]


def test_start_without_message_id_keeps_empty_id() -> None:
    reducer = MessageReducer()
    assert reducer.apply({"type": "start"}) is False
    assert reducer.message["id"] == ""


def test_message_metadata_merges_and_ignores_null() -> None:
    reducer = fold(
        {"type": "message-metadata", "messageMetadata": {"a": {"b": 1}}},
        {"type": "message-metadata", "messageMetadata": {"a": {"c": 2}}},
    )
    assert reducer.apply({"type": "message-metadata", "messageMetadata": None}) is False
    assert reducer.message["metadata"] == {"a": {"b": 1, "c": 2}}


def test_merge_metadata_null_replaces_leaf_and_keeps_siblings() -> None:
    """(verified) {a:{b:1,c:2}} merged with {a:{b:null}} gives {a:{b:null,c:2}}."""
    assert merge_metadata({"a": {"b": 1, "c": 2}}, {"a": {"b": None}}) == {"a": {"b": None, "c": 2}}


def test_merge_metadata_arrays_replace() -> None:
    """(verified) flags:["a"] merged with flags:["b"] gives ["b"]."""
    assert merge_metadata({"flags": ["a"]}, {"flags": ["b"]}) == {"flags": ["b"]}


def test_merge_metadata_replaces_missing_and_skips_prototype_keys() -> None:
    assert merge_metadata(None, {"a": 1}) == {"a": 1}
    merged = merge_metadata({"a": 1}, {"__proto__": {"x": 1}, "constructor": 1, "prototype": 2})
    assert merged == {"a": 1}


def test_merge_metadata_does_not_mutate_inputs() -> None:
    old = {"a": {"b": 1}}
    merge_metadata(old, {"a": {"c": 2}})
    assert old == {"a": {"b": 1}}


def test_finish_records_reason_outside_message_and_merges_metadata() -> None:
    reducer = MessageReducer()
    assert reducer.apply({"type": "finish", "finishReason": "stop"}) is False
    assert reducer.apply({"type": "finish", "messageMetadata": {"t": 1}}) is True
    assert reducer.finish_reason == "stop"
    assert reducer.message == {"id": "", "role": "assistant", "parts": [], "metadata": {"t": 1}}


def test_chunks_after_finish_are_still_applied() -> None:
    """(verified) The reducer keeps applying chunks after finish."""
    reducer = fold(
        {"type": "finish", "finishReason": "stop"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "late"},
    )
    assert reducer.message["parts"] == [{"type": "text", "text": "late", "state": "streaming"}]


def test_abort_changes_nothing() -> None:
    reducer = MessageReducer()
    assert reducer.apply({"type": "abort", "reason": "user"}) is False
    assert reducer.message == {"id": "", "role": "assistant", "parts": []}


def test_error_chunk_is_recorded_and_stream_continues() -> None:
    """readUIMessageStream (terminateOnError false) reports the error and keeps folding."""
    reducer = MessageReducer()
    assert reducer.apply({"type": "error", "errorText": "boom"}) is False
    reducer.apply({"type": "text-start", "id": "t"})
    assert reducer.errors == ["boom"]
    assert len(reducer.message["parts"]) == 1


# --- text and reasoning (4.3) -------------------------------------------------------------


def test_text_stream_builds_done_text_part_without_id() -> None:
    result = parts(
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "Hel"},
        {"type": "text-delta", "id": "t1", "delta": "lo"},
        {"type": "text-end", "id": "t1"},
    )
    assert result == [{"type": "text", "text": "Hello", "state": "done"}]


def test_text_provider_metadata_is_replaced_not_merged() -> None:
    result = parts(
        {"type": "text-start", "id": "t", "providerMetadata": {"a": {"x": 1}}},
        {"type": "text-delta", "id": "t", "delta": "a", "providerMetadata": {"b": {"y": 2}}},
        {"type": "text-delta", "id": "t", "delta": "b"},
    )
    assert result[0]["providerMetadata"] == {"b": {"y": 2}}


def test_text_end_sets_citations_and_provider_metadata() -> None:
    citation = {"source": {"type": "source", "sourceType": "url", "id": "s", "url": "https://a"}}
    result = parts(
        {"type": "text-start", "id": "t", "providerMetadata": PM},
        {"type": "text-end", "id": "t", "citations": [citation], "providerMetadata": PM2},
    )
    assert result == [
        {
            "type": "text",
            "text": "",
            "state": "done",
            "providerMetadata": PM2,
            "citations": [citation],
        }
    ]


def test_text_id_can_be_reused_after_end() -> None:
    result = parts(
        {"type": "text-start", "id": "t"},
        {"type": "text-end", "id": "t"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "second"},
    )
    assert [p["text"] for p in result] == ["", "second"]


def test_second_text_start_with_active_id_leaves_old_part_streaming() -> None:
    """(verified) A duplicate text-start appends a new part; the old one streams forever."""
    result = parts(
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "one"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "two"},
        {"type": "text-end", "id": "t"},
    )
    assert result == [
        {"type": "text", "text": "one", "state": "streaming"},
        {"type": "text", "text": "two", "state": "done"},
    ]


def test_reasoning_part_keeps_its_id() -> None:
    result = parts(
        {"type": "reasoning-start", "id": "r1", "providerMetadata": PM},
        {"type": "reasoning-delta", "id": "r1", "delta": "think"},
        {"type": "reasoning-end", "id": "r1", "providerMetadata": PM2},
    )
    assert result == [
        {"type": "reasoning", "id": "r1", "text": "think", "state": "done", "providerMetadata": PM2}
    ]


@pytest.mark.parametrize(
    "chunk",
    [
        {"type": "text-delta", "id": "nope", "delta": "x"},
        {"type": "text-end", "id": "nope"},
        {"type": "reasoning-delta", "id": "nope", "delta": "x"},
        {"type": "reasoning-end", "id": "nope"},
    ],
)
def test_text_and_reasoning_chunks_without_active_part_raise(chunk: dict[str, Any]) -> None:
    with pytest.raises(UIMessageStreamError) as info:
        MessageReducer().apply(chunk)
    assert (info.value.chunk_type, info.value.chunk_id) == (chunk["type"], "nope")


def test_text_and_reasoning_registries_are_separate() -> None:
    reducer = fold({"type": "text-start", "id": "x"})
    with pytest.raises(UIMessageStreamError):
        reducer.apply({"type": "reasoning-delta", "id": "x", "delta": "y"})


def test_finish_step_keeps_text_part_active() -> None:
    """PROTOCOL.md 4.7: finish-step does nothing, so a later delta still reaches the part."""
    reducer = fold({"type": "text-start", "id": "t"})
    assert reducer.apply({"type": "finish-step"}) is False
    reducer.apply({"type": "text-delta", "id": "t", "delta": "x"})
    assert reducer.message["parts"][0]["text"] == "x"


# --- tool parts (4.4) ---------------------------------------------------------------------


def test_tool_call_full_lifecycle_static_part() -> None:
    result = parts(
        tool_start(),
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": ' "Paris"}'},
        tool_input(),
        tool_output(),
    )
    assert result == [
        {
            "type": "tool-weather",
            "toolCallId": "c1",
            "state": "output-available",
            "input": {"city": "Paris"},
            "output": "sunny",
        }
    ]


def test_tool_input_start_creates_input_streaming_part_with_call_metadata() -> None:
    result = parts(
        tool_start(
            title="Weather", toolMetadata={"k": 1}, providerMetadata=PM, inputEncoding="json"
        )
    )
    assert result == [
        {
            "type": "tool-weather",
            "toolCallId": "c1",
            "state": "input-streaming",
            "title": "Weather",
            "toolMetadata": {"k": 1},
            "callProviderMetadata": PM,
            "inputEncoding": "json",
        }
    ]


def test_tool_input_delta_parses_partial_json_dangling_key_to_empty_object() -> None:
    """(verified) A buffer of `{"city":` gives input {}."""
    result = parts(
        tool_start(),
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
    )
    assert result[0]["input"] == {}
    assert result[0]["rawInput"] == '{"city":'
    assert result[0]["state"] == "input-streaming"


def test_tool_input_delta_with_text_encoding_uses_raw_text_as_input() -> None:
    result = parts(
        tool_start(inputEncoding="text"),
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "SELECT "},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "1"},
    )
    assert result[0]["input"] == "SELECT 1"
    assert result[0]["inputEncoding"] == "text"


def test_tool_input_delta_unparsable_buffer_leaves_input_absent() -> None:
    result = parts(
        tool_start(), {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "-"}
    )
    assert "input" not in result[0]


def test_tool_input_delta_without_start_raises() -> None:
    with pytest.raises(UIMessageStreamError) as info:
        MessageReducer().apply(
            {"type": "tool-input-delta", "toolCallId": "c9", "inputTextDelta": "{"}
        )
    assert (info.value.chunk_type, info.value.chunk_id) == ("tool-input-delta", "c9")


def test_tool_input_delta_after_output_moves_part_back_and_drops_output() -> None:
    """(verified) A late delta resets the part to input-streaming and drops the output."""
    result = parts(
        tool_start(),
        tool_input(),
        tool_output(),
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"a": 1}'},
    )
    assert result == [
        {
            "type": "tool-weather",
            "toolCallId": "c1",
            "state": "input-streaming",
            "input": {"a": 1},
            "rawInput": '{"a": 1}',
        }
    ]


def test_tool_input_available_drops_raw_input_and_input_encoding() -> None:
    result = parts(
        tool_start(inputEncoding="json"),
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{}"},
        tool_input(providerMetadata=PM),
    )
    assert result == [
        {
            "type": "tool-weather",
            "toolCallId": "c1",
            "state": "input-available",
            "input": {"city": "Paris"},
            "callProviderMetadata": PM,
        }
    ]


def test_tool_input_available_without_start_appends_part() -> None:
    assert parts(tool_input())[0]["state"] == "input-available"


def test_same_tool_call_id_in_later_step_creates_second_part() -> None:
    """(verified) Input chunks only search the current step."""
    result = parts(
        {"type": "start-step"},
        tool_input(),
        {"type": "start-step"},
        tool_input(),
    )
    assert [p["type"] for p in result] == [
        "step-start",
        "tool-weather",
        "step-start",
        "tool-weather",
    ]


def test_differing_dynamic_flag_duplicates_the_call() -> None:
    """(verified) dynamic on one chunk but not the other gives a dynamic-tool and a tool-x part."""
    result = parts(tool_start(dynamic=True), tool_input())
    assert [(p["type"], p["state"]) for p in result] == [
        ("dynamic-tool", "input-streaming"),
        ("tool-weather", "input-available"),
    ]


def test_dynamic_tool_part_stores_tool_name() -> None:
    result = parts(tool_start(dynamic=True), tool_input(dynamic=True), tool_output())
    assert result == [
        {
            "type": "dynamic-tool",
            "toolName": "weather",
            "toolCallId": "c1",
            "state": "output-available",
            "input": {"city": "Paris"},
            "output": "sunny",
        }
    ]


def test_static_lookup_matches_any_static_tool_with_the_call_id() -> None:
    result = parts(tool_start(name="a"), tool_input(name="b"))
    assert [(p["type"], p["state"]) for p in result] == [("tool-a", "input-available")]


def test_tool_input_error_on_static_part_keeps_input_in_raw_input() -> None:
    """(verified) tool-input-error stores providerMetadata as resultProviderMetadata."""
    result = parts(
        tool_start(title="T"),
        {
            "type": "tool-input-error",
            "toolCallId": "c1",
            "toolName": "weather",
            "input": "{bad",
            "errorText": "Invalid JSON",
            "providerMetadata": PM,
            "title": "ignored",
        },
    )
    assert result == [
        {
            "type": "tool-weather",
            "toolCallId": "c1",
            "state": "output-error",
            "title": "T",
            "input": "{bad",
            "errorText": "Invalid JSON",
            "resultProviderMetadata": PM,
        }
    ]


def test_tool_input_error_follows_kind_of_existing_part() -> None:
    result = parts(
        tool_start(dynamic=True),
        {
            "type": "tool-input-error",
            "toolCallId": "c1",
            "toolName": "weather",
            "input": {"x": 1},
            "errorText": "bad",
        },
    )
    assert result == [
        {
            "type": "dynamic-tool",
            "toolName": "weather",
            "toolCallId": "c1",
            "state": "output-error",
            "input": {"x": 1},
            "errorText": "bad",
        }
    ]


def test_tool_output_error_carries_input_and_keeps_static_raw_input() -> None:
    start = {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{"}
    result = parts(
        tool_start(),
        start,
        {
            "type": "tool-output-error",
            "toolCallId": "c1",
            "errorText": "failed",
            "providerMetadata": PM,
        },
    )
    assert result == [
        {
            "type": "tool-weather",
            "toolCallId": "c1",
            "state": "output-error",
            "input": {},
            "rawInput": "{",
            "errorText": "failed",
            "resultProviderMetadata": PM,
        }
    ]


def test_tool_output_error_on_dynamic_part_drops_raw_input() -> None:
    result = parts(
        tool_start(dynamic=True),
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{"},
        {"type": "tool-output-error", "toolCallId": "c1", "errorText": "failed"},
    )
    assert "rawInput" not in result[0]
    assert result[0]["state"] == "output-error"


def test_tool_output_keeps_call_metadata_and_adds_result_metadata() -> None:
    result = parts(tool_input(providerMetadata=PM), tool_output(providerMetadata=PM2))
    assert result[0]["callProviderMetadata"] == PM
    assert result[0]["resultProviderMetadata"] == PM2


def test_absent_provider_metadata_keeps_previous_value() -> None:
    result = parts(tool_start(providerMetadata=PM), tool_input())
    assert result[0]["callProviderMetadata"] == PM


def test_preliminary_output_is_cleared_by_next_output() -> None:
    reducer = fold(tool_input(), tool_output(output="partial", preliminary=True))
    assert reducer.message["parts"][0]["preliminary"] is True
    reducer.apply(tool_output(output="final"))
    assert "preliminary" not in reducer.message["parts"][0]
    assert reducer.message["parts"][0]["output"] == "final"


def test_provider_executed_is_sticky() -> None:
    result = parts(tool_start(providerExecuted=True), tool_input(), tool_output())
    assert result[0]["providerExecuted"] is True


def test_title_is_kept_when_later_chunk_omits_it() -> None:
    result = parts(tool_start(title="Old"), tool_input(), tool_output())
    assert result[0]["title"] == "Old"
    assert parts(tool_start(title="Old"), tool_input(title="New"))[0]["title"] == "New"


def test_tool_metadata_from_output_chunk_overrides_existing() -> None:
    result = parts(tool_input(toolMetadata={"a": 1}), tool_output(toolMetadata={"b": 2}))
    assert result[0]["toolMetadata"] == {"b": 2}
    assert parts(tool_input(toolMetadata={"a": 1}), tool_output())[0]["toolMetadata"] == {"a": 1}


def test_output_of_none_is_stored_as_null() -> None:
    """MF-034: a tool returning None is stored with output: null."""
    result = parts(tool_input(), tool_output(output=None))
    assert "output" in result[0]
    assert result[0]["output"] is None


def test_output_chunk_finds_part_in_earlier_step() -> None:
    result = parts(tool_input(), {"type": "start-step"}, tool_output())
    assert result[0]["state"] == "output-available"
    assert result[1] == {"type": "step-start"}


def test_output_chunk_prefers_current_step_over_earlier_part() -> None:
    result = parts(tool_input(), {"type": "start-step"}, tool_input(), tool_output())
    assert [p.get("state") for p in result] == ["input-available", None, "output-available"]


@pytest.mark.parametrize(
    "chunk",
    [
        {"type": "tool-output-available", "toolCallId": "zz", "output": 1},
        {"type": "tool-output-error", "toolCallId": "zz", "errorText": "e"},
        {"type": "tool-approval-request", "toolCallId": "zz", "approvalId": "a"},
        {"type": "tool-output-denied", "toolCallId": "zz"},
    ],
)
def test_result_chunks_for_unknown_tool_call_raise(chunk: dict[str, Any]) -> None:
    with pytest.raises(UIMessageStreamError) as info:
        fold(tool_input()).apply(chunk)
    assert (info.value.chunk_type, info.value.chunk_id) == ("tool-invocation", "zz")


def test_approval_request_builds_approval_object() -> None:
    result = parts(
        tool_input(),
        {
            "type": "tool-approval-request",
            "toolCallId": "c1",
            "approvalId": "a1",
            "approvalDescriptor": {"label": "Send"},
            "inputSchemaInput": None,
            "reason": "needs a human",
            "isAutomatic": False,
            "signature": "sig",
        },
    )
    assert result[0]["state"] == "approval-requested"
    assert result[0]["approval"] == {
        "id": "a1",
        "descriptor": {"label": "Send"},
        "inputSchemaInput": None,
        "requestReason": "needs a human",
        "signature": "sig",
    }


def test_approval_request_keeps_is_automatic_only_when_true() -> None:
    result = parts(
        tool_input(),
        {
            "type": "tool-approval-request",
            "toolCallId": "c1",
            "approvalId": "a",
            "isAutomatic": True,
        },
    )
    assert result[0]["approval"] == {"id": "a", "isAutomatic": True}


def test_approval_response_finds_part_by_approval_id() -> None:
    result = parts(
        tool_input(),
        {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "a1", "reason": "r"},
        {
            "type": "tool-approval-response",
            "approvalId": "a1",
            "approved": True,
            "reason": "ok",
            "providerMetadata": PM,
        },
    )
    assert result[0]["state"] == "approval-responded"
    assert result[0]["approval"] == {
        "id": "a1",
        "requestReason": "r",
        "approved": True,
        "reason": "ok",
    }
    assert result[0]["callProviderMetadata"] == PM


def test_approval_response_for_unknown_approval_id_raises() -> None:
    with pytest.raises(UIMessageStreamError) as info:
        fold(tool_input()).apply(
            {"type": "tool-approval-response", "approvalId": "x", "approved": True}
        )
    assert (info.value.chunk_type, info.value.chunk_id) == ("tool-approval-response", "x")


def test_denied_flow_ends_in_output_denied_with_approval() -> None:
    result = parts(
        tool_input(),
        {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "a1"},
        {"type": "tool-approval-response", "approvalId": "a1", "approved": False, "reason": "no"},
        {"type": "tool-output-denied", "toolCallId": "c1"},
    )
    assert result == [
        {
            "type": "tool-weather",
            "toolCallId": "c1",
            "state": "output-denied",
            "input": {"city": "Paris"},
            "approval": {"id": "a1", "approved": False, "reason": "no"},
        }
    ]


def test_approved_flow_keeps_approval_on_output() -> None:
    result = parts(
        tool_input(),
        {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "a1"},
        {"type": "tool-approval-response", "approvalId": "a1", "approved": True},
        tool_output(),
    )
    assert result[0]["state"] == "output-available"
    assert result[0]["approval"] == {"id": "a1", "approved": True}


def test_state_transitions_are_plain_overwrites_without_order_checks() -> None:
    reducer = fold(tool_input(), tool_output())
    reducer.apply(tool_input())
    assert reducer.message["parts"][0]["state"] == "input-available"
    assert "output" not in reducer.message["parts"][0]


# --- sources, files, custom, steering (4.5) ----------------------------------------------


def test_source_parts_are_built_field_by_field() -> None:
    result = parts(
        {"type": "source-url", "sourceId": "s1", "url": "https://a", "title": "A", "extra": 1},
        {
            "type": "source-document",
            "sourceId": "s2",
            "mediaType": "application/pdf",
            "title": "Doc",
            "filename": "d.pdf",
            "providerMetadata": PM,
        },
        {"type": "source-url", "sourceId": "s1", "url": "https://a"},
    )
    assert result == [
        {"type": "source-url", "sourceId": "s1", "url": "https://a", "title": "A"},
        {
            "type": "source-document",
            "sourceId": "s2",
            "mediaType": "application/pdf",
            "title": "Doc",
            "filename": "d.pdf",
            "providerMetadata": PM,
        },
        {"type": "source-url", "sourceId": "s1", "url": "https://a"},
    ]


def test_streamed_file_part_never_has_filename_or_provider_reference() -> None:
    """(verified) file chunks lose filename and providerReference."""
    result = parts(
        {
            "type": "file",
            "url": "https://x/f.png",
            "mediaType": "image/png",
            "filename": "f.png",
            "providerReference": {"openai": "file-1"},
        },
        {"type": "reasoning-file", "url": "data:image/png;base64,AA", "mediaType": "image/png"},
    )
    assert result == [
        {"type": "file", "mediaType": "image/png", "url": "https://x/f.png"},
        {"type": "reasoning-file", "mediaType": "image/png", "url": "data:image/png;base64,AA"},
    ]


def test_custom_and_steering_message_parts() -> None:
    steering = [{"type": "text", "text": "also check Rome"}]
    result = parts(
        {"type": "custom", "kind": "openai.compaction", "providerMetadata": PM},
        {"type": "steering-message", "id": "s1", "parts": steering},
    )
    assert result == [
        {"type": "custom", "kind": "openai.compaction", "providerMetadata": PM},
        {"type": "steering-message", "id": "s1", "parts": steering},
    ]


# --- data parts (4.6) ---------------------------------------------------------------------


def test_transient_data_part_is_not_stored_and_emits_no_snapshot() -> None:
    reducer = MessageReducer()
    assert reducer.apply({"type": "data-progress", "data": 1, "transient": True}) is False
    assert reducer.message["parts"] == []


def test_data_part_with_same_type_and_id_replaces_only_data_in_place() -> None:
    result = parts(
        {"type": "data-weather", "id": "w", "data": {"t": 1}, "extra": "kept"},
        {"type": "text-start", "id": "t"},
        {"type": "data-weather", "id": "w", "data": {"t": 2}, "other": "dropped"},
        {"type": "data-other", "id": "w", "data": 3},
    )
    assert result[0] == {"type": "data-weather", "id": "w", "data": {"t": 2}, "extra": "kept"}
    assert result[2] == {"type": "data-other", "id": "w", "data": 3}


def test_data_part_is_appended_with_all_its_keys() -> None:
    """(verified) transient: false and unknown keys end up in the stored part."""
    result = parts(
        {"type": "data-x", "data": 1, "transient": False, "foo": "bar"},
        {"type": "data-x", "data": 2},
    )
    assert result == [
        {"type": "data-x", "data": 1, "transient": False, "foo": "bar"},
        {"type": "data-x", "data": 2},
    ]


def test_stored_data_part_is_a_copy_of_the_chunk() -> None:
    chunk = {"type": "data-x", "data": {"a": 1}}
    reducer = fold(chunk)
    chunk["data"]["a"] = 2
    assert reducer.message["parts"][0]["data"] == {"a": 1}


# --- steps (4.7) --------------------------------------------------------------------------


def test_start_step_appends_step_start_without_snapshot() -> None:
    reducer = MessageReducer()
    assert reducer.apply({"type": "start-step"}) is False
    assert reducer.message["parts"] == [{"type": "step-start"}]


def test_trailing_step_start_is_in_message_but_never_snapshotted() -> None:
    """(verified) A trailing step-start is in the server message but emits no snapshot."""
    reducer = MessageReducer()
    snapshots = []
    for chunk in (
        {"type": "start", "messageId": "m"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t"},
        {"type": "text-end", "id": "t"},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "finish"},
    ):
        if reducer.apply(chunk):
            snapshots.append(reducer.snapshot())
    assert snapshots[-1]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "", "state": "done"},
    ]
    assert reducer.message["parts"][-1] == {"type": "step-start"}


def test_reset_step_removes_current_step_and_active_records() -> None:
    reducer = fold(
        {"type": "start-step"},
        {"type": "text-start", "id": "keep"},
        {"type": "text-end", "id": "keep"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t"},
        tool_start(),
    )
    assert reducer.apply({"type": "reset-step"}) is True
    assert reducer.message["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "", "state": "done"},
        {"type": "step-start"},
    ]
    with pytest.raises(UIMessageStreamError):
        reducer.apply({"type": "text-delta", "id": "t", "delta": "x"})
    with pytest.raises(UIMessageStreamError):
        reducer.apply({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{"})


def test_reset_step_with_nothing_to_remove_emits_no_snapshot() -> None:
    assert fold({"type": "start-step"}).apply({"type": "reset-step"}) is False


def test_reset_step_without_step_start_clears_all_parts() -> None:
    reducer = fold({"type": "text-start", "id": "t"})
    assert reducer.apply({"type": "reset-step"}) is True
    assert reducer.message["parts"] == []


# --- snapshots (4.9) and resuming (5) ----------------------------------------------------


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        ({"type": "start", "messageId": "m"}, True),
        ({"type": "start", "messageMetadata": {"a": 1}}, True),
        ({"type": "start"}, False),
        ({"type": "message-metadata", "messageMetadata": {"a": 1}}, True),
        ({"type": "finish"}, False),
        ({"type": "finish-step"}, False),
        ({"type": "start-step"}, False),
        ({"type": "abort"}, False),
        ({"type": "error", "errorText": "e"}, False),
        ({"type": "text-start", "id": "t"}, True),
        ({"type": "data-x", "data": 1}, True),
        ({"type": "source-url", "sourceId": "s", "url": "https://a"}, True),
        ({"type": "unknown-chunk"}, False),
    ],
)
def test_apply_reports_whether_a_snapshot_is_emitted(chunk: dict[str, Any], expected: bool) -> None:
    assert MessageReducer().apply(chunk) is expected


def test_snapshot_is_a_deep_copy() -> None:
    reducer = fold({"type": "text-start", "id": "t"})
    snap = reducer.snapshot()
    reducer.apply({"type": "text-delta", "id": "t", "delta": "x"})
    assert snap["parts"][0]["text"] == ""


def test_initial_message_is_not_mutated() -> None:
    existing: UIMessage = {"id": "m", "role": "assistant", "parts": []}
    fold({"type": "text-start", "id": "t"}, message=existing)
    assert existing["parts"] == []


def test_non_assistant_initial_message_starts_empty() -> None:
    user: UIMessage = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    assert MessageReducer(user).message == {"id": "", "role": "assistant", "parts": []}


def test_resume_rebuilds_partial_call_of_last_step() -> None:
    existing: UIMessage = {
        "id": "m",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-weather",
                "toolCallId": "c1",
                "state": "input-streaming",
                "input": {},
                "rawInput": '{"city":',
                "title": "W",
            },
        ],
    }
    reducer = fold(
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": ' "Rome"}'},
        message=existing,
    )
    assert reducer.message["parts"][1] == {
        "type": "tool-weather",
        "toolCallId": "c1",
        "state": "input-streaming",
        "input": {"city": "Rome"},
        "rawInput": '{"city": "Rome"}',
        "title": "W",
    }


def test_resume_does_not_rebuild_earlier_steps_or_open_text() -> None:
    existing: UIMessage = {
        "id": "m",
        "role": "assistant",
        "parts": [
            {"type": "tool-a", "toolCallId": "old", "state": "input-streaming"},
            {"type": "step-start"},
            {"type": "text", "text": "x", "state": "streaming"},
        ],
    }
    reducer = MessageReducer(existing)
    with pytest.raises(UIMessageStreamError):
        reducer.apply({"type": "tool-input-delta", "toolCallId": "old", "inputTextDelta": "{"})
    with pytest.raises(UIMessageStreamError):
        reducer.apply({"type": "text-delta", "id": "0", "delta": "y"})


def test_reduce_chunks_folds_a_whole_stream() -> None:
    """MF-027: folding the published chunks yields the stored message."""
    message = reduce_chunks(
        [
            {"type": "start", "messageId": "m1"},
            {"type": "start-step"},
            {"type": "reasoning-start", "id": "r"},
            {"type": "reasoning-delta", "id": "r", "delta": "hmm"},
            {"type": "reasoning-end", "id": "r"},
            tool_input(),
            tool_output(),
            {"type": "finish-step"},
            {"type": "start-step"},
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "Sunny."},
            {"type": "text-end", "id": "t"},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop"},
        ]
    )
    assert message == {
        "id": "m1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "id": "r", "text": "hmm", "state": "done"},
            {
                "type": "tool-weather",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"city": "Paris"},
                "output": "sunny",
            },
            {"type": "step-start"},
            {"type": "text", "text": "Sunny.", "state": "done"},
        ],
    }


# --- partial JSON -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"city":', {}),
        ('{"ci', {}),
        ('{"city": "Ber', {"city": "Ber"}),
        ('{"a":1,', {"a": 1}),
        ("[1, 2", [1, 2]),
        ("[", []),
        ('{"a": tr', {"a": True}),
        ('{"a": [1, {"b": nul', {"a": [1, {"b": None}]}),
        ('{"a": 12.', {"a": 12}),
        ('{"a": -1', {"a": -1}),
        ('"abc\\', "abc"),
        ('"ab\\u00', "ab"),
        ('{"a": "x\\"y', {"a": 'x"y'}),
        ('  {"a": 1}  ', {"a": 1}),
        ('{"a": "x"} trailing', {"a": "x"}),
    ],
)
def test_parse_partial_json_closes_open_structures(text: str, expected: Any) -> None:
    assert parse_partial_json(text) == expected


@pytest.mark.parametrize("text", ["", "-", "NaN", '{"a": falsy}'])
def test_parse_partial_json_returns_default_when_unrepairable(text: str) -> None:
    sentinel = object()
    assert parse_partial_json(text, sentinel) is sentinel

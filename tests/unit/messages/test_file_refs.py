"""PAI file references: the public attachment projection, and expansion into model input by
a file provider without touching the stored messages (MF-014, MF-038..MF-040, MF-031, LC-051).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from pai_agents import InMemoryThreadStore, RunEngine, ScriptedModel, ScriptedStep, define_agent
from pai_agents.files import FileRef, to_model_messages_with_files
from pai_agents.messages.file_refs import FILE_REF_PART, file_ref_part, project_file_refs
from pai_agents.messages.types import UIMessage
from tests.support.engine_harness import harness

REF = file_ref_part(
    part_id="att_1",
    file_id="fil_1",
    media_type="image/png",
    filename="cat.png",
    byte_size=3,
    metadata={"caption": "a cat"},
)


def _user(*parts: dict[str, Any], message_id: str = "u1") -> UIMessage:
    return {"id": message_id, "role": "user", "parts": list(parts)}


class TwoPartProvider:
    """Expands each reference into a text header and a file part; counts its calls."""

    def __init__(self) -> None:
        self.refs: list[FileRef] = []

    async def expand(self, ref: FileRef) -> Sequence[dict[str, Any]]:
        self.refs.append(ref)
        return [
            {"type": "text", "text": f"<file {ref.filename}>"},
            {
                "type": "file",
                "mediaType": ref.media_type,
                "data": {"type": "url", "url": f"data:{ref.media_type};base64,AAA"},
            },
        ]


# -- the public projection ------------------------------------------------------------


def test_mf_014_mf_038_a_stored_reference_appears_as_an_attachment_part() -> None:
    """MF-014, MF-038: the raw reserved part is replaced in place by
    ``{type: "attachment", id, fileId, mediaType, filename?, byteSize?, metadata?}``."""
    stored = _user({"type": "text", "text": "look"}, REF)
    projected = project_file_refs(stored)
    assert projected["parts"] == [
        {"type": "text", "text": "look"},
        {
            "type": "attachment",
            "id": "att_1",
            "fileId": "fil_1",
            "mediaType": "image/png",
            "filename": "cat.png",
            "byteSize": 3,
            "metadata": {"caption": "a cat"},
        },
    ]
    assert FILE_REF_PART not in str(projected)
    assert project_file_refs(projected) == projected  # idempotent


def test_mf_038_optional_attachment_facts_are_omitted_when_unknown() -> None:
    bare = file_ref_part(part_id="att_2", file_id="fil_2", media_type="text/plain")
    assert project_file_refs(_user(bare))["parts"] == [
        {"type": "attachment", "id": "att_2", "fileId": "fil_2", "mediaType": "text/plain"}
    ]


def test_mf_014_a_malformed_reserved_part_is_never_shown_raw() -> None:
    broken = {"type": FILE_REF_PART, "data": {"nope": 1}}
    assert project_file_refs(_user({"type": "text", "text": "x"}, broken))["parts"] == [
        {"type": "text", "text": "x"}
    ]


def test_mf_039_the_stored_reference_is_provider_neutral() -> None:
    """MF-039: an id and public facts only: no URL, no bytes, no provider keys."""
    assert REF["type"] == FILE_REF_PART
    assert set(REF["data"]) == {"fileId", "mediaType", "filename", "byteSize", "metadata"}
    assert "url" not in str(REF) and "providerReference" not in str(REF)


# -- expansion into model input -----------------------------------------------------


async def test_mf_040_one_reference_expands_into_several_parts_in_order() -> None:
    """MF-040, MF-031: the provider's parts take the reference's place, in order, between
    the message's other parts; the stored messages are not changed."""
    messages = [
        _user({"type": "text", "text": "before"}, REF, {"type": "text", "text": "after"}),
    ]
    before = copy.deepcopy(messages)
    provider = TwoPartProvider()
    converted = await to_model_messages_with_files(
        messages, provider, scope_key="s1", thread_id="thr_1"
    )
    assert converted == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "before"},
                {"type": "text", "text": "<file cat.png>"},
                {
                    "type": "file",
                    "mediaType": "image/png",
                    "data": {"type": "url", "url": "data:image/png;base64,AAA"},
                },
                {"type": "text", "text": "after"},
            ],
        }
    ]
    assert messages == before
    [ref] = provider.refs
    assert (ref.file_id, ref.scope_key, ref.thread_id, ref.part_id) == (
        "fil_1",
        "s1",
        "thr_1",
        "att_1",
    )


async def test_mf_040_a_file_referenced_twice_is_expanded_once() -> None:
    again = {**REF, "id": "att_9"}
    provider = TwoPartProvider()
    converted = await to_model_messages_with_files(
        [_user(REF), _user(again, message_id="u2")], provider, scope_key="s", thread_id="t"
    )
    assert len(provider.refs) == 1
    assert [len(m["content"]) for m in converted] == [2, 2]
    assert converted[0]["content"] is not converted[1]["content"]


async def test_mf_040_without_a_provider_a_reference_is_dropped_like_any_data_part() -> None:
    converted = await to_model_messages_with_files(
        [_user({"type": "text", "text": "hi"}, REF)], None, scope_key="s", thread_id="t"
    )
    assert converted == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


async def test_mf_031_mf_040_the_engine_sends_expanded_files_and_stores_the_reference() -> None:
    """The run loop materializes references in the run's partition before the call; the
    stored user message keeps its reference (MF-039)."""
    model = ScriptedModel(steps=[ScriptedStep.reply("a cat")])
    agent = define_agent("files", instructions="x", model=model)
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="tenant-a", agent_name="files")
    sent = _user({"type": "text", "text": "what is this?"}, REF)
    run_id = store.send(thread_id, copy.deepcopy(sent))
    provider = TwoPartProvider()
    claim = await store.claim_run(run_id, owner="w", lease_seconds=30)
    outcome = await RunEngine(agent=agent, store=store, files=provider).run_episode(claim)

    assert outcome.status == "completed"
    [request] = model.requests
    assert [c["type"] for c in request.messages[-1]["content"]] == ["text", "text", "file"]
    assert provider.refs[0].scope_key == "tenant-a"
    assert store.thread_messages(thread_id)[0]["parts"] == sent["parts"]


async def test_lc_051_hooks_see_the_reference_while_the_model_gets_the_expansion() -> None:
    """LC-051: model context is converted from the stored values with references
    materialized; the LifecycleMessages hooks receive keep the reference."""
    seen: list[list[str]] = []

    async def resolve(input: Any, next: Any) -> Any:
        for message in await input.history.collect():
            seen.append([p["type"] for p in message.parts])
        return await next()

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[{"resolve_model_context": resolve}],
        history=[_user({"type": "text", "text": "see"}, REF, message_id="h1")],
    )
    assert (await h.run(files=TwoPartProvider())).status == "completed"
    assert ["text", FILE_REF_PART] in seen
    [request] = h.model.requests
    first = request.messages[0]["content"]
    assert [c["type"] for c in first] == ["text", "text", "file"]
    assert h.messages()[0]["parts"][1] == REF

"""A hook response's public message metadata is checked like every metadata write (MF-007,
MF-008): ``pai`` is reserved, values are strict JSON and parsed by the agent's message
metadata schema; what streams in ``start`` is what is stored (LC-108)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import ScriptedModel
from pai_agents.lifecycle import AssistantResponse, MetadataSchemas, Respond
from tests.support.engine_harness import harness


class Empty(BaseModel):
    pass


class Label(BaseModel):
    priority: int = 0


def respond(metadata: dict[str, Any]) -> dict[str, Any]:
    response = AssistantResponse(text="canned", metadata=metadata)
    return {"prepare_run": lambda i: Respond(response)}


@pytest.mark.parametrize(
    "metadata",
    [{"pai": {"runId": "forged"}}, {"score": float("nan")}],
    ids=["pai", "nan"],
)
async def test_mf_008_mf_007_response_metadata_pai_or_non_json_fails_the_run(
    metadata: dict[str, Any],
) -> None:
    """MF-008, MF-007: a response authoring ``metadata.pai`` or carrying NaN is refused:
    the run fails, no ``start`` chunk carries it and no assistant message is stored."""
    h = harness([], parts=[respond(metadata)])
    outcome = await h.run()
    assert outcome.status == "failed"
    assert not any("messageMetadata" in c for c in h.sink.chunks())
    assert h.assistant() == []


async def test_mf_007_response_metadata_goes_through_the_message_schema() -> None:
    """MF-007, AD-033, LC-108: with a message metadata schema the response's metadata is
    parsed (``"3"`` becomes ``3``) and the parsed value is both streamed and stored; a value
    the schema refuses fails the run."""
    model = ScriptedModel(steps=[])
    schemas = MetadataSchemas(private=Empty, public=Label)
    h = harness([], parts=[respond({"priority": "3"})], model=model, message_metadata=schemas)
    assert (await h.run()).status == "completed"
    [start] = [c for c in h.sink.chunks() if c["type"] == "start"]
    assert start["messageMetadata"] == {"priority": 3}
    [message] = h.assistant()
    assert message["metadata"] == {"priority": 3}

    bad = harness([], parts=[respond({"priority": "high"})], message_metadata=schemas)
    assert (await bad.run()).status == "failed"
    assert bad.assistant() == []

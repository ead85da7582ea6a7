"""Typed run, thread and message metadata on define_agent (AD-027..AD-033, LC-024/025)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, PlainSerializer, field_validator

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_agents.agent import AgentDefinitionError
from pai_agents.lifecycle import MetadataSchemas
from pai_agents.lifecycle.metadata import MetadataSchemaError
from tests.support.engine_harness import harness


class Empty(BaseModel):
    pass


class Counter(BaseModel):
    count: int = 0
    tags: list[str] = Field(default_factory=list)


class Label(BaseModel):
    label: str = "new"

    @field_validator("label")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()  # canonicalizing, stable on reparse (AD-030)


class Required(BaseModel):
    needed: str


class StrToInt(BaseModel):
    # str -> int: the output is not valid input (AD-030)
    n: Annotated[str, PlainSerializer(lambda v: int(v), return_type=int)] = "1"


PAIR = MetadataSchemas(private=Counter, public=Label)


def test_ad_027_ad_028_define_agent_takes_schema_pairs_that_accept_empty() -> None:
    agent = define_agent(
        "typed",
        instructions="x",
        model=ScriptedModel(steps=[]),
        run_metadata=PAIR,
        thread_metadata=PAIR,
        message_metadata=MetadataSchemas(private=Empty, public=Empty),
    )
    assert agent.run_metadata is PAIR and agent.metadata_schemas.thread is PAIR
    with pytest.raises(MetadataSchemaError):
        MetadataSchemas(private=Required, public=Empty)
    with pytest.raises(AgentDefinitionError):
        define_agent("bad", instructions="x", model=ScriptedModel(steps=[]), run_metadata=Counter)  # type: ignore[arg-type]


def test_ad_029_ad_030_non_json_or_unstable_output_fails_at_definition() -> None:
    class Unstable(BaseModel):
        n: int = 0

        @field_validator("n")
        @classmethod
        def _bump(cls, value: int) -> int:
            return value + 1  # a second parse changes it

    with pytest.raises(MetadataSchemaError):
        MetadataSchemas(private=StrToInt, public=Empty)
    with pytest.raises(MetadataSchemaError):
        MetadataSchemas(private=Unstable, public=Empty)


def test_ad_031_ad_032_each_run_starts_with_fresh_parsed_defaults() -> None:
    first, second = PAIR.initial(), PAIR.initial()
    assert first.private == {"count": 0, "tags": []} and first.public == {"label": "new"}
    first.private["tags"].append("x")
    assert second.private["tags"] == []  # default factories are not shared


def test_ad_033_lc_025_engine_facades_validate_the_complete_merged_object() -> None:
    seen: dict[str, Any] = {}

    async def prepare_run(input: Any) -> None:
        seen["run_initial"] = await input.run.private_metadata.get()
        seen["merged"] = await input.run.private_metadata.merge({"count": 2})
        for name, call in (
            ("run", lambda: input.run.private_metadata.merge({"count": "many"})),
            ("thread", lambda: input.thread.metadata.merge({"label": ["not", "a", "string"]})),
            (
                "message",
                lambda: input.thread.messages.append(
                    role="system", parts=[{"type": "text", "text": "n"}], metadata={"label": 3}
                ),
            ),
        ):
            try:
                await call()
            except ValueError as exc:
                seen[name] = type(exc).__name__
        await input.thread.metadata.merge({"label": "  padded  "})
        seen["thread_public"] = await input.thread.metadata.get()
        await input.thread.private_metadata.merge({"tags": ["a"]})
        seen["thread_private"] = await input.thread.private_metadata.get()

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[{"prepare_run": prepare_run}],
        run_metadata=PAIR,
        thread_metadata=PAIR,
        message_metadata=MetadataSchemas(private=Empty, public=Label),
    )
    outcome = asyncio.run(h.run())
    assert outcome.status == "completed"
    assert seen["run_initial"] == {"count": 0, "tags": []}
    assert seen["merged"] == {"count": 2, "tags": []}
    assert seen["run"] == "InvalidMetadata"
    assert seen["thread"] == "InvalidMetadata"
    assert seen["message"] == "InvalidLifecycleWrite"
    assert seen["thread_public"] == {"label": "padded"}  # the stored value is the parsed one
    assert seen["thread_private"] == {"count": 0, "tags": ["a"]}
    assert h.store.lifecycle.run_bags(h.run_id).private == {"count": 2, "tags": []}

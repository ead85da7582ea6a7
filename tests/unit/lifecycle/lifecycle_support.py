"""Shared builders for lifecycle unit tests: a fake model, requests and hook inputs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents.abort import AbortSignal
from pai_agents.lifecycle import (
    EffectiveModelCall,
    ExecutionInfo,
    LifecycleRun,
    MetadataSchemas,
    ModelStepRequest,
)
from pai_agents.lifecycle.memory import InMemoryLifecycleStore, LeaseRef
from pai_agents.models.base import ModelRequest, ModelSelection, StepStreamPart


@dataclass(eq=False)
class FakeModel:
    """A LanguageModel that records requests and streams fixed parts."""

    name: str = "fake"
    parts: tuple[StepStreamPart, ...] = (
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "hi"},
        {"type": "text-end", "id": "t1"},
        {"type": "finish", "finishReason": "stop", "usage": {}},
    )
    fail_setup: Exception | None = None

    def __post_init__(self) -> None:
        self.requests: list[ModelRequest] = []

    @property
    def provider(self) -> str:
        return self.name

    @property
    def model_id(self) -> str:
        return f"{self.name}-1"

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        self.requests.append(request)
        if self.fail_setup is not None:
            raise self.fail_setup
        for part in self.parts:
            yield dict(part)


class ThreadPrivate(BaseModel):
    cursor: str | None = None
    count: int = 0


class ThreadPublic(BaseModel):
    category: str | None = None
    tags: dict[str, str] = {}


class RunPrivate(BaseModel):
    job: str | None = None


class RunPublic(BaseModel):
    rating: str | None = None


THREAD_METADATA = MetadataSchemas(private=ThreadPrivate, public=ThreadPublic)
RUN_METADATA = MetadataSchemas(private=RunPrivate, public=RunPublic)


def make_request(
    model: Any | None = None,
    *,
    settings: dict[str, Any] | None = None,
    provider_options: dict[str, Any] | None = None,
    tools: tuple[str, ...] = ("search", "lookup", "write"),
    provider_tools: dict[str, Any] | None = None,
    instructions: Any = "Be brief.",
    messages: tuple[dict[str, Any], ...] = (
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ),
    step_index: int = 0,
) -> ModelStepRequest:
    selection = ModelSelection(
        model=model or FakeModel(),
        settings=settings or {},  # type: ignore[typeddict-item]
        provider_options=provider_options or {},
    )
    call = EffectiveModelCall.from_selection(
        selection,
        instructions=instructions,
        messages=messages,
        tools=tools,
        provider_tools=provider_tools,
    )
    return ModelStepRequest.for_step(
        call,
        run_id="run_1",
        thread_id="thr_1",
        step_index=step_index,
        signal=AbortSignal(),
        runtime_context={"user": "u1"},
    )


@dataclass
class World:
    store: InMemoryLifecycleStore
    scope: str
    thread_id: str
    lease: LeaseRef

    def facade(self, *, resolver: bool = False) -> Any:
        return self.store.facade(self.scope, self.thread_id, self.lease, resolver=resolver)

    def run(self, *, operation: str = "send") -> LifecycleRun:
        private, public = self.store.run_metadata_clients(self.lease)
        return LifecycleRun(
            run_id=self.lease.run_id,
            thread_id=self.thread_id,
            initiator="send",
            started_at="2026-01-01T00:00:00Z",
            execution=ExecutionInfo(operation=operation, started_at="2026-01-01T00:00:00Z"),  # type: ignore[arg-type]
            private_metadata=private,
            metadata=public,
        )

    def base(self, **extra: Any) -> dict[str, Any]:
        return {
            "runtime_context": {"user": "u1"},
            "run": self.run(),
            "thread": self.facade(),
            "signal": AbortSignal(),
            **extra,
        }

    def user(self, text: str, **visibility: bool) -> Any:
        return self.store.seed_message(
            self.scope,
            self.thread_id,
            role="user",
            parts=[{"type": "text", "text": text}],
            **visibility,
        )

    def assistant(self, text: str, **visibility: bool) -> Any:
        return self.store.seed_message(
            self.scope,
            self.thread_id,
            role="assistant",
            parts=[{"type": "text", "text": text}],
            **visibility,
        )


@pytest.fixture
def world() -> World:
    store = InMemoryLifecycleStore(
        thread_metadata=THREAD_METADATA,
        run_metadata=RUN_METADATA,
        registered_tools=("search", "lookup"),
        max_page_size=3,
    )
    thread_id = store.create_thread("scope-a")
    lease = store.start_run("scope-a", thread_id)
    return World(store=store, scope="scope-a", thread_id=thread_id, lease=lease)

"""Driving RunEngine with lifecycle hooks on the in-memory store (shared test builders)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from pai_agents import (
    InMemoryThreadStore,
    RecordingSink,
    RunEngine,
    RunOutcome,
    ScriptedModel,
    ScriptedStep,
    define_agent,
    tool,
)
from pai_agents.engine.memory import MemoryMessage, MemoryRun
from pai_agents.lifecycle import LifecycleTrace, compose_lifecycle
from pai_agents.messages.types import UIMessage


class Args(BaseModel):
    q: str = ""


class Answer(BaseModel):
    value: str


executed: list[tuple[str, str]] = []


@tool(input=Args)
def lookup(args: Args) -> str:
    """Look something up."""
    executed.append(("lookup", args.q))
    return f"found {args.q}"


@tool(input=Args, output=Answer)
def typed(args: Args) -> Answer:
    """Typed output."""
    executed.append(("typed", args.q))
    return Answer(value=args.q)


@tool(input=Args)
def boom(args: Args) -> str:
    """Always raises."""
    raise RuntimeError("internal detail 42")


@tool(input=Args, needs_approval=True)
def wire(args: Args) -> str:
    """Needs a person."""
    executed.append(("wire", args.q))
    return "sent"


ALL_TOOLS = (lookup, typed, boom, wire)


def user(text: str, message_id: str = "u1") -> UIMessage:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def text_of(message: UIMessage) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")


@dataclass
class Harness:
    store: InMemoryThreadStore
    thread_id: str
    run_id: str
    model: ScriptedModel
    sink: RecordingSink
    trace: LifecycleTrace
    agent: Any
    log: list[str] = field(default_factory=list)

    async def run(self, **engine: Any) -> RunOutcome:
        claim = await self.store.claim_run(self.run_id, owner="w", lease_seconds=30)
        return await RunEngine(
            agent=self.agent, store=self.store, sink=self.sink, **engine
        ).run_episode(claim)

    def messages(self) -> list[UIMessage]:
        return self.store.thread_messages(self.thread_id)

    def assistant(self) -> list[UIMessage]:
        return [m for m in self.messages() if m["role"] == "assistant"]

    @property
    def row(self) -> MemoryRun:
        return self.store.runs[self.run_id]

    def client_events(self) -> list[dict[str, Any]]:
        return list(self.sink.events)


def harness(
    steps: Iterable[ScriptedStep] = (),
    *,
    parts: Sequence[Any] = (),
    tools: Sequence[Any] = ALL_TOOLS,
    respond: Any = None,
    history: Sequence[UIMessage] = (),
    prompt: str = "hello",
    **agent_options: Any,
) -> Harness:
    """An agent with the given lifecycle ``parts`` (traced) and a sent user message."""
    executed.clear()
    model = ScriptedModel(steps=list(steps), respond=respond)
    trace = LifecycleTrace()
    lifecycle = compose_lifecycle(*parts, trace=trace) if parts else None
    agent_options.setdefault("instructions", "be brief")
    agent = define_agent(
        "lc",
        model=agent_options.pop("model", model),
        tools=tools,
        lifecycle=lifecycle,
        **agent_options,
    )
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name="lc")
    for index, message in enumerate(history):
        store._append(
            MemoryMessage(message=message, thread_id=thread_id, run_id=None, position=index)
        )
    run_id = store.send(thread_id, user(prompt))
    return Harness(
        store=store,
        thread_id=thread_id,
        run_id=run_id,
        model=model,
        sink=RecordingSink(),
        trace=trace,
        agent=agent,
    )


def request_texts(request: Any) -> list[str]:
    """The text of every message of a ModelRequest, in order (``role:text``)."""
    out = []
    for m in request.messages:
        content = m["content"]
        if isinstance(content, str):
            out.append(f"{m['role']}:{content}")
        else:
            out.append(
                f"{m['role']}:"
                + "".join(str(c.get("text", "")) for c in content if c.get("type") == "text")
            )
    return out

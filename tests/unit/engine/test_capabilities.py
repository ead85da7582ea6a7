"""Capabilities (docs/capabilities.md): declared by tools under local aliases, folded by id
into ``definition.capabilities`` (AD-062), bound when the runtime is created (AD-063) and
handed to the tool that declared them, by its aliases."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import pytest
from pydantic import BaseModel

from pai_agents import (
    CapabilityBindingError,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    ToolContext,
    capability,
    capability_factory,
    define_agent,
    tool,
)
from pai_agents.agent import ToolConfig
from pai_agents.engine.memory import InMemoryThreadStore
from pai_agents.engine.runner import RunEngine
from pai_agents.messages.types import UIMessage


@runtime_checkable
class Desk(Protocol):
    def open_ticket(self, title: str) -> str: ...


class Index:
    def search(self, q: str) -> list[str]:
        return [q.upper()]


class FakeDesk:
    def __init__(self, prefix: str = "T") -> None:
        self.prefix = prefix
        self.opened: list[str] = []

    def open_ticket(self, title: str) -> str:
        self.opened.append(title)
        return f"{self.prefix}-{len(self.opened)}"


DESK = capability("tickets", Desk)
INDEX = capability("search.index", Index)


class Args(BaseModel):
    title: str = ""


@tool(input=Args, capabilities={"desk": DESK})
def open_ticket(args: Args, ctx: ToolContext) -> str:
    """Open a ticket."""
    return str(ctx.capabilities["desk"].open_ticket(args.title))


@tool(input=Args, capabilities={"helpdesk": DESK, "index": INDEX})
def triage(args: Args, ctx: ToolContext) -> str:
    """Search, then open a ticket; it sees exactly the capabilities it declared."""
    assert set(ctx.capabilities) == {"helpdesk", "index"}
    hits = ctx.capabilities["index"].search(args.title)
    return str(ctx.capabilities["helpdesk"].open_ticket(hits[0]))


def _agent(*tools: Any, model: Any = None) -> Any:
    return define_agent("caps", instructions="x", model=model or ScriptedModel(), tools=tools)


def test_ad_062_capabilities_are_keyed_by_id_with_aliases_remapped() -> None:
    """AD-062: the fold is by capability id across tools; local aliases disappear, and a
    ToolConfig contributes its inner tool's declarations."""
    agent = _agent(ToolConfig(tool=open_ticket), triage)
    assert agent.capabilities == {"search.index": INDEX, "tickets": DESK}
    assert _agent().capabilities == {}


def test_ad_062_one_id_through_two_objects_is_refused() -> None:
    """AD-062: the same id declared through distinct capability objects (equal ones too)
    raises CapabilityBindingError when the agent is defined."""
    other = capability("tickets", Desk)

    @tool(input=Args, capabilities={"desk": other})
    def also_opens(args: Args) -> str:
        """Another tool declaring 'tickets' again."""
        return ""

    with pytest.raises(CapabilityBindingError, match=r"'tickets'.*different objects"):
        _agent(open_ticket, also_opens)


def test_declarations_are_checked_where_they_are_written() -> None:
    with pytest.raises(CapabilityBindingError, match="capability id"):
        capability("9 bad id", Desk)

    class Plain(Protocol):
        def go(self) -> None: ...

    with pytest.raises(CapabilityBindingError, match="runtime_checkable"):
        capability("plain", Plain)
    with pytest.raises(CapabilityBindingError, match="must come from capability"):
        tool("t", input=Args, execute=lambda a: "", capabilities={"desk": Desk})  # type: ignore[dict-item]
    with pytest.raises(CapabilityBindingError, match="alias"):
        tool("t", input=Args, execute=lambda a: "", capabilities={"not an alias": DESK})


def test_ad_063_a_runtime_requires_a_binding_for_every_capability() -> None:
    """AD-063: creating a runtime without a binding for each required id is refused, as is a
    binding that does not implement the interface; a factory is checked when built."""
    agent = _agent(triage)
    store = InMemoryThreadStore()
    with pytest.raises(CapabilityBindingError, match=r"search\.index: no binding"):
        RunEngine(agent=agent, store=store, capabilities={"tickets": FakeDesk()})
    with pytest.raises(CapabilityBindingError, match="tickets: Index does not implement Desk"):
        RunEngine(
            agent=agent, store=store, capabilities={"tickets": Index(), "search.index": Index()}
        )
    RunEngine(
        agent=agent, store=store, capabilities={"tickets": FakeDesk(), "search.index": Index()}
    )
    RunEngine(agent=_agent(), store=store)  # nothing required, nothing to bind


async def _run(
    agent: Any, bindings: dict[str, Any], *, identity: dict[str, Any] | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name=agent.name)
    user: UIMessage = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    run_id = store.send(thread_id, user)
    claim = await store.claim_run(run_id, owner="w", lease_seconds=30)
    outcome = await RunEngine(agent=agent, store=store, capabilities=bindings).run_episode(claim)
    parts = [p for m in store.thread_messages(thread_id) for p in m["parts"] if p.get("toolCallId")]
    return outcome, parts


def _calls(*names: str) -> ScriptedModel:
    calls = [ScriptedToolCall(name=n, input={"title": "printer"}) for n in names]
    return ScriptedModel(steps=[ScriptedStep(tool_calls=calls), ScriptedStep.reply("done")])


async def test_a_tool_reads_its_bound_capabilities_by_its_own_aliases() -> None:
    desk = FakeDesk()
    agent = _agent(open_ticket, triage, model=_calls("open_ticket", "triage"))
    outcome, parts = await _run(agent, {"tickets": desk, "search.index": Index()})
    assert outcome.status == "completed"
    assert sorted(p["output"] for p in parts) == ["T-1", "T-2"]
    assert sorted(desk.opened) == ["PRINTER", "printer"]


async def test_a_factory_is_built_once_per_episode_and_its_result_checked() -> None:
    built: list[str] = []

    @capability_factory
    def desk_for_thread(behavior: Any) -> FakeDesk:
        built.append(behavior.thread_id)
        return FakeDesk(prefix="F")

    agent = _agent(open_ticket, model=_calls("open_ticket", "open_ticket"))
    outcome, parts = await _run(agent, {"tickets": desk_for_thread})
    assert outcome.status == "completed"
    # One desk for both calls (they run concurrently, so in either order).
    assert sorted(p["output"] for p in parts) == ["F-1", "F-2"]
    assert len(built) == 1

    wrong = capability_factory(lambda behavior: Index())
    agent = _agent(open_ticket, model=_calls("open_ticket"))
    outcome, parts = await _run(agent, {"tickets": wrong})
    assert outcome.status == "failed"
    assert (outcome.error or {}).get("type") == "CapabilityBindingError"
    assert parts == []  # the tool never ran

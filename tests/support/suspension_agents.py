"""An agent whose tool asks a person for data twice (docs/suspensions.md), for the ORM and
worker tests of declared suspensions (tests/integration/test_tool_suspensions*.py).

``collector`` reads the last user text ``ship <order> <path>`` and calls ``ship``, which
suspends for an ``address`` and then a ``confirm`` answer before it ships. It runs in Celery
worker processes too, so what a test counts leaves the process: every entry into ``execute``
appends ``enter`` to ``path`` and the shipment (after the last suspend) appends ``shipped``;
an order id starting with ``slow`` appends ``shipping`` and sleeps before it ships.
After the tool result it answers ``Tool results: <json>``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from pai_agents import (
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    ToolContext,
    define_agent,
    tool,
)
from pai_agents.models.scripted import last_user_text

__all__ = ["collector", "lines"]

SLOW_SECONDS = 20.0


class ShipInput(BaseModel):
    order_id: str
    path: str


class Address(BaseModel):
    street: str = Field(min_length=1)
    city: str = Field(min_length=1)


class Confirm(BaseModel):
    ok: bool


def _append(path: str, line: str) -> None:
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def lines(path: Path) -> list[str]:
    """What the tool wrote to ``path`` (its execution counter)."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@tool(input=ShipInput, suspends={"address": Address, "confirm": Confirm})
def ship(args: ShipInput, ctx: ToolContext) -> dict[str, Any]:
    """Ship an order: asks for the address, then for a confirmation."""
    _append(args.path, "enter")
    address = ctx.answer("address")
    if not isinstance(address, Address):
        return ctx.suspend("address", payload={"prompt": f"Where should {args.order_id} go?"})
    confirm = ctx.answer("confirm")
    if not isinstance(confirm, Confirm):
        return ctx.suspend("confirm", payload={"to": f"{address.street}, {address.city}"})
    if not confirm.ok:
        return ctx.fail("The person did not confirm the shipment.")
    if args.order_id.startswith("slow"):
        _append(args.path, "shipping")
        time.sleep(SLOW_SECONDS)  # long enough for a test to kill the worker here
    _append(args.path, "shipped")  # after the last suspend: at most once per call
    return {"shipped": args.order_id, "to": address.city}


def _collector(request: ModelRequest) -> ScriptedStep:
    last = request.messages[-1] if request.messages else None
    if last is not None and last["role"] == "tool":
        outputs = [p.get("output") for p in last["content"] if p.get("type") == "tool-result"]
        return ScriptedStep(text=f"Tool results: {json.dumps(outputs)}")
    words = last_user_text(request).split()
    if len(words) == 3 and words[0] == "ship":
        return ScriptedStep(
            tool_calls=[
                ScriptedToolCall(name="ship", input={"order_id": words[1], "path": words[2]})
            ]
        )
    return ScriptedStep(text="Say 'ship <order> <path>'.")


collector = define_agent(
    "collector",
    instructions="Suspension test agent.",
    model=ScriptedModel(respond=_collector, record_requests=False),
    tools=[ship],
)

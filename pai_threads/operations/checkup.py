"""A check-up of every registered agent, deeper than ``manage.py check``: the model resolves,
tool and metadata schemas are canonical JSON, tool options name real tools, the price table
parses; optionally one tiny model call per agent proves the provider answers.

The report behind ``manage.py pai_check``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from pai_agents.agent import AgentDefinition
from pai_agents.behavior import AgentBehaviorInput
from pai_agents.json import ensure_strict_json
from pai_agents.models.base import LanguageModel, ModelRequest, ModelSelection
from pai_threads.conf import pai_settings
from pai_threads.execution import registry
from pai_threads.usage import PriceTableError, price_for

__all__ = ["AgentCheckup", "check_agents", "check_prices", "ping_model"]

# What a model resolver sees during a check-up: no user, no thread, no run.
_PROBE = AgentBehaviorInput(
    identity={}, client_data={}, runtime_context=None, thread_id="pai_check", run_id="pai_check"
)


@dataclass(slots=True)
class AgentCheckup:
    """One agent's findings: ``problems`` fail the check, ``notes`` are for information."""

    name: str
    model: str = ""
    tools: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ping: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and (self.ping is None or self.ping.get("ok", False))

    def as_json(self) -> dict[str, Any]:
        return {
            "agent": self.name,
            "ok": self.ok,
            "model": self.model,
            "tools": self.tools,
            "problems": self.problems,
            "notes": self.notes,
            "ping": self.ping,
        }


def _canonical(value: Any, what: str, problems: list[str]) -> None:
    try:
        ensure_strict_json(value, what=what)
    except (TypeError, ValueError) as exc:
        problems.append(f"{what} is not canonical JSON: {exc}")


def _check_schemas(agent: AgentDefinition, report: AgentCheckup) -> None:
    for name, tool in agent.tools.items():
        report.tools.append(name)
        try:
            _canonical(tool.spec(), f"tool {name!r} spec", report.problems)
            if tool.output_model is not None:
                _canonical(
                    tool.output_model.model_json_schema(), f"tool {name!r} output", report.problems
                )
        except Exception as exc:
            report.problems.append(f"tool {name!r} schema fails: {type(exc).__name__}: {exc}")
        if tool.execute is None:
            report.notes.append(f"tool {name!r} is fulfilled by the client")
    for name in agent.tool_configs:
        if name not in agent.tools:
            report.problems.append(f"tool option {name!r} names no registered tool")
    for label in ("identity_schema", "client_data_schema"):
        schema = getattr(agent, label)
        if schema is not None:
            _canonical(schema.model_json_schema(), f"{label}", report.problems)


async def _resolve(agent: AgentDefinition, report: AgentCheckup) -> Any:
    try:
        selection = await agent.resolve_model(_PROBE)
    except Exception as exc:
        report.problems.append(f"model does not resolve: {type(exc).__name__}: {exc}")
        return None
    model = selection.model
    report.model = f"{model.provider}:{model.model_id}"
    if not isinstance(agent.model, ModelSelection | LanguageModel):
        report.notes.append("model chosen per run (checked with an empty identity)")
    try:
        if price_for(model.model_id, model.provider) is None:
            report.notes.append(f"no price for {model.model_id!r} in PAI['MODEL_PRICES']")
    except PriceTableError as exc:
        report.problems.append(str(exc))
    return model


async def ping_model(model: Any, deadline_seconds: float) -> dict[str, Any]:
    """One tiny call: a one-word prompt, one output token, the stream read to its first
    part. Never raises: the outcome says what happened."""
    request = ModelRequest(
        messages=[{"role": "user", "content": [{"type": "text", "text": "Say OK."}]}],
        settings={"maxOutputTokens": 1},
    )
    started = time.perf_counter()
    stream = model.stream(request)
    try:
        async with asyncio.timeout(deadline_seconds):
            first = await anext(aiter(stream), None)
    except TimeoutError:
        return {"ok": False, "error": f"no answer within {deadline_seconds:g}s"}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        with contextlib.suppress(Exception):
            await stream.aclose()
    took = round((time.perf_counter() - started) * 1000, 1)
    if first is None:
        return {"ok": False, "error": "the stream ended without a part", "ms": took}
    return {"ok": True, "ms": took, "first": first.get("type")}


async def _check_agent(agent: AgentDefinition, ping: bool, deadline_seconds: float) -> AgentCheckup:
    report = AgentCheckup(name=agent.name)
    _check_schemas(agent, report)
    model = await _resolve(agent, report)
    if ping and model is not None:
        report.ping = await ping_model(model, deadline_seconds)
    close = getattr(model, "aclose", None)
    if close is not None:  # its HTTP client belongs to this event loop, which ends here
        with contextlib.suppress(Exception):
            await close()
    return report


def check_prices() -> list[str]:
    """Problems of ``PAI["MODEL_PRICES"]``, one per bad entry."""
    table = pai_settings.MODEL_PRICES
    if not isinstance(table, dict):
        return ["PAI['MODEL_PRICES'] must be a dict of model id -> prices"]
    problems = []
    for key in table:
        try:
            price_for(key)
        except PriceTableError as exc:
            problems.append(str(exc))
    return problems


def check_agents(*, ping: bool = False, timeout: float = 20.0) -> list[AgentCheckup]:
    """A check-up of every agent in ``PAI["AGENTS"]`` (``ping``: one model call each)."""

    async def every() -> list[AgentCheckup]:
        return [await _check_agent(agent, ping, timeout) for agent in registry.agents().values()]

    return asyncio.run(every())

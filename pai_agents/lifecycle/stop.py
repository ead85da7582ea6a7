"""Stop conditions (peer parity with the AI SDK's ``stopWhen``, TH-015).

``stop_when(*conditions)`` is a lifecycle part whose after_step completes the run as soon
as any condition holds; the agent's (or prepare_run's) step ceiling still applies, so the
loop ends when either one does. Compose it with other parts::

    lifecycle = compose_lifecycle(policy, stop_when(has_tool_call("final_answer")))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

from pai_agents._callables import call_user
from pai_agents.lifecycle.hooks import AgentLifecycle
from pai_agents.lifecycle.inputs import AfterStepInput
from pai_agents.lifecycle.results import Complete

__all__ = ["StopCondition", "StopWhen", "has_tool_call", "step_count_is", "stop_when"]

StopCondition: TypeAlias = Callable[[AfterStepInput], "bool | Awaitable[bool]"]


def has_tool_call(*names: str) -> StopCondition:
    """Holds once the finished step called one of the named tools."""
    wanted = frozenset(names)

    def condition(input: AfterStepInput) -> bool:
        return any(call.tool_name in wanted for call in input.step.tool_calls)

    condition.__name__ = f"has_tool_call({', '.join(names)})"
    return condition


def step_count_is(count: int) -> StopCondition:
    """Holds once ``count`` model steps of this execution finished (0-based index + 1)."""

    def condition(input: AfterStepInput) -> bool:
        return input.step.index + 1 >= count

    condition.__name__ = f"step_count_is({count})"
    return condition


class StopWhen(AgentLifecycle):
    def __init__(self, conditions: tuple[StopCondition, ...], *, name: str = "stop_when") -> None:
        if not conditions:
            raise ValueError("stop_when needs at least one condition")
        self.conditions = conditions
        self.name = name

    async def after_step(self, input: AfterStepInput) -> Complete | None:
        for condition in self.conditions:
            if await call_user(condition, input):
                return Complete(reason=f"stop_when:{getattr(condition, '__name__', 'condition')}")
        return None


def stop_when(*conditions: StopCondition, name: str = "stop_when") -> StopWhen:
    """A lifecycle part completing the run when any condition holds after a step."""
    return StopWhen(conditions, name=name)

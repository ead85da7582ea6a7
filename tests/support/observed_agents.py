"""Agents for tests/integration/test_observability.py: a tool call, a failing tool (a
warning with a traceback), private metadata holding a secret, and the model's usage."""

from __future__ import annotations

from typing import Any

from pai_agents import define_agent, tool
from pai_agents.lifecycle import AfterStepInput, AgentLifecycle
from pai_agents.models.base import ModelRequest
from pai_agents.models.scripted import ScriptedModel, ScriptedStep, ScriptedToolCall
from tests.support.agents import AddInput, add

SECRET = "s3cr3t-private-value"


@tool(input=AddInput)
def explode(args: AddInput) -> int:
    """Always raises."""
    raise RuntimeError("exploded")  # logged with its traceback, for operators


class KeepsASecret(AgentLifecycle):
    async def after_step(self, input: AfterStepInput) -> None:
        await input.run.private_metadata.merge({"token": SECRET})


def _respond(request: ModelRequest) -> ScriptedStep:
    last: dict[str, Any] = request.messages[-1] if request.messages else {"role": "user"}
    if last["role"] == "tool":
        return ScriptedStep(text="Done.", usage={"inputTokens": 30, "outputTokens": 3})
    return ScriptedStep(
        text="Adding.",
        usage={"inputTokens": 12, "outputTokens": 5},
        tool_calls=[
            ScriptedToolCall(name="add", input={"a": 2, "b": 40}),
            ScriptedToolCall(name="explode", input={"a": 1, "b": 2}),
        ],
    )


observed = define_agent(
    "observed",
    instructions="Add.",
    model=ScriptedModel(respond=_respond, record_requests=False),
    tools=[add, explode],
    lifecycle=KeepsASecret(),
)

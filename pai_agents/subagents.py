"""Sub-agents: an agent used as another agent's tool (docs/subagents.md).

``subagent("searcher", description=...)`` is a tool whose ``ToolInfo.source`` is
``"subagent"`` (LC-132). Calling it suspends the call with the built-in kind ``subagent``:
the store writes the pending action, the child's thread, its user message and its queued
run in the transaction that makes the parent wait, and the runtime (never a person) answers
the action when the child run ends. The parent's call then re-enters ``execute``, which
turns the child's outcome into the call's result: the child's final text, or a
model-visible error when it failed or was cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from pai_agents.json import JsonValue
from pai_agents.suspensions import Suspend
from pai_agents.tools import Tool, ToolContext, ToolError

__all__ = [
    "SUBAGENT",
    "SubagentOutcome",
    "SubagentTask",
    "SubagentTool",
    "ThreadMode",
    "subagent",
]

# The suspension kind (and name) of a sub-agent call: answered by the runtime only.
SUBAGENT = "subagent"

ThreadMode = Literal["hidden", "own"]


class SubagentTask(BaseModel):
    """The default input: one task, which becomes the child's user message."""

    task: str = Field(
        min_length=1,
        max_length=50_000,
        description="What the sub-agent should do, stated in full: it sees nothing else.",
    )


class SubagentOutcome(BaseModel):
    """How the child run ended, as the runtime stores it on the answered action."""

    status: Literal["completed", "failed", "cancelled", "blocked"]
    text: str = ""
    thread_id: str = ""
    run_id: str = ""
    usage: dict[str, Any] = Field(default_factory=dict)
    error: str = ""


def _default_task(args: BaseModel) -> str:
    task = getattr(args, "task", None)
    if isinstance(task, str):
        return task
    return args.model_dump_json(indent=2)


@dataclass(frozen=True, kw_only=True)
class SubagentTool(Tool):
    """A tool that runs another agent as a durable child run (source ``"subagent"``)."""

    agent_name: str = ""
    # The child's definition when one was passed (registered with the site's agents).
    agent: Any = field(default=None, hash=False, repr=False, compare=False)
    thread: ThreadMode = "hidden"
    render_task: Callable[[BaseModel], str] = field(
        default=_default_task, hash=False, repr=False, compare=False
    )

    @property
    def resumes_with_answers(self) -> bool:
        return True

    def start(self, args: BaseModel) -> Suspend:
        """The suspension that asks the runtime to start the child."""
        task = self.render_task(args)
        if not isinstance(task, str) or not task.strip():
            raise ToolError(f"tool {self.name}: the task for sub-agent {self.agent_name} is empty")
        payload: dict[str, JsonValue] = {
            "agent": self.agent_name,
            "task": task,
            "thread": self.thread,
        }
        return Suspend(name=SUBAGENT, payload=payload)


def _finish(outcome: Mapping[str, Any]) -> JsonValue:
    """The call's result from the child's outcome; ToolError (model-visible) unless it
    completed."""
    parsed = SubagentOutcome.model_validate(outcome)
    if parsed.status == "completed":
        return {"text": parsed.text, "threadId": parsed.thread_id, "runId": parsed.run_id}
    if parsed.status == "cancelled":
        raise ToolError("sub-agent cancelled")
    raise ToolError(f"sub-agent {parsed.status}: {parsed.error or 'no result'}")


def subagent(
    agent: Any,
    *,
    description: str,
    name: str | None = None,
    input_model: type[BaseModel] = SubagentTask,
    render_task: Callable[[BaseModel], str] | None = None,
    thread: ThreadMode = "hidden",
    needs_approval: bool = False,
) -> SubagentTool:
    """A tool that hands a task to ``agent`` (a registered agent's name, or its
    ``AgentDefinition``, which the site then registers too).

    ``thread="hidden"``: the child runs on a thread linked to the parent run, never listed;
    ``"own"``: a normal thread of the same scope, listed, which a person may continue.
    ``render_task`` turns a custom ``input_model`` into the child's user message."""
    agent_name = agent if isinstance(agent, str) else getattr(agent, "name", None)
    if not isinstance(agent_name, str) or not agent_name:
        raise TypeError("subagent() needs an agent name or an AgentDefinition")
    if thread not in ("hidden", "own"):
        raise ValueError(f"subagent {agent_name}: thread must be 'hidden' or 'own'")
    if input_model is not SubagentTask and render_task is None:
        raise ValueError(f"subagent {agent_name}: a custom input_model needs render_task")

    async def execute(args: BaseModel, ctx: ToolContext) -> JsonValue | Suspend:
        entry = ctx.entry
        if entry is not None and getattr(entry, "suspension", None) == SUBAGENT:
            resume = getattr(entry, "resume", None)
            return _finish(resume if isinstance(resume, Mapping) else {"status": "failed"})
        return tool.start(args)

    tool = SubagentTool(
        name=name or agent_name,
        description=description,
        input_model=input_model,
        execute=execute,
        needs_approval=needs_approval,
        # Re-running execute only re-reads the stored outcome (the child is started once,
        # by the store): safe after a crash.
        idempotent=True,
        agent_name=agent_name,
        agent=None if isinstance(agent, str) else agent,
        thread=thread,
        render_task=render_task or _default_task,
        _pass_context=True,
    )
    return tool

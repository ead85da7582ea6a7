"""An agent with commands (docs/commands.md), for the in-process and daphne command tests.

``commander`` has exposed commands that answer (``export_transcript``), write to the thread
through the facade (``add_note``, ``mark_resolved``), start runs with and without a message
(``summarise``, ``nudge``), refuse (``refuse``) and break (``broken``), a server-only one
(``purge``), and one that needs a bound capability (``what_time``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from pai_agents import (
    AgentBehaviorInput,
    CommandContext,
    CommandError,
    CommandRun,
    ScriptedModel,
    ScriptedStep,
    capability,
    command,
    define_agent,
)
from pai_agents.lifecycle import MetadataSchemas

__all__ = ["RUN_METADATA", "commander", "office_clock"]


class ThreadPublic(BaseModel):
    resolved: bool = False


class ThreadPrivate(BaseModel):
    resolved_by: str = ""


class RunPublic(BaseModel):
    topic: str = ""


class RunPrivate(BaseModel):
    pass


THREAD_METADATA = MetadataSchemas(private=ThreadPrivate, public=ThreadPublic)
RUN_METADATA = MetadataSchemas(private=RunPrivate, public=RunPublic)


class Clock:
    def now(self) -> str:
        return "12:00"


CLOCK = capability("clock", Clock)
office_clock = Clock()


class ExportInput(BaseModel):
    format: Literal["markdown", "json"] = "markdown"


class Export(BaseModel):
    count: int
    text: str


class NoteInput(BaseModel):
    text: str = Field(min_length=1, max_length=200)


class SummaryInput(BaseModel):
    words: int = Field(default=20, ge=1, le=100)


class Empty(BaseModel):
    pass


def _text(message: Any) -> str:
    return " ".join(p.get("text", "") for p in message.parts if p.get("type") == "text")


@command(exposed=True)
async def export_transcript(args: ExportInput, ctx: CommandContext) -> Export:
    """Export the thread as text."""
    page = await ctx.thread.messages.list(view="transcript")
    lines = [f"{m.role}: {_text(m)}" for m in page.items]
    joined = "\n".join(f"- {line}" for line in lines) if args.format == "markdown" else lines
    return Export(count=len(lines), text=str(joined))


@command(exposed=True)
async def add_note(args: NoteInput, ctx: CommandContext) -> dict[str, str]:
    """Append a note to the transcript."""
    note = await ctx.thread.messages.append(
        role="assistant", parts=[{"type": "text", "text": f"Note: {args.text}"}]
    )
    return {"messageId": note.id}


@command(exposed=True)
async def mark_resolved(args: Empty, ctx: CommandContext) -> dict[str, bool]:
    """Mark the thread resolved (public) and record by whom (private), in one commit."""

    def both(tx: Any) -> None:
        tx.metadata.merge({"resolved": True})
        tx.private_metadata.merge({"resolved_by": str(ctx.identity.get("userId", ""))})

    await ctx.thread.mutate(both)
    return {"resolved": True}


@command(exposed=True, starts_run=True, run_metadata=RUN_METADATA)
def summarise(args: SummaryInput, ctx: CommandContext) -> CommandRun:
    """Summarise the conversation so far (a run)."""
    return CommandRun(message=f"Summarise the conversation in {args.words} words.")


@command(exposed=True, starts_run=True)
def nudge(args: Empty, ctx: CommandContext) -> CommandRun:
    """Start a run without a user message."""
    return CommandRun()


@command(exposed=True)
def refuse(args: Empty, ctx: CommandContext) -> None:
    """Always refuses."""
    raise CommandError("There is nothing to export yet.")


@command(exposed=True)
def broken(args: Empty, ctx: CommandContext) -> None:
    """Always breaks."""
    raise RuntimeError("secret server detail")


@command
def purge(args: Empty, ctx: CommandContext) -> dict[str, str]:
    """Server-only: never reachable from a client."""
    return {"purged": ctx.thread_id}


@command(exposed=True, capabilities={"wall": CLOCK})
def what_time(args: Empty, ctx: CommandContext) -> dict[str, str]:
    """The time on the bound clock."""
    return {"time": ctx.capabilities["wall"].now()}


def _model(behavior: AgentBehaviorInput) -> ScriptedModel:
    return ScriptedModel(steps=[ScriptedStep.reply("Here is the summary.")])


commander = define_agent(
    "commander",
    instructions="You answer briefly.",
    model=_model,
    thread_metadata=THREAD_METADATA,
    run_metadata=RUN_METADATA,
    commands=[
        export_transcript,
        add_note,
        mark_resolved,
        summarise,
        nudge,
        refuse,
        broken,
        purge,
        what_time,
    ],
)

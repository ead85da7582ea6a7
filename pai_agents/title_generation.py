"""Calling a thread-title generator: the custom one, or the default model call (AD-046..AD-049).

The default call sends the conversation as plain text in one user message, after the title
instructions: tool calls appear by name only, so the request needs no tool definitions and
suits any provider. It carries no model settings or provider options (AD-046).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pai_agents._callables import call_user
from pai_agents.agent import AgentDefinition, instructions_split
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import ModelRequest
from pai_agents.side_models import bounded_request, complete_line, first_line
from pai_agents.titles import ThreadTitleInput, ThreadTitles

__all__ = [
    "MAX_TITLE_LENGTH",
    "clean_title",
    "generate_title",
    "normalize_title",
    "title_request",
    "transcript_text",
]

MAX_TITLE_LENGTH = 200
_MAX_MESSAGE_CHARS = 1_000
_MAX_TRANSCRIPT_CHARS = 8_000
_ROLES = {"user": "User", "assistant": "Assistant", "system": "System"}


async def generate_title(
    agent: AgentDefinition, config: ThreadTitles, title_input: ThreadTitleInput
) -> str | None:
    """The new title, or None to leave the title unchanged (AD-049).

    A custom generator is the only thing called when set (AD-048); otherwise the
    instructions are resolved for this call (AD-047) and the title model answers (AD-046).
    """
    if config.generator is not None:
        return normalize_title(await call_user(config.generator, title_input))
    model = await config.resolve_model(agent, title_input.behavior())
    instructions = await config.resolve_instructions(title_input, agent=agent.name)
    request = bounded_request(
        title_request(instructions, title_input.messages), config.max_output_tokens
    )
    return clean_title(
        await complete_line(model, request, signal=title_input.signal, label="title")
    )


def title_request(instructions: Any, messages: Sequence[UIMessage]) -> ModelRequest:
    """Instructions first (as the engine places them), then the conversation as text."""
    system, leading = instructions_split(instructions)
    conversation = {
        "role": "user",
        "content": [{"type": "text", "text": transcript_text(messages)}],
    }
    return ModelRequest(system=system, messages=[*leading, conversation])


def transcript_text(messages: Sequence[UIMessage]) -> str:
    """``User: ...`` / ``Assistant: ...`` lines, the newest kept when it is long."""
    lines: list[str] = []
    for message in messages:
        role = _ROLES.get(str(message.get("role")), str(message.get("role")))
        pieces: list[str] = []
        for part in message.get("parts") or ():
            kind = str(part.get("type", ""))
            if kind == "text" and part.get("text"):
                pieces.append(" ".join(str(part["text"]).split()))
            elif kind.startswith("tool-") or kind == "dynamic-tool":
                name = part.get("toolName") or kind.removeprefix("tool-")
                pieces.append(f"[used the {name} tool]")
        text = " ".join(pieces)
        if text:
            lines.append(f"{role}: {text[:_MAX_MESSAGE_CHARS]}")
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line) + 1
        if kept and size > _MAX_TRANSCRIPT_CHARS:
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def normalize_title(value: object) -> str | None:
    """Whitespace folded and cut to the column's length, as a rename stores it; None for
    None or an empty result (AD-049)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"a title generator returns a string or None, not {type(value).__name__}")
    title = " ".join(value.split())[:MAX_TITLE_LENGTH].strip()
    return title or None


def clean_title(text: str | None) -> str | None:
    """A model's answer as a title: its first non-empty line, without a ``Title:`` label,
    wrapping quotes or final punctuation."""
    return normalize_title(first_line(text, label="title"))

"""What a step spent when its provider did not say: an estimate, marked as one.

A provider reports usage in its stream's last part, so a step that is cancelled, fails or is
retried mid-stream usually has none. Tokens were spent all the same; the stored usage then
holds an estimate (about four characters a token, the common rule of thumb for English
text and JSON) with ``estimated: true``, instead of ``{}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pai_agents.messages.types import UIMessage
from pai_agents.models.base import Usage

__all__ = ["estimate_tokens", "estimated_usage", "spent_usage"]

_CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return -(-len(text) // _CHARS_PER_TOKEN) if text else 0


def _output_text(message: UIMessage) -> str:
    pieces: list[str] = []
    for part in message.get("parts", ()):
        kind = str(part.get("type", ""))
        if kind in ("text", "reasoning"):
            pieces.append(str(part.get("text", "")))
        elif kind == "dynamic-tool" or kind.startswith("tool-"):
            value = part.get("input")
            pieces.append(value if isinstance(value, str) else json.dumps(value, default=str))
    return "".join(pieces)


def estimated_usage(model_messages: Sequence[Any] | None, message: UIMessage) -> Usage:
    """Estimated usage of an attempt that streamed ``message`` (so far) for a request of
    ``model_messages``; ``{}`` when it streamed nothing (a refused request costs nothing)."""
    output = estimate_tokens(_output_text(message))
    if output == 0:
        return {}
    prompt = estimate_tokens(json.dumps(list(model_messages or ()), default=str))
    return {
        "inputTokens": prompt,
        "outputTokens": output,
        "totalTokens": prompt + output,
        "estimated": True,
    }


def spent_usage(reported: Usage, model_messages: Sequence[Any] | None, message: UIMessage) -> Usage:
    """The provider's usage when it sent any, else the estimate."""
    if reported:
        return reported
    return estimated_usage(model_messages, message)

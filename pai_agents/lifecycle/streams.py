"""Step streams around lifecycle hooks: results of model calls, synthetic responses, aborts.

Streams are async iterators of :data:`~pai_agents.models.base.StepStreamPart` dicts.
Hooks see the canonical grammar (:func:`canonical_step_stream`): the provider's parts with
the AI SDK's high-level field names where they differ. A hook response (prepare_run /
prepare_model_step ``respond`` or ``block``, an abort ``replacement``) becomes a synthetic
step stream so it passes through the same canonical output policy, transform_step_stream,
as model output (LC-111).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from pai_agents.ids import new_id
from pai_agents.lifecycle.results import AssistantResponse
from pai_agents.models.base import StepStreamPart

__all__ = [
    "ModelStepStreamResult",
    "StepAborted",
    "abort_step",
    "aclose_stream",
    "canonical_part",
    "canonical_step_stream",
    "iterate",
    "synthetic_step_stream",
]


@dataclass(frozen=True, kw_only=True)
class ModelStepStreamResult:
    """What around_model_call returns: the step's stream (not yet consumed, LC-095)."""

    stream: AsyncIterator[StepStreamPart]


class StepAborted(Exception):
    """A controlled policy abort raised by ``abort()`` in transform_step_stream (LC-116).

    Distinct from any other exception, which is a runtime failure (LC-119).
    """

    def __init__(
        self,
        reason: str,
        *,
        outcome: Literal["blocked", "failed"] = "blocked",
        message: str | None = None,
        replacement: AssistantResponse | str | None = None,
    ) -> None:
        super().__init__(reason)
        if outcome not in ("blocked", "failed"):
            raise ValueError(f"abort outcome must be blocked or failed, not {outcome!r}")
        self.reason = reason
        self.outcome: Literal["blocked", "failed"] = outcome
        self.message = message
        self.replacement = (
            AssistantResponse(text=replacement) if isinstance(replacement, str) else replacement
        )


async def abort_step(
    reason: str,
    *,
    outcome: Literal["blocked", "failed"] = "blocked",
    message: str | None = None,
    replacement: AssistantResponse | str | None = None,
) -> NoReturn:
    """The default ``abort`` of a TransformStepStreamInput: raises :class:`StepAborted`."""
    raise StepAborted(reason, outcome=outcome, message=message, replacement=replacement)


async def iterate(parts: Sequence[StepStreamPart]) -> AsyncIterator[StepStreamPart]:
    """An async stream over ``parts`` (tests, cached model calls)."""
    for part in parts:
        yield dict(part)


def canonical_part(part: StepStreamPart) -> StepStreamPart:
    """One provider part in the canonical grammar transform_step_stream sees (LC-104).

    * ``reasoning-delta`` carries its fragment in ``text`` (providers send ``delta``);
      ``tool-input-delta`` and ``text-delta`` keep ``delta``.
    * A provider's ``tool-result`` (``result``, ``isError``) becomes ``tool-result`` with
      ``output``, or ``tool-error`` with ``error``, as in the AI SDK's stream.

    Canonical parts pass unchanged, so applying it twice (a cached stream) is harmless.
    """
    kind = part.get("type")
    if kind == "reasoning-delta" and "delta" in part and "text" not in part:
        canonical = {k: v for k, v in part.items() if k != "delta"}
        canonical["text"] = part["delta"]
        return canonical
    if kind == "tool-result" and "result" in part and "output" not in part:
        canonical = {k: v for k, v in part.items() if k not in ("result", "isError")}
        if part.get("isError"):
            canonical["type"] = "tool-error"
            canonical["error"] = part["result"]
        else:
            canonical["output"] = part["result"]
        return canonical
    return part


async def canonical_step_stream(
    stream: AsyncIterator[StepStreamPart],
) -> AsyncIterator[StepStreamPart]:
    """``stream`` in the canonical grammar (:func:`canonical_part`), part by part; closing
    it closes ``stream``."""
    try:
        async for part in stream:
            yield canonical_part(part)
    finally:
        await aclose_stream(stream)


async def aclose_stream(stream: AsyncIterator[StepStreamPart]) -> None:
    """Close ``stream`` when it can be closed (an async generator): a wrapper that stops
    early must close what it wraps, or the model's generator (and its provider
    connection) stays suspended until garbage collection."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


def synthetic_step_stream(
    response: AssistantResponse, *, text_id: str | None = None, finish_reason: str = "stop"
) -> AsyncIterator[StepStreamPart]:
    """The step stream of a hook-authored response: every text chunk carries an id (LC-103).

    Non-text parts of the response are emitted as ``{"type": "part", "part": ...}`` for the
    engine to append after the text; a transform sees them and may drop or rewrite them.
    """
    parts: list[StepStreamPart] = []
    if response.text is not None:
        block = text_id or new_id("txt")
        parts += [
            {"type": "text-start", "id": block},
            {"type": "text-delta", "id": block, "delta": response.text},
            {"type": "text-end", "id": block},
        ]
    parts += [{"type": "part", "part": dict(p)} for p in response.parts]
    finish: dict[str, Any] = {"type": "finish", "finishReason": finish_reason, "usage": {}}
    parts.append(finish)
    return iterate(parts)

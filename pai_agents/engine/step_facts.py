"""What a step's stream says about the call beside its content (TH-039, LC-143).

The translator keeps the normalized finish reason, usage and response metadata; this keeps
the rest after_step exposes: the provider's raw finish reason, its ``providerMetadata``
(the finish part's), and the call warnings of its ``stream-start`` part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pai_agents.engine.step_stream import StepTranslator
from pai_agents.engine.store import StepRecord
from pai_agents.models.base import StepStreamPart, Usage

__all__ = ["StepFacts", "StepReport", "max_steps_reached"]


@dataclass
class StepFacts:
    """Folded from the step's stream parts, one attempt at a time."""

    raw_finish_reason: str | None = None
    provider_metadata: dict[str, Any] | None = None
    warnings: list[Any] = field(default_factory=list)
    # Retries of this step after transient provider faults (model_retry.py).
    retries: int = 0

    def observe(self, part: StepStreamPart) -> None:
        kind = part.get("type")
        if kind == "finish":
            raw = part.get("rawFinishReason")
            self.raw_finish_reason = raw if isinstance(raw, str) else None
            metadata = part.get("providerMetadata")
            if isinstance(metadata, Mapping) and metadata:
                self.provider_metadata = dict(metadata)
        elif kind == "stream-start":
            warnings = part.get("warnings")
            if isinstance(warnings, list | tuple):
                self.warnings.extend(warnings)

    def restart(self) -> None:
        """A retried attempt starts over (its retry count stays)."""
        self.raw_finish_reason = None
        self.provider_metadata = None
        self.warnings.clear()


@dataclass(frozen=True, kw_only=True)
class StepReport:
    """A streamed step as the code after it reads it: the translator (finish reason, calls,
    response metadata), the stream's other facts, the step's usage (retried attempts
    included) and its request summary (the Step row's ``request``)."""

    translator: StepTranslator
    facts: StepFacts
    usage: Usage
    request: Mapping[str, Any]

    @property
    def finish_reason(self) -> str:
        return self.translator.finish_reason

    def request_metadata(self) -> dict[str, Any]:
        """The request half of the summary (what was asked, not what came back)."""
        return {k: v for k, v in self.request.items() if k not in _RESPONSE_KEYS}


_RESPONSE_KEYS = frozenset({"response", "durationMs", "rawFinishReason", "retries"})


def max_steps_reached(record: StepRecord) -> StepRecord:
    """The step that ended the run because the step budget (``max_steps``) was spent: its
    diagnostics say so (``maxStepsReached``), so the run does not end silently
    ``completed`` with work left."""
    return replace(record, request={**record.request, "maxStepsReached": True})

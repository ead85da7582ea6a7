"""PAI's transcript as ``useChat`` holds it: one assistant message per run, not per step.

PAI stores one assistant message per model step (its own id, usage, diagnostics, recovery
boundary). The AI SDK's ``Chat`` appends everything one response streams to one assistant
message, as ``streamText`` does for a multi-step call: steps separated by ``step-start``
parts. The SSE endpoint therefore streams a run as one client message
(:class:`pai_threads.events.ui_stream.UIStream` in one-message mode), and this module gives
the same view of stored messages, for the initial ``messages`` of ``useChat``
(``GET /api/pai/ai-sdk/chat/<id>/messages``):

* consecutive assistant messages of one run become one message: the first step's id, the
  steps' parts in order, the steps' metadata merged in order as the SDK merges
  ``message-metadata`` (``metadata.pai`` is then the last step's), plus
  ``metadata.pai.messageIds``, the stored ids of the steps;
* a user message steered into a run between its steps stays inside that run's message, as
  the SDK's ``steering-message`` part (the stream sends it as that chunk), where
  ``convertToModelMessages`` keeps it as a user turn;
* the open message of a run still streaming is left out: ``resumeStream`` (``GET
  .../stream``) brings it, replayed onto the run's committed steps;
* other messages are unchanged.

docs/ai-sdk.md has the mapping and what it means for regenerate, approvals and client tools.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pai_agents.messages.reducer import merge_metadata
from pai_threads.events.ui_stream import is_steering, steering_part, step_metadata

__all__ = ["chat_messages", "run_of"]


def run_of(message: dict[str, Any]) -> str | None:
    pai = (message.get("metadata") or {}).get("pai") or {}
    run_id = pai.get("runId")
    return str(run_id) if run_id else None


def _status(message: dict[str, Any]) -> str | None:
    return ((message.get("metadata") or {}).get("pai") or {}).get("status")


def chat_messages(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Projected stored messages (oldest first) as useChat's messages."""
    out: list[dict[str, Any]] = []
    group_run: str | None = None
    for message in messages:
        if group_run is not None and is_steering(message, group_run):
            # Steered between the run's steps: stays inside its one message, as streamed.
            out[-1]["parts"] = [*out[-1]["parts"], steering_part(message)]
            continue
        if message.get("role") != "assistant":
            out.append(message)
            group_run = None
            continue
        if _status(message) == "open":
            continue  # the resume stream brings it
        run_id = run_of(message)
        if run_id is not None and run_id == group_run:
            current = out[-1]
            ids = [*current["metadata"]["pai"]["messageIds"], str(message["id"])]
            current["parts"] = [*current["parts"], *message.get("parts", [])]
            current["metadata"] = merge_metadata(current["metadata"], step_metadata(message, ids))
            continue
        out.append(
            {
                **message,
                "metadata": step_metadata(message, [str(message["id"])]),
                "parts": list(message.get("parts", [])),
            }
        )
        group_run = run_id
    return out

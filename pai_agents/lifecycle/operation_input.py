"""The operation input prepare_run receives (LC-069).

The seeds pass prepare_run "the operation input that created or resumed this run". Here
that is an :class:`OperationInput`: which operation, the run's validated client data, the
user message a send appended, and, for a resume, the answers that resumed it (the waiting
step's tool parts with an approval response or a submitted result, and those whose declared
suspension, or sub-agent call, was answered: docs/suspensions.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pai_agents.lifecycle.facade import LifecycleMessage
from pai_agents.lifecycle.suspensions import SuspensionEpisode

__all__ = ["OperationInput", "resume_answers"]


@dataclass(frozen=True, kw_only=True)
class OperationInput:
    """What the operation that started this episode was given."""

    operation: Literal["send", "trigger", "regenerate", "resume"]
    client_data: Mapping[str, Any] = field(default_factory=dict)
    # send: the user message it appended (also ``latest_user_message``).
    message: LifecycleMessage | None = None
    # resume: the tool parts answered since the run waited, as stored (approval responses,
    # client-submitted or manually fulfilled results). A call whose declared suspension
    # (or sub-agent run) was answered keeps its stored part (``input-available``: the tool
    # has not run yet) with two more keys: ``suspension`` (its name) and ``answer`` (the
    # submitted answer; a sub-agent's outcome).
    answers: tuple[Mapping[str, Any], ...] = ()


def resume_answers(
    message: Mapping[str, Any] | None,
    client_tools: frozenset[str],
    history: Mapping[str, Sequence[SuspensionEpisode]] | None = None,
) -> tuple[Mapping[str, Any], ...]:
    """The answered tool parts of the waiting step's ``message``: approval responses,
    results of ``client_tools`` (tools the runtime does not execute), and calls whose
    latest episode in ``history`` is an answered input or sub-agent suspension."""
    answers: list[Mapping[str, Any]] = []
    history = history or {}
    for part in (message or {}).get("parts") or ():
        kind = str(part.get("type", ""))
        name = part.get("toolName") if kind == "dynamic-tool" else kind.removeprefix("tool-")
        if not kind.startswith(("tool-", "dynamic-tool")) or part.get("providerExecuted"):
            continue
        state = part.get("state")
        if state == "approval-responded" or (
            state in ("output-available", "output-error") and name in client_tools
        ):
            answers.append(dict(part))
        elif state == "input-available":
            episodes = history.get(str(part.get("toolCallId")), ())
            latest = episodes[-1] if episodes else None
            if (
                latest is not None
                and latest.kind in ("input", "subagent")
                and latest.status == "submitted"
            ):
                answer = (latest.resolution or {}).get("answer")
                answers.append({**part, "suspension": latest.name, "answer": answer})
    return tuple(answers)

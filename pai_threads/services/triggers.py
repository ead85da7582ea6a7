"""Triggers: runs started by trusted server code without a user message (e.g. a schedule)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from pai_agents.agent import InvalidAgentInput
from pai_threads.errors import InvalidInput, ThreadBusy
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Run
from pai_threads.services.input_guard import check_json
from pai_threads.services.threads import get_thread, lock_existing
from pai_threads.store.admission import dispatch_after_commit, new_run

__all__ = ["trigger"]


def trigger(
    identity: Identity,
    thread_id: str,
    *,
    client_data: Mapping[str, Any] | None = None,
    dispatch: bool = True,
    initiator: str = Run.Initiator.TRIGGER,
) -> Run:
    """Start a run from trusted server code, without a user message (e.g. a schedule).

    Access checks come first (LC-068): another scope's thread is NotFound, identity or
    client data failing the agent's schemas is InvalidInput, and nothing is stored.
    ``initiator``: ``command`` when an agent command starts the run."""
    thread = get_thread(identity, thread_id)
    agent = registry.get_agent(thread.agent_name)
    try:
        trusted_identity = agent.validate_identity(identity.data)
        data = agent.validate_client_data(check_json(client_data, "clientData"))
    except InvalidAgentInput as exc:
        raise InvalidInput(str(exc)) from exc
    with transaction.atomic():
        lock_existing(thread)
        if Run.objects.active().filter(thread=thread).exists():
            raise ThreadBusy("the thread has an active run")
        run = new_run(
            thread, agent, initiator=initiator, identity=trusted_identity, client_data=data
        )
        run.save(force_insert=True)  # as Run.objects.create: the ORM's INSERT and signals
        if dispatch:
            dispatch_after_commit(run.id)
    return run

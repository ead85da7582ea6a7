"""Regenerating the latest answer: a history rewrite and a run with initiator ``regenerate``."""

from __future__ import annotations

from functools import partial

from django.db import transaction

from pai_threads.errors import InvalidInput, ThreadBusy
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import run_and_side_state
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run
from pai_threads.models.conditions import in_thread_order
from pai_threads.services.threads import get_thread, lock_existing
from pai_threads.store.admission import dispatch_after_commit
from pai_threads.store.rewrites import apply_regenerate_rewrite, run_metadata_defaults

__all__ = ["regenerate"]


def regenerate(identity: Identity, thread_id: str, *, dispatch: bool = True) -> Run:
    """Answer the latest user message again: its previous answer leaves transcript and
    context (a history rewrite), and a run with initiator ``regenerate`` starts.

    The agent's ``prepare_history_rewrite`` runs inside this transaction and its thread
    metadata patches commit with the rewrite; ``history_rewritten`` runs after commit
    (:mod:`pai_threads.store.rewrites`, LC-057..LC-066)."""
    thread = get_thread(identity, thread_id)
    agent = registry.get_agent(thread.agent_name)
    with transaction.atomic():
        lock_existing(thread)
        if Run.objects.active().filter(thread=thread).exists():
            raise ThreadBusy("the thread has an active run")
        user_messages = Message.objects.filter(role="user", in_transcript=True)
        target = in_thread_order(user_messages, thread.id, descending=True).first()
        if target is None:
            raise InvalidInput("there is no user message to regenerate an answer for")
        previous = target.run
        run = Run.objects.create(
            thread=thread,
            scope_key=thread.scope_key,
            agent_name=thread.agent_name,
            initiator=Run.Initiator.REGENERATE,
            input_message_id=target.message_id,
            identity=agent.validate_identity(identity.data),
            client_data=previous.client_data if previous else {},
            **run_metadata_defaults(agent),
        )
        # Hides the old answer, runs prepare_history_rewrite, writes its metadata patches
        # and bumps the version, all in this transaction.
        apply_regenerate_rewrite(
            thread,
            agent,
            target,
            identity=run.identity,
            client_data=run.client_data,
            run_id=run.id,
        )
        # After the rewrite's thread head: the run's status, the queue and the actions.
        publish_after_commit(thread.id, partial(run_and_side_state, thread.id, run.id))
        if dispatch:
            dispatch_after_commit(run.id)
    return run

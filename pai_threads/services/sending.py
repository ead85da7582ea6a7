"""Sending a user message: a new run, or the active run's send policy (queue, reject,
interrupt, steer); idempotent on the message id."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction

from pai_agents.agent import AgentDefinition, InvalidAgentInput, SendPolicy
from pai_agents.json import dumps as json_dumps
from pai_agents.lifecycle.metadata import InvalidMetadata, replace_metadata
from pai_threads.conf import pai_settings
from pai_threads.errors import InvalidInput, NotFound, PayloadTooLarge, ThreadBusy
from pai_threads.events.projections import message_public
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import (
    empty_side_state,
    message_committed,
    run_and_side_state,
    run_status_of,
)
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run, Thread
from pai_threads.observability.signals import queued_after_commit
from pai_threads.services.cancelling import cancel_locked
from pai_threads.services.files import reference_attachments
from pai_threads.services.input_guard import check_json, validate_user_message
from pai_threads.services.threads import get_thread
from pai_threads.store.admission import dispatch_after_commit, new_run
from pai_threads.store.fused_send import FusedSend, can_fuse_send, start_run_fused
from pai_threads.store.rows import active_run, insert_row, touch_thread
from pai_threads.store.thread_headers import forget_thread, known_thread

__all__ = ["SEND_POLICIES", "SendResult", "send"]

SEND_POLICIES = ("queue", "reject", "interrupt", "steer")


@dataclass(frozen=True, kw_only=True)
class SendResult:
    """A started run (``message`` stored), or queued input (``queue_item``) behind ``run``."""

    message: Message | None
    run: Run | None
    created: bool
    queue_item: QueueItem | None = None
    # The client projection of ``message`` (what the committed event carries), projected
    # once for the event and every transport's reply.
    message_public: dict[str, Any] | None = None


def send(
    identity: Identity,
    thread_id: str,
    message: Mapping[str, Any],
    *,
    client_data: Mapping[str, Any] | None = None,
    policy: SendPolicy | None = None,
    dispatch: bool = True,
    initiator: str = Run.Initiator.SEND,
) -> SendResult:
    """Store a user message and start a run for it, dispatched after commit.

    While a run is active the send follows ``policy`` (default: the agent's): ``queue``
    stores it as a queue item (admitted when the run ends), ``reject`` raises ThreadBusy and
    stores nothing, ``interrupt`` queues it first in line and cancels the active run,
    ``steer`` hands it to the active run's next model step. Idempotent on the message id: a
    retry returns the original message (or queue item) and run, storing nothing twice.

    After commit, subscribers get what changed: the committed message, ``run.status`` and
    the queue and actions (a retry publishes nothing). ``initiator`` records who started
    the run (``command`` for an agent command; queued input keeps it until admitted).
    """
    body = partial(
        _send,
        identity,
        message=message,
        client_data=client_data,
        policy=policy,
        dispatch=dispatch,
        initiator=initiator,
    )
    # The thread's id, scope and agent as this process remembers them (no read), checked
    # against the row by the fused statement; else, or when the row disagrees, read.
    remembered = known_thread(thread_id, identity.scope_key)
    if remembered is not None:
        try:
            return body(remembered, remembered=True)
        except _StaleHeader:
            forget_thread(thread_id)
    return body(get_thread(identity, thread_id), remembered=False)


class _StaleHeader(Exception):
    """The fused send found no row for the remembered thread, scope and agent."""


def _send(
    identity: Identity,
    thread: Thread,
    *,
    message: Mapping[str, Any],
    client_data: Mapping[str, Any] | None,
    policy: SendPolicy | None,
    dispatch: bool,
    initiator: str,
    remembered: bool,
) -> SendResult:
    message_id, parts, metadata = validate_user_message(message)
    parts = reference_attachments(thread, parts)  # MF-039: stored as references
    client_id = bool(message.get("id"))
    try:
        agent = registry.get_agent(thread.agent_name)
    except registry.AgentNotFound:
        raise InvalidInput(f"the thread's agent {thread.agent_name!r} is not available") from None
    if policy is not None and policy not in SEND_POLICIES:
        raise InvalidInput(f"unknown send policy {policy!r}")
    try:
        trusted_identity = agent.validate_identity(identity.data)
        data = agent.validate_client_data(check_json(client_data, "clientData"))
    except InvalidAgentInput as exc:
        raise InvalidInput(str(exc)) from exc
    public_schema = agent.message_metadata.public if agent.message_metadata else None
    if public_schema is not None:
        # Typed user message metadata (AD-033): the canonical parsed bag, or 422 and nothing
        # stored. Private message metadata is server-only: clients cannot send it.
        try:
            metadata = replace_metadata(public_schema, metadata, what="message metadata")
        except (InvalidMetadata, ValueError) as exc:
            raise InvalidInput(str(exc)) from exc
    payload: dict[str, Any] = {
        "id": message_id,
        "role": "user",
        "parts": parts,
        "metadata": metadata,
    }
    if initiator != Run.Initiator.SEND:
        payload["initiator"] = initiator  # read by admission; projections pick their keys
    if len(json_dumps(payload).encode("utf-8")) > pai_settings.MAX_MESSAGE_BYTES:
        raise PayloadTooLarge(f"the message is larger than {pai_settings.MAX_MESSAGE_BYTES} bytes")
    # The run and its input are built only to be stored: queued or rejected input is not.
    build = partial(
        _run_and_input,
        thread,
        agent,
        payload,
        initiator=initiator,
        identity=trusted_identity,
        client_data=data,
    )
    if can_fuse_send():
        # An idle thread (most sends): one statement; anything else decides under the lock.
        run, row = build()
        outcome = start_run_fused(thread, run, row, client_id=client_id)
        if outcome is FusedSend.GONE:
            if remembered:  # the row decides: read it, as without the header
                raise _StaleHeader
            raise NotFound("thread not found")  # deleted since it was read
        if outcome is FusedSend.STARTED:
            return _started(thread, run, row, dispatch=dispatch)
    try:
        with transaction.atomic():
            # Touching the thread takes its row lock: "is a run active?" and "start a run /
            # queue the input" become one step, so concurrent sends never race.
            if not touch_thread(thread.pk):
                forget_thread(thread.id)
                raise NotFound("thread not found")  # deleted since it was read
            if client_id:
                # Only a client-chosen id can be a retry; generated ids are fresh.
                existing = _existing_send(thread, message_id)
                if existing is not None:
                    return existing
            active = active_run(thread.pk)
            if active is not None:
                return _enqueue(
                    thread, active, payload, trusted_identity, data, policy or agent.send_policy
                )
            # Anew after a fused attempt, which stored nothing.
            run, row = build()
            insert_row(run)
            insert_row(row)
            return _started(thread, run, row, dispatch=dispatch)
    except IntegrityError:
        # A concurrent retry stored the same message id first.
        existing = _existing_send(thread, message_id)
        if existing is not None:
            return existing
        raise


def _run_and_input(
    thread: Thread,
    agent: AgentDefinition,
    payload: Mapping[str, Any],
    *,
    initiator: str,
    identity: dict[str, Any],
    client_data: dict[str, Any],
) -> tuple[Run, Message]:
    """The run a send starts and its input message (``payload``, validated), not stored."""
    run = new_run(thread, agent, initiator=initiator, identity=identity, client_data=client_data)
    row = Message(
        message_id=payload["id"],
        thread=thread,
        scope_key=thread.scope_key,
        run=run,
        role="user",
        parts=payload["parts"],
        metadata=payload["metadata"],
        producer=Message.Producer.SEND,
        relation=Message.Relation.INPUT,
    )
    return run, row


def _started(thread: Thread, run: Run, row: Message, *, dispatch: bool) -> SendResult:
    """A run was stored for ``row``: what subscribers get after commit (at once when the
    write was its own transaction), then the dispatch."""
    committed = message_committed(thread.id, message_public(row))
    # A thread without an active run has no queued input and no pending action (the end of
    # a run admits the next input and settles its actions): no reads.
    publish_after_commit(thread.id, [committed, run_status_of(run), *empty_side_state(thread.id)])
    queued_after_commit(run)  # insert_row sends no post_save
    if dispatch:
        dispatch_after_commit(run.id)  # after the events: they come before the run's
    return SendResult(message=row, run=run, created=True, message_public=committed["message"])


def _enqueue(
    thread: Thread,
    active: Run,
    payload: dict[str, Any],
    identity: dict[str, Any],
    client_data: dict[str, Any],
    policy: str,
) -> SendResult:
    if policy == "reject":
        raise ThreadBusy("the thread already has an active run")
    item = QueueItem.objects.create(
        thread=thread,
        scope_key=thread.scope_key,
        message_id=payload["id"],
        message=payload,
        policy=policy,
        identity=identity,
        client_data=client_data,
    )
    if policy == "interrupt":
        # Lock the run (after the thread: the one lock order) and act on its current status:
        # a worker may have claimed it since it was read.
        cancel_locked(Run.objects.select_for_update().get(pk=active.pk))
    publish_after_commit(thread.id, partial(run_and_side_state, thread.id, active.pk))
    return SendResult(message=None, run=active, queue_item=item, created=True)


def _existing_send(thread: Thread, message_id: str) -> SendResult | None:
    row = Message.objects.select_related("run").filter(thread=thread, message_id=message_id).first()
    if row is not None:
        if row.run is None or row.role != "user":
            raise InvalidInput("message id already used in this thread")
        return SendResult(
            message=row, run=row.run, created=False, message_public=message_public(row)
        )
    item = QueueItem.objects.filter(thread=thread, message_id=message_id).first()
    if item is not None:
        run = Run.objects.active().filter(thread=thread).first()
        return SendResult(message=None, run=run, queue_item=item, created=False)
    return None

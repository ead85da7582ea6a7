"""The thread service: the trusted operations behind the HTTP API, commands and admin.

Every function takes the caller's :class:`Identity` and filters by its ``scope_key``; a
thread of another scope raises :class:`NotFound` exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from pai_agents.agent import InvalidAgentInput, SendPolicy
from pai_agents.engine.tool_calls import error_chunk, open_tool_parts, settle_chunk
from pai_agents.json import NotStrictJson, ensure_strict_json
from pai_agents.json import dumps as json_dumps
from pai_agents.lifecycle.metadata import InvalidMetadata, replace_metadata
from pai_agents.messages.reducer import MessageReducer
from pai_threads import cancellation, registry
from pai_threads.conf import pai_settings
from pai_threads.errors import (
    ActionConflict,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    ThreadBusy,
)
from pai_threads.files import reference_attachments
from pai_threads.identity import Identity
from pai_threads.input_guard import check_json, check_text, lookup_id, validate_user_message
from pai_threads.models import File, Message, PendingAction, QueueItem, Run, Thread
from pai_threads.pagination import InvalidPageToken, decode_token, encode_token
from pai_threads.pending_actions import PendingActionView, get_pending_action
from pai_threads.queueing import admit_next, dispatch_after_commit, lock_thread
from pai_threads.rewrites import (
    apply_regenerate_rewrite,
    run_metadata_defaults,
    thread_metadata_defaults,
    update_visibility,
)

__all__ = [
    "Page",
    "PendingActionView",
    "SendResult",
    "cancel_run",
    "create_thread",
    "delete_thread",
    "fulfil_action",
    "get_pending_action",
    "get_run",
    "get_thread",
    "list_actions",
    "list_messages",
    "list_queue",
    "list_threads",
    "regenerate",
    "rename_thread",
    "send",
    "set_archived",
    "submit_action",
    "trigger",
    "update_visibility",
]

SEND_POLICIES = ("queue", "reject", "interrupt", "steer")


@dataclass(frozen=True, kw_only=True)
class SendResult:
    """A started run (``message`` stored), or queued input (``queue_item``) behind ``run``."""

    message: Message | None
    run: Run | None
    created: bool
    queue_item: QueueItem | None = None


@dataclass(frozen=True, kw_only=True)
class Page:
    items: list[Any]
    next_page_token: str | None


def create_thread(identity: Identity, *, agent: str | None = None, title: str = "") -> Thread:
    agent_name = agent or registry.default_agent_name()
    try:
        registry.get_agent(agent_name)
    except registry.AgentNotFound:
        raise InvalidInput(f"unknown agent {agent_name!r}") from None
    return Thread.objects.create(
        scope_key=identity.scope_key,
        agent_name=agent_name,
        title=check_text(title, "the title")[:200],
        title_source="manual" if title else "",  # set by the application (AD-045)
        **thread_metadata_defaults(agent_name),
    )


MAX_TITLE = 200


def rename_thread(identity: Identity, thread_id: str, title: object) -> Thread:
    """Set the title (whitespace folded, at most 200 characters).

    The title record becomes ``manual``: automatic generation never replaces it unless the
    agent's ``thread_titles`` says ``overwrite="always"`` (AD-045).
    """
    if not isinstance(title, str):
        raise InvalidInput("title must be a string")
    title = " ".join(check_text(title, "the title").split())
    if len(title) > MAX_TITLE:
        raise InvalidInput(f"title must be at most {MAX_TITLE} characters")
    thread = get_thread(identity, thread_id)
    thread.title = title
    thread.title_source = "manual"
    thread.updated_at = timezone.now()
    thread.save(update_fields=["title", "title_source", "updated_at"])
    return thread


def get_thread(identity: Identity, thread_id: str) -> Thread:
    try:
        return Thread.objects.get(id=lookup_id(thread_id, "thread"), scope_key=identity.scope_key)
    except Thread.DoesNotExist:
        raise NotFound("thread not found") from None


def set_archived(identity: Identity, thread_id: str, archived: bool) -> Thread:
    """Archive (or restore) a thread: it stays whole and usable; lists can filter on it."""
    thread = get_thread(identity, thread_id)
    if thread.archived != archived:
        thread.archived = archived
        thread.updated_at = timezone.now()
        thread.save(update_fields=["archived", "updated_at"])
    return thread


def delete_thread(identity: Identity, thread_id: str) -> list[str]:
    """Delete a thread with everything in it: messages, runs and their steps, queued
    input, pending actions and the files bound to it (their stored bytes after commit).

    An active run is stopped first: a local execution is aborted at once, one elsewhere
    loses its lease at its next write and abandons the run. Returns the ids of the runs
    that were active."""
    thread = get_thread(identity, thread_id)
    with transaction.atomic():
        # The thread lock: a concurrent send or run end either finishes before the delete
        # or finds the thread gone (NotFound), never half of it.
        lock_thread(thread.id)
        active = list(Run.objects.active().filter(thread=thread).values_list("id", flat=True))
        stored = list(File.objects.filter(thread=thread).values_list("storage_name", flat=True))
        Thread.objects.filter(pk=thread.pk).delete()
        for run_id in active:
            transaction.on_commit(partial(cancellation.abort_local, run_id, "thread deleted"))
        transaction.on_commit(partial(_delete_stored, stored))
    return active


def _delete_stored(names: list[str]) -> None:
    for name in names:
        default_storage.delete(name)


def _lock_existing(thread: Thread) -> None:
    """Lock the thread's row; NotFound when it was deleted since it was read."""
    if Thread.objects.select_for_update().filter(pk=thread.pk).values_list("pk").first() is None:
        raise NotFound("thread not found")


def _page_size(limit: int | None) -> int:
    size = limit or pai_settings.PAGE_SIZE
    return max(1, min(size, pai_settings.MAX_PAGE_SIZE))


def list_threads(
    identity: Identity,
    *,
    limit: int | None = None,
    page_token: str | None = None,
    archived: bool | None = None,
) -> Page:
    """Most recently updated first; the token resumes after the last thread seen.
    ``archived``: only archived (True) or only active (False) threads; None lists both."""
    size = _page_size(limit)
    threads = Thread.objects.filter(scope_key=identity.scope_key).order_by("-updated_at", "-id")
    if archived is not None:
        threads = threads.filter(archived=archived)
    if page_token:
        try:
            updated_at, last_id = str(decode_token("threads", page_token)).split("|", 1)
        except (InvalidPageToken, ValueError) as exc:
            raise InvalidInput("invalid page token") from exc
        moment = parse_datetime(updated_at)
        threads = threads.filter(Q(updated_at__lt=moment) | Q(updated_at=moment, id__lt=last_id))
    rows = list(threads[: size + 1])
    token = None
    if len(rows) > size:
        rows = rows[:size]
        token = encode_token("threads", f"{rows[-1].updated_at.isoformat()}|{rows[-1].id}")
    return Page(items=rows, next_page_token=token)


def list_messages(
    identity: Identity, thread_id: str, *, limit: int | None = None, page_token: str | None = None
) -> Page:
    """The transcript's latest page, oldest first; the token fetches the page before it."""
    thread = get_thread(identity, thread_id)
    size = _page_size(limit)
    messages = Message.objects.filter(thread=thread, in_transcript=True).order_by("-id")
    if page_token:
        try:
            before = decode_token(f"messages:{thread.id}", page_token)
        except InvalidPageToken as exc:
            raise InvalidInput(str(exc)) from exc
        messages = messages.filter(id__lt=before)
    rows = list(messages[: size + 1])
    token = None
    if len(rows) > size:
        rows = rows[:size]
        token = encode_token(f"messages:{thread.id}", rows[-1].id)
    rows.reverse()
    return Page(items=rows, next_page_token=token)


def get_run(identity: Identity, run_id: str) -> Run:
    try:
        return Run.objects.get(id=lookup_id(run_id, "run"), scope_key=identity.scope_key)
    except Run.DoesNotExist:
        raise NotFound("run not found") from None


def send(
    identity: Identity,
    thread_id: str,
    message: Mapping[str, Any],
    *,
    client_data: Mapping[str, Any] | None = None,
    policy: SendPolicy | None = None,
    dispatch: bool = True,
) -> SendResult:
    """Store a user message and start a run for it, dispatched after commit.

    While a run is active the send follows ``policy`` (default: the agent's): ``queue``
    stores it as a queue item (admitted when the run ends), ``reject`` raises ThreadBusy and
    stores nothing, ``interrupt`` queues it first in line and cancels the active run,
    ``steer`` hands it to the active run's next model step. Idempotent on the message id: a
    retry returns the original message (or queue item) and run, storing nothing twice.
    """
    thread = get_thread(identity, thread_id)
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
    if len(json_dumps(payload).encode("utf-8")) > pai_settings.MAX_MESSAGE_BYTES:
        raise PayloadTooLarge(f"the message is larger than {pai_settings.MAX_MESSAGE_BYTES} bytes")
    try:
        with transaction.atomic():
            # Touching the thread takes its row lock: "is a run active?" and "start a run /
            # queue the input" become one step, so concurrent sends never race.
            if not Thread.objects.filter(pk=thread.pk).update(updated_at=timezone.now()):
                raise NotFound("thread not found")  # deleted since it was read
            if client_id:
                # Only a client-chosen id can be a retry; generated ids are fresh.
                existing = _existing_send(thread, message_id)
                if existing is not None:
                    return existing
            active = Run.objects.active().filter(thread=thread).only("id", "status").first()
            if active is not None:
                return _enqueue(
                    thread, active, payload, trusted_identity, data, policy or agent.send_policy
                )
            run = Run.objects.create(
                thread=thread,
                scope_key=thread.scope_key,
                agent_name=thread.agent_name,
                identity=trusted_identity,
                client_data=data,
                **run_metadata_defaults(agent),
            )
            row = Message.objects.create(
                message_id=message_id,
                thread=thread,
                scope_key=thread.scope_key,
                run=run,
                role="user",
                parts=parts,
                metadata=metadata,
                producer=Message.Producer.SEND,
                relation=Message.Relation.INPUT,
            )
            if dispatch:
                dispatch_after_commit(run.id)
    except IntegrityError:
        # A concurrent retry stored the same message id first.
        existing = _existing_send(thread, message_id)
        if existing is not None:
            return existing
        raise
    return SendResult(message=row, run=run, created=True)


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
        _cancel_locked(Run.objects.select_for_update().get(pk=active.pk))
    return SendResult(message=None, run=active, queue_item=item, created=True)


def _existing_send(thread: Thread, message_id: str) -> SendResult | None:
    row = Message.objects.select_related("run").filter(thread=thread, message_id=message_id).first()
    if row is not None:
        if row.run is None or row.role != "user":
            raise InvalidInput("message id already used in this thread")
        return SendResult(message=row, run=row.run, created=False)
    item = QueueItem.objects.filter(thread=thread, message_id=message_id).first()
    if item is not None:
        run = Run.objects.active().filter(thread=thread).first()
        return SendResult(message=None, run=run, queue_item=item, created=False)
    return None


def cancel_run(identity: Identity, run_id: str) -> Run:
    """Cancel a run: at once when queued or waiting, through its abort signal when running.

    Cancelling a waiting run cancels its pending actions and settles their tool calls; the
    thread's next queued input is admitted when the run ends.
    """
    thread_id = (
        Run.objects.filter(id=lookup_id(run_id, "run"), scope_key=identity.scope_key)
        .values_list("thread_id", flat=True)
        .first()
    )
    if thread_id is None:
        raise NotFound("run not found")
    with transaction.atomic():
        # The thread first, then the run: the lock order of sends and of a run's end.
        lock_thread(thread_id)
        run = Run.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            raise NotFound("run not found")  # its thread was deleted meanwhile
        _cancel_locked(run)
    run.refresh_from_db()
    return run


def _cancel_locked(run: Run) -> None:
    now = timezone.now()
    if run.status == Run.Status.RUNNING:
        Run.objects.filter(pk=run.pk, cancel_requested_at__isnull=True).update(
            cancel_requested_at=now
        )
        transaction.on_commit(lambda: cancellation.abort_local(run.id))
        return
    if run.status not in (Run.Status.QUEUED, Run.Status.WAITING):
        return
    if run.status == Run.Status.WAITING:
        PendingAction.objects.filter(run=run, status=PendingAction.Status.PENDING).update(
            status=PendingAction.Status.CANCELLED, resolved_at=now
        )
        _settle_waiting_message(run)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.CANCELLED, finished_at=now, lease_owner="", lease_expires_at=None
    )
    admit_next(run.thread_id)


def _settle_waiting_message(run: Run) -> None:
    """A cancelled waiting run leaves no unanswered tool call behind (transcript integrity)."""
    row = Message.objects.filter(run=run, step_index__isnull=False).order_by("-step_index").first()
    if row is None:
        return
    reducer = MessageReducer({"id": row.message_id, "role": "assistant", "parts": row.parts})
    for part in list(open_tool_parts(reducer.message)):
        reducer.apply(settle_chunk(part["toolCallId"], "cancel"))
    Message.objects.filter(pk=row.pk).update(
        parts=reducer.message["parts"], updated_at=timezone.now()
    )


def submit_action(
    identity: Identity, action_id: str, response: Mapping[str, Any], *, dispatch: bool = True
) -> PendingAction:
    """Answer a pending action once: approve/deny a call, or give a client tool's result.

    The action is bound to its run, tool call and input: the answer applies to exactly that
    call. When the run has no other pending action it resumes (dispatched after commit).
    """
    actions = PendingAction.objects.filter(
        id=lookup_id(action_id, "pending action"), scope_key=identity.scope_key
    )
    submitted_by = {"scopeKey": identity.scope_key, **dict(identity.data)}
    return _submit(actions, action_id, response, submitted_by, "client", dispatch=dispatch)


def fulfil_action(
    action_id: str, response: Mapping[str, Any], *, by: str, dispatch: bool = True
) -> PendingAction:
    """Trusted server code answers a pending action (any scope): a manual fulfilment.

    Same rules as :func:`submit_action` (accepted once, bound to its call); the result is
    tagged ``toolMetadata.pai.source == "manual"`` and ``by`` is recorded as the submitter.
    """
    actions = PendingAction.objects.filter(id=lookup_id(action_id, "pending action"))
    return _submit(actions, action_id, response, {"manual": by}, "manual", dispatch=dispatch)


def _submit(
    actions: Any,
    action_id: str,
    response: Mapping[str, Any],
    submitted_by: dict[str, Any],
    source: str,
    *,
    dispatch: bool,
) -> PendingAction:
    response = check_json(response, "the answer")
    run_id = actions.values_list("run_id", flat=True).first()
    if run_id is None:
        raise NotFound("pending action not found")
    with transaction.atomic():
        # The run before the action: the order cancel_run takes them in (no deadlock).
        Run.objects.select_for_update().filter(pk=run_id).values_list("pk").first()
        action = PendingAction.objects.select_for_update().filter(id=action_id).first()
        if action is None:
            raise NotFound("pending action not found")  # its thread was deleted meanwhile
        if action.status != PendingAction.Status.PENDING:
            raise ActionConflict("this action was already answered or cancelled")
        chunk = _answer_chunk(action, response, source)
        row = Message.objects.get(run_id=action.run_id, message_id=action.message_id)
        reducer = MessageReducer({"id": row.message_id, "role": "assistant", "parts": row.parts})
        reducer.apply(chunk)
        Message.objects.filter(pk=row.pk).update(
            parts=reducer.message["parts"], updated_at=timezone.now()
        )
        action.status = PendingAction.Status.SUBMITTED
        action.response = ensure_strict_json(dict(response), what="response")
        action.submitted_by = submitted_by
        action.resolved_at = timezone.now()
        action.save(update_fields=["status", "response", "submitted_by", "resolved_at"])
        still_pending = PendingAction.objects.filter(
            run_id=action.run_id, status=PendingAction.Status.PENDING
        ).exists()
        if not still_pending:
            resumed = Run.objects.filter(pk=action.run_id, status=Run.Status.WAITING).update(
                status=Run.Status.QUEUED
            )
            if resumed and dispatch:
                dispatch_after_commit(action.run_id)
    return action


def _answer_chunk(
    action: PendingAction, response: Mapping[str, Any], source: str
) -> dict[str, Any]:
    if action.kind == PendingAction.Kind.APPROVAL:
        approved = response.get("approved")
        reason = response.get("reason")
        if not isinstance(approved, bool) or (reason is not None and not isinstance(reason, str)):
            raise InvalidInput("an approval needs {'approved': true|false, 'reason'?: string}")
        chunk: dict[str, Any] = {
            "type": "tool-approval-response",
            "approvalId": action.request.get("approvalId", action.id),
            "approved": approved,
        }
        if reason:
            chunk["reason"] = reason[:2000]
        return chunk
    if "errorText" in response:
        if not isinstance(response["errorText"], str):
            raise InvalidInput("errorText must be a string")
        return error_chunk(action.tool_call_id, response["errorText"], source)  # type: ignore[arg-type]
    if "output" not in response:
        raise InvalidInput("a client tool result needs 'output' (or 'errorText')")
    try:
        output = ensure_strict_json(response["output"], what="output")
    except NotStrictJson as exc:
        raise InvalidInput(str(exc)) from exc
    return {
        "type": "tool-output-available",
        "toolCallId": action.tool_call_id,
        "output": output,
        "toolMetadata": {"pai": {"source": source}},
    }


def list_actions(
    identity: Identity, *, thread_id: str | None = None, status: str = "pending"
) -> list[PendingAction]:
    actions = PendingAction.objects.filter(scope_key=identity.scope_key, status=status)
    if thread_id is not None:
        actions = actions.filter(thread_id=get_thread(identity, thread_id).id)
    return list(actions.order_by("created_at", "id")[: pai_settings.MAX_PAGE_SIZE])


def regenerate(identity: Identity, thread_id: str, *, dispatch: bool = True) -> Run:
    """Answer the latest user message again: its previous answer leaves transcript and
    context (a history rewrite), and a run with initiator ``regenerate`` starts.

    The agent's ``prepare_history_rewrite`` runs inside this transaction and its thread
    metadata patches commit with the rewrite; ``history_rewritten`` runs after commit
    (:mod:`pai_threads.rewrites`, LC-057..LC-066)."""
    thread = get_thread(identity, thread_id)
    agent = registry.get_agent(thread.agent_name)
    with transaction.atomic():
        _lock_existing(thread)
        if Run.objects.active().filter(thread=thread).exists():
            raise ThreadBusy("the thread has an active run")
        target = (
            Message.objects.filter(thread=thread, role="user", in_transcript=True)
            .order_by("-id")
            .first()
        )
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
        if dispatch:
            dispatch_after_commit(run.id)
    return run


def trigger(
    identity: Identity,
    thread_id: str,
    *,
    client_data: Mapping[str, Any] | None = None,
    dispatch: bool = True,
) -> Run:
    """Start a run from trusted server code, without a user message (e.g. a schedule).

    Access checks come first (LC-068): another scope's thread is NotFound, identity or
    client data failing the agent's schemas is InvalidInput, and nothing is stored."""
    thread = get_thread(identity, thread_id)
    agent = registry.get_agent(thread.agent_name)
    try:
        trusted_identity = agent.validate_identity(identity.data)
        data = agent.validate_client_data(check_json(client_data, "clientData"))
    except InvalidAgentInput as exc:
        raise InvalidInput(str(exc)) from exc
    with transaction.atomic():
        _lock_existing(thread)
        if Run.objects.active().filter(thread=thread).exists():
            raise ThreadBusy("the thread has an active run")
        run = Run.objects.create(
            thread=thread,
            scope_key=thread.scope_key,
            agent_name=thread.agent_name,
            initiator=Run.Initiator.TRIGGER,
            identity=trusted_identity,
            client_data=data,
            **run_metadata_defaults(agent),
        )
        if dispatch:
            dispatch_after_commit(run.id)
    return run


def list_queue(identity: Identity, thread_id: str) -> list[QueueItem]:
    thread = get_thread(identity, thread_id)
    return list(
        QueueItem.objects.filter(thread=thread, status=QueueItem.Status.QUEUED).order_by(
            "created_at", "id"
        )
    )

"""History rewrites on the ORM, with the agent's rewrite hooks (LC-057..LC-066).

Called inside the rewrite's transaction, with the thread row locked and no run holding the
thread's lease (the caller checks): the rewrite is described, ``prepare_history_rewrite``
runs, and the visibility changes, the hook's validated thread-metadata patches and the
version bump are written together, so they commit or roll back as one (LC-057). The
``history_rewritten`` fact is scheduled with ``transaction.on_commit``: it never runs for a
rolled-back rewrite, gets ``after_version`` (LC-062), its failure is only reported
(LC-063), and calls for one thread never overlap, across processes too
(:mod:`pai_threads.store.rewrite_delivery`, LC-065). Once committed, a rewrite that changed
visibility or public thread metadata publishes the public thread head (``thread.updated``),
like a facade write; lifecycle visibility writes publish through the facade. Also: the
parsed ``{}`` metadata defaults of new runs and threads (AD-031).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from pai_agents.agent import AgentDefinition
from pai_agents.engine.rewrites import (
    build_runtime_context,
    prepare_rewrite,
    report_rewrite_error,
    visibility_rewrite,
)
from pai_agents.lifecycle.facade import MessageVisibility
from pai_agents.lifecycle.inputs import HistoryRewrite, RegenerateRewrite, VisibilityRewrite
from pai_threads.errors import InvalidInput, NotFound, RewriteRejected, ThreadBusy
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import thread_updated
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread
from pai_threads.store import rewrite_delivery

__all__ = [
    "apply_regenerate_rewrite",
    "lifecycle_visibility_rewrite",
    "run_metadata_defaults",
    "thread_metadata_defaults",
    "update_visibility",
]


def run_metadata_defaults(agent: AgentDefinition | str | None) -> dict[str, Any]:
    """``Run.objects.create(**run_metadata_defaults(agent))``: fresh parsed ``{}`` bags."""
    definition = _agent(agent)
    if definition is None:
        return {}
    bags = definition.metadata_schemas.run_initial()
    return {"private_metadata": bags.private, "metadata": bags.public}


def thread_metadata_defaults(agent: AgentDefinition | str | None) -> dict[str, Any]:
    definition = _agent(agent)
    if definition is None:
        return {}
    bags = definition.metadata_schemas.thread_initial()
    return {"private_metadata": bags.private, "metadata": bags.public}


def _agent(agent: AgentDefinition | str | None) -> AgentDefinition | None:
    if agent is None or isinstance(agent, AgentDefinition):
        return agent
    try:
        return registry.get_agent(agent)
    except registry.AgentNotFound:
        return None


def _committed(thread: Thread) -> Any:
    return Message.objects.filter(thread=thread, status=Message.Status.COMMITTED)


def apply_regenerate_rewrite(
    thread: Thread,
    agent: AgentDefinition,
    target: Message,
    *,
    identity: Mapping[str, Any],
    client_data: Mapping[str, Any],
    run_id: str,
) -> RegenerateRewrite:
    """Hide the transcript after ``target`` with the rewrite hooks; the caller holds the
    thread lock inside its transaction and creates the regenerate run (``run_id``)."""
    thread.refresh_from_db(fields=["version", "metadata", "private_metadata"])
    # LC-058: physical ids, chronological: a context-only message after the target (a hook's
    # note, a summary) leaves the model context with the answer it belonged to.
    physical = list(_committed(thread).order_by("id").values_list("id", "message_id"))
    retained = [m for pk, m in physical if pk <= target.pk]
    removed = [m for pk, m in physical if pk > target.pk]
    rewrite = RegenerateRewrite(
        target_message_id=target.message_id,
        retained_message_ids=tuple(retained),
        removed_message_ids=tuple(removed),
        before_version=thread.version,
    )
    _commit(
        thread,
        agent,
        rewrite,
        {m: MessageVisibility(transcript=False, context=False) for m in removed},
        identity=identity,
        client_data=client_data,
        run_id=run_id,
    )
    return rewrite


def update_visibility(
    identity: Identity,
    thread_id: str,
    changes: Mapping[str, Mapping[str, bool]],
) -> VisibilityRewrite | None:
    """Trusted/admin visibility rewrite: ``{message_id: {"transcript"?: bool,
    "context"?: bool}}``. Runs ``prepare_history_rewrite`` exactly once under the thread
    lock (LC-061) and schedules ``history_rewritten``; returns the committed rewrite (with
    ``after_version``), or None when nothing changes. Refused (ThreadBusy) while a run
    holds the thread's lease (LC-050)."""
    if not isinstance(changes, Mapping):
        raise InvalidInput("changes must map message ids to visibility changes")
    try:
        thread = Thread.objects.get(id=thread_id, scope_key=identity.scope_key)
    except Thread.DoesNotExist:
        raise NotFound("thread not found") from None
    try:
        agent = registry.get_agent(thread.agent_name)
    except registry.AgentNotFound:
        raise InvalidInput(f"the thread's agent {thread.agent_name!r} is not available") from None
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread.pk)
        if Run.objects.filter(thread=thread, status=Run.Status.RUNNING).exists():
            raise ThreadBusy("a run holds this thread's lease")
        rows = _committed(thread).filter(message_id__in=list(changes))
        current = {
            r.message_id: MessageVisibility(transcript=r.in_transcript, context=r.in_context)
            for r in rows
        }
        try:
            rewrite = visibility_rewrite(current, changes, before_version=thread.version)
        except LookupError as exc:
            raise NotFound(str(exc).strip("'\"")) from None
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc
        if rewrite is None:
            return None
        _commit(
            thread,
            agent,
            rewrite,
            {c.message_id: c.after for c in rewrite.changes},
            identity=agent.validate_identity(identity.data),
            client_data={},
            run_id="",
        )
    return VisibilityRewrite(
        changes=rewrite.changes,
        before_version=rewrite.before_version,
        after_version=rewrite.before_version + 1,
    )


def _commit(
    thread: Thread,
    agent: AgentDefinition,
    rewrite: HistoryRewrite,
    visibility: Mapping[str, MessageVisibility],
    *,
    identity: Mapping[str, Any],
    client_data: Mapping[str, Any],
    run_id: str,
) -> None:
    bags, runtime_context = _prepare(
        thread,
        agent,
        rewrite,
        private=thread.private_metadata or {},
        public=thread.metadata or {},
        identity=identity,
        client_data=client_data,
        run_id=run_id,
    )
    now = timezone.now()
    public_before = thread.metadata or {}
    for message_id, after in visibility.items():
        _committed(thread).filter(message_id=message_id).update(
            in_transcript=after.transcript, in_context=after.context, updated_at=now
        )
    after_version = thread.version + 1
    Thread.objects.filter(pk=thread.pk, version=thread.version).update(
        private_metadata=bags.private,
        metadata=bags.public,
        version=after_version,
        updated_at=now,
    )
    thread.version, thread.private_metadata, thread.metadata = (
        after_version,
        bags.private,
        bags.public,
    )
    if visibility or dict(bags.public) != public_before:
        _publish_head_on_commit(thread)
    rewrite_delivery.schedule(
        agent,
        thread_id=thread.id,
        rewrite=rewrite,
        after_version=after_version,
        runtime_context=runtime_context,
        run_id=run_id,
        identity=identity,
        client_data=client_data,
    )


def _publish_head_on_commit(thread: Thread) -> None:
    """After the rewrite commits, clients get the public thread head, as after a facade
    visibility or public-metadata write (LC-029..LC-031); a rollback publishes nothing and
    private metadata is in no payload."""
    thread.refresh_from_db()
    publish_after_commit(thread.id, [thread_updated(thread)])


def _prepare(
    thread: Thread,
    agent: AgentDefinition,
    rewrite: HistoryRewrite,
    *,
    private: Mapping[str, Any],
    public: Mapping[str, Any],
    identity: Mapping[str, Any],
    client_data: Mapping[str, Any],
    run_id: str,
) -> tuple[Any, Any]:
    """``prepare_history_rewrite`` on the bags to commit: ``(MetadataBags, runtime
    context)``; a raising hook or invalid patch is reported and raises RewriteRejected."""
    runtime_context: Any = None
    if agent.lifecycle is not None:
        runtime_context = async_to_sync(build_runtime_context)(
            agent, identity=identity, client_data=client_data, thread_id=thread.id, run_id=run_id
        )
    try:
        bags = async_to_sync(prepare_rewrite)(
            agent,
            thread_id=thread.id,
            rewrite=rewrite,
            version=thread.version,
            private_metadata=private,
            metadata=public,
            runtime_context=runtime_context,
        )
    except Exception as exc:
        # A raising hook or an invalid patch (InvalidMetadata): the caller's transaction
        # rolls back; the caller gets a typed, generic error and operators the detail.
        async_to_sync(report_rewrite_error)(
            agent, thread_id=thread.id, run_id=run_id, exc=exc, phase="prepare_history_rewrite"
        )
        raise RewriteRejected() from exc
    return bags, runtime_context


def lifecycle_visibility_rewrite(
    thread: Thread,
    run_id: str,
    current: Mapping[str, MessageVisibility],
    after: Mapping[str, MessageVisibility],
    *,
    private: Mapping[str, Any],
    public: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Visibility writes made by lifecycle code through the facade (LC-066): inside the
    facade's transaction (thread row locked, lease fenced), describe the changes, run
    ``prepare_history_rewrite`` on the bags about to be committed (``private``/``public``)
    and schedule ``history_rewritten`` for after the commit (the facade bumps the version
    once). Returns the bags to store; unchanged when nothing changes or the thread's agent
    is unknown. Raises RewriteRejected (rolling the write back) like trusted rewrites."""
    agent = _agent(thread.agent_name)
    changes = {m: {"transcript": v.transcript, "context": v.context} for m, v in after.items()}
    rewrite = visibility_rewrite(current, changes, before_version=thread.version)
    if agent is None or rewrite is None:
        return dict(private), dict(public)
    run = Run.objects.filter(id=run_id).first()
    identity = (run.identity if run else None) or {}
    client_data = (run.client_data if run else None) or {}
    bags, runtime_context = _prepare(
        thread,
        agent,
        rewrite,
        private=private,
        public=public,
        identity=identity,
        client_data=client_data,
        run_id=run_id,
    )
    rewrite_delivery.schedule(
        agent,
        thread_id=thread.id,
        rewrite=rewrite,
        after_version=thread.version + 1,
        runtime_context=runtime_context,
        run_id=run_id,
        identity=identity,
        client_data=client_data,
    )
    return dict(bags.private), dict(bags.public)

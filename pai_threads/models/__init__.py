"""Durable threads: where runs, messages and steps live.

Every row carries ``scope_key``, the partition derived from the trusted identity; every store
query filters by it, so another partition's thread is indistinguishable from a missing one.
Message rows are a thin envelope around a complete AI SDK UIMessage (``parts`` + public
``metadata``); visibility, private metadata and ordering live in envelope columns.

A run's steps and attempts refer to it, and a step to its message, without a database
constraint: every statement writing one holds the parent already (docs/operations.md,
"Foreign keys"); a thread's rows and a message's run (MF-044) keep theirs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import ExpressionWrapper, Q

from pai_agents.ids import new_id
from pai_threads.models.attempts import RunAttempt
from pai_threads.models.rewrite_delivery import RewriteDelivery

__all__ = [
    "File",
    "Message",
    "PendingAction",
    "QueueItem",
    "RewriteDelivery",
    "Run",
    "RunAttempt",
    "Step",
    "Thread",
]


def _iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a Z, as the API's pydantic schemas write datetimes."""
    return moment.isoformat().replace("+00:00", "Z")


def _thread_id() -> str:
    return new_id("thr")


def _run_id() -> str:
    return new_id("run")


def _queue_id() -> str:
    return new_id("que")


def _action_id() -> str:
    return new_id("act")


def _file_id() -> str:
    return new_id("fil")


class Thread(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=_thread_id, editable=False)
    scope_key = models.CharField(max_length=200)
    agent_name = models.CharField(max_length=100)
    title = models.CharField(max_length=200, blank=True, default="")
    # The title record (AD-041, AD-045): who set the title ("" for none, "generated",
    # "manual"), and what the refresh schedule compares against (AD-043): when the last
    # automatic title was stored and the thread's completed runs and messages at that time.
    title_source = models.CharField(max_length=16, blank=True, default="")
    title_generated_at = models.DateTimeField(null=True, blank=True)
    title_runs = models.PositiveIntegerField(default=0)
    title_messages = models.PositiveIntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)
    private_metadata = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=1)
    # Set by the application (PATCH archived): hidden from lists filtered with
    # ``archived=false``, otherwise a thread like any other.
    archived = models.BooleanField(default=False)
    # A hidden sub-agent thread (docs/subagents.md): the parent run whose tool call it
    # serves. Never listed among the scope's threads; deleted with the parent's thread.
    parent_run = models.ForeignKey(
        "Run",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="subagent_threads",
        db_index=False,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        # Operators without it see that private data exists, not what it says (the console).
        permissions = [
            ("view_private_metadata", "Can view private metadata and error details"),
        ]
        # One recency index: a send moves updated_at, so every index here is an entry per
        # send (migration 0019); listing both kinds merges its two ranges (list_threads).
        indexes = [
            models.Index(
                fields=["scope_key", "archived", "-updated_at", "id"],
                name="pai_thread_scope_archived",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.id


class RunQuerySet(models.QuerySet["Run"]):
    def active(self) -> RunQuerySet:
        # The partial index's own condition: both planners find the run by
        # pai_one_active_run_per_thread.
        return self.filter(active=True)


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        BLOCKED = "blocked"

    class Initiator(models.TextChoices):
        SEND = "send"
        TRIGGER = "trigger"
        REGENERATE = "regenerate"
        RESUME = "resume"
        COMMAND = "command"  # started by an agent command (docs/commands.md)
        SUBAGENT = "subagent"  # a parent run's sub-agent tool call (docs/subagents.md)

    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.WAITING)

    id = models.CharField(primary_key=True, max_length=40, default=_run_id, editable=False)
    # Indexed by pai_run_thread_created (thread, created_at) and the active-run constraint.
    # A scope's runs are its threads' runs (a run takes its thread's scope_key), found
    # through the thread indexes: an index of its own cost WAL per run row version (0017).
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    scope_key = models.CharField(max_length=200)
    agent_name = models.CharField(max_length=100)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    initiator = models.CharField(max_length=16, choices=Initiator.choices, default=Initiator.SEND)
    # Trusted identity snapshot (resolved by server code at send time) and untrusted client data.
    identity = models.JSONField(default=dict, blank=True)
    client_data = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    private_metadata = models.JSONField(default=dict, blank=True)
    # Lease: who executes the run, until when, and the fencing token every write checks.
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.BigIntegerField(default=0)
    attempt = models.PositiveIntegerField(default=0)
    step_count = models.PositiveIntegerField(default=0)
    usage = models.JSONField(default=dict, blank=True)
    error = models.JSONField(null=True, blank=True)
    # Set by cancel_run while an execution holds the lease; the executor aborts on seeing it.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The user message a regenerate run answers again (send runs answer their own input).
    input_message_id = models.CharField(max_length=100, blank=True, default="")
    # A sub-agent run: the parent run and the tool call it answers (docs/subagents.md).
    parent_run = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="subagent_runs",
        db_index=False,
    )
    parent_tool_call_id = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Queued, running or waiting, computed by the database: the active-run index names it,
    # not ``status``, so a claim changes no indexed column (a HOT update, migration 0018).
    active = models.GeneratedField(
        expression=ExpressionWrapper(
            Q(status__in=["queued", "running", "waiting"]), output_field=models.BooleanField()
        ),
        output_field=models.BooleanField(),
        db_persist=True,
    )

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]
        constraints = [
            # Also the sweeper's and the recovery's way to the live runs (migration 0018).
            models.UniqueConstraint(
                fields=["thread"], condition=Q(active=True), name="pai_one_active_run_per_thread"
            ),
            # One child run per sub-agent call, however often the parent's episode runs.
            models.UniqueConstraint(
                fields=["parent_run", "parent_tool_call_id"],
                condition=Q(parent_run__isnull=False),
                name="pai_one_child_per_call",
            ),
            models.CheckConstraint(
                condition=Q(
                    status__in=[
                        *("queued", "running", "waiting", "completed"),
                        *("failed", "cancelled", "blocked"),
                    ]
                ),
                name="pai_run_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["thread", "created_at"], name="pai_run_thread_created"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


class Message(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        COMMITTED = "committed"
        PENDING = "pending"

    class Producer(models.TextChoices):
        SEND = "send"
        TRIGGER = "trigger"
        MODEL = "model"
        LIFECYCLE = "lifecycle"
        ADMIN = "admin"

    class Relation(models.TextChoices):
        INPUT = "input"
        CONTEXT = "context"
        OUTPUT = "output"

    # The surrogate key doubles as the thread-ordering position: monotonic, indexed, and
    # what opaque page tokens encode.
    id = models.BigAutoField(primary_key=True)
    message_id = models.CharField(max_length=100)
    # No index of its own: pai_msg_thread_position (thread, id) leads with it (less WAL per
    # message). Migration 0007 drops only that index, never pai_one_open_message.
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    scope_key = models.CharField(max_length=200)
    # Indexed by pai_one_message_per_step (run, step_index), which leads with it (migration
    # 0014; no varchar_pattern_ops twin: run ids are never LIKE-matched).
    run = models.ForeignKey(
        Run,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="messages",
        db_index=False,
    )
    role = models.CharField(max_length=16)
    parts = models.JSONField(default=list)
    metadata = models.JSONField(default=dict, blank=True)
    private_metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMMITTED)
    producer = models.CharField(max_length=16, choices=Producer.choices)
    relation = models.CharField(max_length=16, choices=Relation.choices, blank=True, default="")
    step_index = models.PositiveIntegerField(null=True, blank=True)
    # A model step's own token usage and diagnostics (finish reason, model), projected into
    # ``metadata.pai`` (MF-002, MF-004); None for messages that are not step outputs.
    usage = models.JSONField(null=True, blank=True)
    diagnostics = models.JSONField(null=True, blank=True)
    in_transcript = models.BooleanField(default=True)
    in_context = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "message_id"], name="pai_message_id_per_thread"
            ),
            # Also the run's index (its messages by run): NULL step indexes never collide.
            models.UniqueConstraint(fields=["run", "step_index"], name="pai_one_message_per_step"),
            models.CheckConstraint(
                condition=Q(role__in=["system", "user", "assistant"]), name="pai_message_role_valid"
            ),
            # MF-043: at most one open message per thread (the store also requires it to
            # be the tail assistant message).
            models.UniqueConstraint(
                fields=["thread"], condition=Q(status="open"), name="pai_one_open_message"
            ),
        ]
        indexes = [
            # Thread order (the tail check of a checkpoint, MF-043, is one probe) and the
            # transcript's: its reads walk this index past the few hidden rows (regenerated
            # answers, hook notes), as a partial twin cost index WAL per message (migration
            # 0016). The context keeps its own: compaction hides all but the newest messages.
            models.Index(fields=["thread", "id"], name="pai_msg_thread_position"),
            models.Index(
                fields=["thread", "id"], condition=Q(in_context=True), name="pai_msg_context"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} {self.message_id}"

    def to_ui_message(self) -> dict[str, Any]:
        """The client projection: public metadata plus the reserved ``metadata.pai``."""
        pai: dict[str, Any] = {
            "producer": self.producer,
            "status": self.status,
            "createdAt": _iso(self.created_at),
            "updatedAt": _iso(self.updated_at),
        }
        if self.run_id:
            pai["runId"] = self.run_id
        if self.relation:
            pai["relation"] = self.relation
        if self.usage is not None:
            pai["usage"] = self.usage
        if self.diagnostics is not None:
            pai["diagnostics"] = self.diagnostics
        return {
            "id": self.message_id,
            "role": self.role,
            "metadata": {**self.metadata, "pai": pai},
            "parts": self.parts,
        }


class Step(models.Model):
    # Indexed by the unique (run, index) constraint, which leads with it.
    # No database constraints: rows a run writes (module docstring, migration 0018).
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="steps", db_index=False, db_constraint=False
    )
    index = models.PositiveIntegerField()
    message = models.ForeignKey(
        Message, models.SET_NULL, null=True, blank=True, related_name="+", db_constraint=False
    )
    request = models.JSONField(default=dict)
    usage = models.JSONField(default=dict)
    finish_reason = models.CharField(max_length=32, blank=True, default="")
    attempt = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="pai_step_index_per_run")
        ]

    def __str__(self) -> str:
        return f"{self.run_id} step {self.index}"


class QueueItem(models.Model):
    """Input that arrived while a run was active: not in the transcript until admitted.

    Admission (when the active run ends) moves the message into the transcript unchanged and
    starts its run in the same transaction.
    """

    class Policy(models.TextChoices):
        QUEUE = "queue"
        INTERRUPT = "interrupt"
        STEER = "steer"

    class Status(models.TextChoices):
        QUEUED = "queued"
        ADMITTED = "admitted"
        CANCELLED = "cancelled"

    id = models.CharField(primary_key=True, max_length=40, default=_queue_id, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="queue_items")
    scope_key = models.CharField(max_length=200)
    message_id = models.CharField(max_length=100)
    message = models.JSONField()
    policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.QUEUE)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    identity = models.JSONField(default=dict, blank=True)
    client_data = models.JSONField(default=dict, blank=True)
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    admitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "message_id"], name="pai_queue_message_id_per_thread"
            ),
        ]
        indexes = [
            models.Index(
                fields=["thread", "created_at"],
                condition=Q(status="queued"),
                name="pai_queue_pending",
            )
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


class PendingAction(models.Model):
    """A tool call waiting for a person or a client: one durable suspension episode.

    An approval, a client tool's result, or a person's typed answer to a suspension the tool
    declared (``input``: ``request`` holds the suspension's name and answer schema, ``input``
    the payload shown, docs/suspensions.md). Bound to the exact run, tool call and episode
    (``sequence``: a call may suspend again after each answer); accepted once only.
    """

    class Kind(models.TextChoices):
        APPROVAL = "approval"
        CLIENT = "client"
        INPUT = "input"
        SUBAGENT = "subagent"  # answered by the runtime when the child run ends

    class Status(models.TextChoices):
        PENDING = "pending"
        SUBMITTED = "submitted"
        EXECUTING = "executing"
        CANCELLED = "cancelled"

    id = models.CharField(primary_key=True, max_length=40, default=_action_id, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="pending_actions")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="pending_actions")
    scope_key = models.CharField(max_length=200)
    message_id = models.CharField(max_length=100)
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=100)
    sequence = models.PositiveIntegerField(default=0)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    input = models.JSONField()
    request = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    response = models.JSONField(null=True, blank=True)
    submitted_by = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "tool_call_id", "sequence"], name="pai_action_per_episode"
            ),
            # At most one episode of a call waits at a time.
            models.UniqueConstraint(
                fields=["run", "tool_call_id"],
                condition=models.Q(status="pending"),
                name="pai_action_one_pending",
            ),
        ]
        indexes = [
            models.Index(fields=["scope_key", "status"], name="pai_action_scope_status"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.tool_name} ({self.status})"


class File(models.Model):
    """A PAI-managed upload: its bytes live in Django's default storage under
    ``storage_name``; messages refer to it by id only (MF-039).

    Immutable once stored (``sha256`` is of the stored bytes), so a reference's public facts
    and a provider's cached expansion never go stale. ``metadata`` is public: it is shown
    on attachments. A file bound to a thread can be attached only there.
    """

    id = models.CharField(primary_key=True, max_length=40, default=_file_id, editable=False)
    scope_key = models.CharField(max_length=200)
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, null=True, blank=True, related_name="files"
    )
    media_type = models.CharField(max_length=255)
    filename = models.CharField(max_length=255, blank=True, default="")
    byte_size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    storage_name = models.CharField(max_length=500)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["scope_key", "created_at"], name="pai_file_scope_recent")]

    def __str__(self) -> str:
        return self.filename or self.id

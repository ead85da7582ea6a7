"""The built-in context compactor: a cursor-backed summary of older context (LC-053..LC-056).

:func:`context_compaction` returns a lifecycle part. In ``resolve_model_context`` it reads
its state from thread private metadata, measures the context after its cursor and, past
``threshold_tokens``, folds everything but the ``keep_recent`` newest messages into a new
summary with the application's summarizer. It commits summary and cursor first, then calls
``next(base)`` exactly once with the summary message plus the messages after the cursor, so
resolvers composed after it (retrieval, windowing, redaction) see the new summary in the same
step and may reshape the model input without moving the committed cursor (LC-053, LC-054).

The commit compares the whole private bag it read (``expected_private_metadata``) and is
fenced by the lease: after lease loss it raises ``LeaseLost``; if another writer moved the
compactor's state meanwhile the summary is dropped and the step uses the stored state
(LC-056). ``prepare_history_rewrite`` forgets the summary, cursor and boundary stack and the
usage anchor whenever context eligibility changes (LC-055). ``after_step`` records the
provider-reported input tokens of the step (the usage anchor) so the next measurement
extends a real count instead of estimating the whole context.

Put the compactor first in ``compose_lifecycle`` (outermost): it is a cursor-backed source
and ignores the default leaf. With typed thread metadata, include its state::

    class ThreadPrivate(BaseModel):
        pai_compaction: CompactionState = Field(default_factory=CompactionState)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from pydantic import BaseModel, ConfigDict, ValidationError

from pai_agents._callables import call_user
from pai_agents.abort import AbortSignal
from pai_agents.lifecycle.facade import (
    LifecycleMessage,
    LifecycleThread,
    MutationConflict,
    ResolverThread,
)
from pai_agents.lifecycle.hooks import AgentLifecycle, ContextNext
from pai_agents.lifecycle.inputs import (
    AfterStepInput,
    LifecycleModelHistory,
    PrepareHistoryRewriteInput,
    RegenerateRewrite,
    ResolveModelContextInput,
)
from pai_agents.lifecycle.metadata import MetadataSchemaError
from pai_agents.lifecycle.results import HistoryRewritePatch, LifecycleResultError
from pai_agents.messages.model_messages import to_model_messages
from pai_agents.models.base import ModelMessage

__all__ = [
    "CompactionBoundary",
    "CompactionState",
    "ContextCompaction",
    "SummarizeInput",
    "Summarizer",
    "TokenCounter",
    "UsageAnchor",
    "context_compaction",
    "estimate_tokens",
    "summary_message",
]

logger = logging.getLogger("pai.compaction")

_MAX_BOUNDARIES: Final = 32  # the stack is a bounded log; only the top one is in force
_COMMIT_ATTEMPTS: Final = 3  # retries when only unrelated private keys changed meanwhile


class CompactionBoundary(BaseModel):
    """One summarizer call: the last message it folded, how many, their estimated tokens."""

    model_config = ConfigDict(frozen=True)

    cursor: str
    folded: int
    tokens: int


class UsageAnchor(BaseModel):
    """The provider-reported input tokens of the step that produced ``message_id``.

    Valid only for the same ``cursor``: the request it measured started after that cursor.
    """

    model_config = ConfigDict(frozen=True)

    message_id: str
    input_tokens: int
    cursor: str | None = None


class CompactionState(BaseModel):
    """What the compactor keeps under its key in thread private metadata.

    ``cursor`` is the id of the last folded message; ``summary`` covers everything up to it.
    """

    model_config = ConfigDict(frozen=True)

    summary: str | None = None
    cursor: str | None = None
    boundaries: tuple[CompactionBoundary, ...] = ()
    usage: UsageAnchor | None = None


@dataclass(frozen=True, kw_only=True)
class SummarizeInput:
    """What the summarizer gets: the messages to fold (oldest first) and the summary so far."""

    messages: tuple[LifecycleMessage, ...]
    model_messages: tuple[ModelMessage, ...]
    previous_summary: str | None
    runtime_context: Any
    signal: AbortSignal


Summarizer: TypeAlias = Callable[[SummarizeInput], "str | Awaitable[str]"]
TokenCounter: TypeAlias = Callable[[Sequence[ModelMessage]], int]


def estimate_tokens(messages: Sequence[ModelMessage]) -> int:
    """About four characters per token of the messages' JSON: no tokenizer needed."""
    chars = sum(len(json.dumps(m, ensure_ascii=False, default=str)) for m in messages)
    return (chars + 3) // 4


def summary_message(summary: str) -> ModelMessage:
    """The default model message carrying the summary, first in the base context."""
    return {"role": "system", "content": f"Summary of the earlier conversation:\n{summary}"}


def _model_messages(messages: Sequence[LifecycleMessage]) -> list[ModelMessage]:
    # The same conversion as history.model_messages(), without reading the rows again.
    return to_model_messages([m.to_ui_message() for m in messages])


class ContextCompaction(AgentLifecycle):
    """The lifecycle part :func:`context_compaction` builds."""

    def __init__(
        self,
        summarize: Summarizer,
        *,
        threshold_tokens: int,
        keep_recent: int = 4,
        count_tokens: TokenCounter | None = None,
        summary_message: Callable[[str], ModelMessage] = summary_message,
        state_key: str = "pai_compaction",
        track_usage: bool = True,
        name: str = "context_compaction",
    ) -> None:
        if threshold_tokens <= 0 or keep_recent < 0:
            raise ValueError("threshold_tokens must be positive and keep_recent not negative")
        self.summarize = summarize
        self.threshold_tokens = threshold_tokens
        self.keep_recent = keep_recent
        self.count_tokens: TokenCounter = count_tokens or estimate_tokens
        self.summary_message = summary_message
        self.state_key = state_key
        self.name = name
        phases = ["resolve_model_context", "prepare_history_rewrite"]
        self._phases = (*phases, "after_step") if track_usage else tuple(phases)

    # -- resolve_model_context (LC-053, LC-054, LC-056) --

    async def resolve_model_context(
        self, input: ResolveModelContextInput, next: ContextNext
    ) -> list[ModelMessage]:
        read = dict(await input.thread.private_metadata.get())  # the LC-056 expectation
        state = self._state(read)
        state, tail = await self._tail(input.history, state)
        if len(tail) > self.keep_recent and self._measure(state, tail) > self.threshold_tokens:
            cut = len(tail) - self.keep_recent
            folded = await self._fold(input, state, tail[:cut])
            state = await self._commit(input.thread, read, folded)
            if state is folded:
                tail = tail[cut:]
            else:  # another writer's state stands: read the tail after its cursor
                state, tail = await self._tail(input.history, state)
        base = _model_messages(tail)
        if state.summary is not None:
            base.insert(0, self.summary_message(state.summary))
        return list(await next(base))  # exactly once, after the commit (LC-053)

    async def _tail(
        self, history: LifecycleModelHistory, state: CompactionState
    ) -> tuple[CompactionState, list[LifecycleMessage]]:
        """The context messages after the cursor; a cursor no longer in the thread starts over."""
        if state.cursor is None:
            return state, await history.collect()
        try:
            return state, await history.collect(after_message_id=state.cursor)
        except LookupError:
            logger.warning("compaction cursor %s is gone; summarizing anew", state.cursor)
            return CompactionState(), await history.collect()

    def _measure(self, state: CompactionState, tail: Sequence[LifecycleMessage]) -> int:
        """Tokens of the next request: the usage anchor extended by what came after it, or an
        estimate of the summary and the tail."""
        anchor = state.usage
        if anchor is not None and anchor.cursor == state.cursor:
            ids = [m.id for m in tail]
            if anchor.message_id in ids:
                since = tail[ids.index(anchor.message_id) :]
                return anchor.input_tokens + self.count_tokens(_model_messages(since))
        head = [self.summary_message(state.summary)] if state.summary is not None else []
        return self.count_tokens([*head, *_model_messages(tail)])

    async def _fold(
        self,
        input: ResolveModelContextInput,
        state: CompactionState,
        messages: Sequence[LifecycleMessage],
    ) -> CompactionState:
        """Summarize ``messages`` in batches of at most ``threshold_tokens`` (estimated), each
        call extending the previous summary, so a long backlog never overflows the summarizer."""
        summary, boundaries = state.summary, list(state.boundaries)
        for batch, tokens in self._batches(messages):
            result = await call_user(
                self.summarize,
                SummarizeInput(
                    messages=tuple(batch),
                    model_messages=tuple(_model_messages(batch)),
                    previous_summary=summary,
                    runtime_context=input.runtime_context,
                    signal=input.signal,
                ),
            )
            if not isinstance(result, str):
                raise LifecycleResultError(f"summarize must return a str, not {result!r}")
            summary = result
            boundaries.append(
                CompactionBoundary(cursor=batch[-1].id, folded=len(batch), tokens=tokens)
            )
        return CompactionState(
            summary=summary,
            cursor=messages[-1].id,
            boundaries=tuple(boundaries[-_MAX_BOUNDARIES:]),
            usage=None,  # measured against the old cursor: invalid now
        )

    def _batches(
        self, messages: Sequence[LifecycleMessage]
    ) -> list[tuple[list[LifecycleMessage], int]]:
        batches: list[tuple[list[LifecycleMessage], int]] = []
        batch: list[LifecycleMessage] = []
        size = 0
        for message in messages:
            tokens = self.count_tokens(_model_messages([message]))
            if batch and size + tokens > self.threshold_tokens:
                batches.append((batch, size))
                batch, size = [], 0
            batch.append(message)
            size += tokens
        batches.append((batch, size))
        return batches

    async def _commit(
        self, thread: ResolverThread, read: dict[str, Any], state: CompactionState
    ) -> CompactionState:
        """Commit ``state`` unless the compactor's stored state moved since ``read`` (LC-056).

        ``LeaseLost`` propagates: a stale execution writes nothing. A change of unrelated
        private keys only refreshes the expectation; a change of this compactor's state
        rejects the summary and the step continues on what is stored.
        """
        expected = read
        for _ in range(_COMMIT_ATTEMPTS):
            try:
                await self._write(thread, state, expected)
            except MutationConflict:
                current = dict(await thread.private_metadata.get())
                if current.get(self.state_key) != read.get(self.state_key):
                    logger.info(
                        "compaction state of thread %s moved; summary dropped", thread.thread_id
                    )
                    return self._state(current)
                expected = current
                continue
            self._check_stored(await thread.private_metadata.get())
            return state
        return self._state(expected)

    def _check_stored(self, bag: Mapping[str, Any]) -> None:
        if self.state_key not in bag:  # a typed schema without the key drops it silently
            raise MetadataSchemaError(
                f"thread private metadata dropped {self.state_key!r}: add "
                f"`{self.state_key}: CompactionState` to the thread private metadata schema"
            )

    # -- prepare_history_rewrite (LC-055) --

    async def prepare_history_rewrite(
        self, input: PrepareHistoryRewriteInput
    ) -> HistoryRewritePatch | None:
        """Forget summary, cursor, boundary stack and usage anchor when context eligibility
        changes: every regenerate (retry included), and visibility rewrites that flip
        ``context``. Deterministic and side-effect free, as rewrite retries require."""
        rewrite = input.rewrite
        if not isinstance(rewrite, RegenerateRewrite) and not any(
            c.before.context != c.after.context for c in rewrite.changes
        ):
            return None
        cleared = CompactionState()
        if self._state(input.private_metadata) == cleared:
            return None
        return HistoryRewritePatch(
            private_metadata={self.state_key: cleared.model_dump(mode="json")}
        )

    # -- after_step: the usage anchor --

    async def after_step(self, input: AfterStepInput) -> None:
        """Record the step's provider-reported input tokens against the current cursor.

        Best effort: a conflicting concurrent write wins and the anchor is simply not kept.
        """
        tokens = (input.step.usage or {}).get("inputTokens")
        if not isinstance(tokens, int) or tokens <= 0:
            return
        thread: LifecycleThread = input.thread
        read = dict(await thread.private_metadata.get())
        state = self._state(read)
        anchor = UsageAnchor(
            message_id=input.step.message.id, input_tokens=tokens, cursor=state.cursor
        )
        try:
            await self._write(thread, state.model_copy(update={"usage": anchor}), read)
        except MutationConflict:
            logger.debug("usage anchor of thread %s not kept: state moved", thread.thread_id)

    # -- helpers --

    async def _write(
        self, thread: ResolverThread, state: CompactionState, expected: Mapping[str, Any]
    ) -> None:
        """Merge ``state`` under the key, only if the private bag still equals ``expected``."""
        value = state.model_dump(mode="json")

        async def write(tx: Any) -> Any:  # Any: mypy cannot solve mutate's T | Awaitable[T]
            await tx.private_metadata.merge({self.state_key: value})

        await thread.mutate(write, expected_private_metadata=expected)

    def _state(self, bag: Mapping[str, Any]) -> CompactionState:
        raw = bag.get(self.state_key)
        if raw is None:
            return CompactionState()
        try:
            return CompactionState.model_validate(raw)
        except ValidationError:
            logger.warning("ignoring malformed compaction state under %r", self.state_key)
            return CompactionState()


def context_compaction(
    summarize: Summarizer,
    *,
    threshold_tokens: int,
    keep_recent: int = 4,
    count_tokens: TokenCounter | None = None,
    summary_message: Callable[[str], ModelMessage] = summary_message,
    state_key: str = "pai_compaction",
    track_usage: bool = True,
    name: str = "context_compaction",
) -> ContextCompaction:
    """A lifecycle part summarizing older context once it passes ``threshold_tokens``.

    ``summarize(SummarizeInput)`` (``def`` or ``async def``) returns the new summary text
    covering ``previous_summary`` plus ``messages``. ``keep_recent`` newest context messages
    always stay verbatim. ``count_tokens(model_messages)`` defaults to
    :func:`estimate_tokens`; with ``track_usage`` the provider-reported input tokens of the
    last step are preferred. State lives under ``state_key`` in thread private metadata.
    """
    return ContextCompaction(
        summarize,
        threshold_tokens=threshold_tokens,
        keep_recent=keep_recent,
        count_tokens=count_tokens,
        summary_message=summary_message,
        state_key=state_key,
        track_usage=track_usage,
        name=name,
    )

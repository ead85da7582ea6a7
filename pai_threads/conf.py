"""``PAI`` settings: one dict, read lazily through :data:`pai_settings`.

Defaults live here and nowhere else; dotted paths are resolved on access; the cache is
dropped on ``setting_changed`` so ``override_settings(PAI=...)`` works in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

__all__ = ["DEFAULTS", "pai_settings"]

DEFAULTS: dict[str, Any] = {
    # Dotted paths to AgentDefinition objects; the first is the default agent.
    "AGENTS": [],
    # "thread" (in-process, the embedded default) or "celery", or a dotted path to an Executor.
    "EXECUTOR": "thread",
    # Callable(request) -> pai_threads.identity.Identity | None; None means 401.
    "IDENTITY_RESOLVER": "pai_threads.identity.session_identity",
    # Seconds a claimed run's lease lasts without a heartbeat (heartbeats every third of it;
    # a cancel from another process is noticed at the next heartbeat).
    "LEASE_SECONDS": 30,
    # Runs still queued this long after creation are re-dispatched by the sweeper (a lost
    # broker message, an executor that died before claiming).
    "REDISPATCH_QUEUED_AFTER_SECONDS": 60,
    # Largest accepted JSON body of a send, in bytes.
    "MAX_MESSAGE_BYTES": 256 * 1024,
    # How many of the newest context-visible messages a model step sees (None: all). Keeps
    # a step's cost flat as threads grow; lifecycle hooks can build richer context.
    "CONTEXT_WINDOW_MESSAGES": 200,
    # "memory", "redis", or a dotted path to a ReplayBuffer class. None picks "redis" when a
    # Redis URL is configured (REALTIME_REDIS_URL, else settings.REDIS_URL), else "memory".
    "REALTIME_BUFFER": None,
    # Redis server of the replay buffer; None falls back to settings.REDIS_URL.
    "REALTIME_REDIS_URL": None,
    # Seconds a thread's event log is kept after its last event (a finished generation's
    # replay stays available this long, for clients reconnecting just after it ended).
    "REALTIME_REPLAY_TTL": 300,
    # Events of *finished* generations kept per thread for ``since`` resumes; the active
    # generation is never trimmed, so its replay from index 0 is always complete.
    "REALTIME_RETAINED_EVENTS": 2000,
    # Text/reasoning/tool-input deltas are batched for this long before one fan-out.
    "REALTIME_COALESCE_MS": 8,
    # Largest accepted websocket frame from a client, in bytes.
    "REALTIME_MAX_FRAME_BYTES": 64 * 1024,
    # A connected consumer checks the log this often for events the channel layer dropped.
    "REALTIME_RESYNC_SECONDS": 5.0,
    # Keep-alive comment interval of the AI SDK SSE stream, in seconds.
    "REALTIME_SSE_KEEPALIVE_SECONDS": 15.0,
    # PAI-managed file attachments: the largest upload in bytes (larger is 413), and the
    # media types accepted (others are 415; "type/*" accepts a whole family).
    "FILE_MAX_BYTES": 10 * 1024 * 1024,
    "FILE_MEDIA_TYPES": [
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "text/plain",
        "text/markdown",
        "text/csv",
        "application/json",
        "application/pdf",
    ],
    # Dotted path to a pai_agents.files.FileProvider class, instantiated per run without
    # arguments: expands stored references into model input (None drops them).
    "FILE_PROVIDER": "pai_threads.execution.file_provider.StorageFileProvider",
    # Threads that run the ORM store's calls for this process's runs, each keeping its
    # database connection open between calls (pai_threads.store.db): at most this many store
    # calls at once, and this many connections held. None: 1 on SQLite (one writer at a
    # time anyway; more threads only wait in SQLite's coarse busy sleeps), 4 elsewhere.
    "STORE_THREADS": None,
    # PostgreSQL: the hot path's prebuilt statements (send, claim, step writes, context read,
    # heartbeat) are prepared once per connection instead of planned on every execution
    # (pai_threads.store.prepared). False behind a pooler in transaction mode that cannot
    # carry prepared statements (PgBouncer older than 1.21).
    "PREPARED_STATEMENTS": True,
    # PostgreSQL: async connections each run loop keeps for the hot path's one-statement
    # writes (a step's commit, a checkpoint, a tool result), sent with no hop to a store thread
    # (pai_threads.store.loop_connections). None: as many as STORE_THREADS; 0: off (those
    # writes go to the store threads too).
    "LOOP_CONNECTIONS": None,
    # Garbage-collector tuning of PAI's long-lived processes (the ASGI web process, Celery
    # workers; pai_threads.executors.gc_tuning): True freezes what start-up allocated and
    # raises the collection thresholds to (50_000, 20, 100); a 3-tuple of ints sets other
    # thresholds; False leaves the interpreter alone. Full collections over the process's
    # long-lived objects otherwise stall the event loop that writes every websocket frame.
    "GC_TUNING": True,
    # Prices per million tokens by model id ("gpt-4o-mini") or "provider:model id", in any
    # currency as long as it is one: {"input": "0.15", "output": "0.60", "cachedInput":
    # "0.075", "reasoning": ...}. Cached input defaults to the input price and reasoning
    # to the output price (both are parts of the input and output counts). Models missing
    # here have no cost (pai_threads.usage).
    "MODEL_PRICES": {},
    # Retries of a model step after a transient provider fault (connection error, timeout,
    # 429, 5xx), per step; agents (define_agent(max_retries=...)) and prepare_run patches
    # (RunPatch(max_retries=...)) override it. The first retry waits
    # MODEL_RETRY_BACKOFF_SECONDS, each next one twice as long (or the server's Retry-After).
    "MODEL_MAX_RETRIES": 2,
    "MODEL_RETRY_BACKOFF_SECONDS": 0.5,
    # Validated tool calls executed per model step; later calls of the step are not run and
    # get a model-visible error result (define_agent(max_tool_calls_per_step=...) overrides).
    "MAX_TOOL_CALLS_PER_STEP": 32,
    # Capability ids -> a dotted path (or the object) implementing them, or to a
    # capability_factory; every id a registered agent needs must be bound (pai.E020).
    "CAPABILITIES": {},
    # Default and largest page sizes of list endpoints.
    "PAGE_SIZE": 50,
    "MAX_PAGE_SIZE": 200,
    # How deep sub-agents may nest (docs/subagents.md): a call beyond it is answered with a
    # model-visible error instead of starting a child run.
    "SUBAGENT_MAX_DEPTH": 3,
}


class PaiSettings:
    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}
        self._reload_listeners: list[Callable[[], None]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"unknown PAI setting {name!r}")
        if name not in self._cache:
            user = getattr(settings, "PAI", {}) or {}
            self._cache[name] = user.get(name, DEFAULTS[name])
        return self._cache[name]

    def import_path(self, name: str) -> Any:
        value = getattr(self, name)
        return import_string(value) if isinstance(value, str) else value

    def reload(self) -> None:
        self._cache.clear()
        for listener in self._reload_listeners:
            listener()

    def on_reload(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever ``settings.PAI`` changes (caches built from it, such
        as the agent registry and the executor, register their ``cache_clear``)."""
        self._reload_listeners.append(listener)


pai_settings = PaiSettings()


@receiver(setting_changed)
def _reload(*, setting: str, **_: Any) -> None:
    if setting == "PAI":
        pai_settings.reload()

"""System checks: every omission that would otherwise fail at run time, reported at start-up.

Each message has a stable id (``pai.E0xx`` errors, ``pai.W0xx`` warnings) and a hint that
says what to add (:data:`HINTS`; the table is in docs/reference/settings.md).
``manage.py check --tag pai`` runs only these; ``SILENCED_SYSTEM_CHECKS`` silences a warning
that does not apply (``pai.W003`` on a site served by another ASGI server than daphne).
The MCP servers of the agents are checked in :mod:`pai_threads.checks.mcp` (its hints:
``MCP_HINTS``), registered with these.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Iterator
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from pai_threads.checks.mcp import check_mcp_servers
from pai_threads.conf import DEFAULTS, pai_settings
from pai_threads.executors.gc_tuning import gc_thresholds

__all__ = [
    "HINTS",
    "check_agents",
    "check_celery",
    "check_database",
    "check_http",
    "check_mcp_servers",
    "check_pai_settings",
    "check_realtime",
]

_AGENTS_EXAMPLE = 'PAI["AGENTS"] = ["myapp.agents.support"]: dotted paths of define_agent() results'
_MEMORY_LAYER = "pai_threads.realtime.layers.InMemoryChannelLayer"
_EXTRA = 'pip install "pai-django[{}]" from a checkout or wheel of PAI'

# What to do about each finding, by id: ids are stable, texts may improve.
HINTS: dict[str, str] = {
    "pai.E001": f"{_AGENTS_EXAMPLE}, in a module that imports in this process.",
    "pai.E002": _AGENTS_EXAMPLE + ".",
    "pai.E003": "Use 'thread', 'celery' or the dotted path of an Executor class.",
    "pai.E004": "A dotted path to a pai_agents.files.FileProvider class, or None.",
    "pai.E005": "Point at the result of define_agent(...), not at a module or a tool.",
    "pai.E006": "Agent names key threads: give each agent its own name.",
    "pai.E007": (
        f'One process: CHANNEL_LAYERS = {{"default": {{"BACKEND": "{_MEMORY_LAYER}"}}}}; '
        'several: "pai_threads.realtime.redis_layer.RedisChannelLayer" '
        'with {"CONFIG": {"hosts": [URL]}}.'
    ),
    "pai.E008": "BACKEND is the dotted path of a channel layer class.",
    "pai.E009": (
        'Add "django.contrib.sessions.middleware.SessionMiddleware" (and AuthenticationMiddleware '
        "for logged-in users) to MIDDLEWARE, or set PAI['IDENTITY_RESOLVER'] to your own."
    ),
    "pai.E010": 'Add "django.contrib.sessions" to INSTALLED_APPS and migrate.',
    "pai.E011": "A dotted path to a callable taking the request, returning an Identity or None.",
    "pai.E012": _EXTRA.format("celery") + ".",
    "pai.E013": (
        "Set CELERY_BROKER_URL and load it in a Celery app that your project's __init__.py "
        "imports: app.config_from_object('django.conf:settings', namespace='CELERY') "
        "(as pai_project/celery.py does)."
    ),
    "pai.E014": 'PAI["REALTIME_BUFFER"] is "memory", "redis" or a dotted path to a ReplayBuffer.',
    "pai.E015": 'PAI = {"AGENTS": [...], "EXECUTOR": "thread"}',
    "pai.E016": "See docs/reference/settings.md for each key's type and default.",
    "pai.E017": 'ASGI_APPLICATION = "pai_threads.asgi.application", or your own module.',
    "pai.E018": (
        "PAI's websocket application authenticates connections with Channels' "
        "AuthMiddlewareStack, which needs both apps."
    ),
    "pai.E019": "Set USE_TZ = True (Django's default since 5.0).",
    "pai.W001": (
        "Runs execute in worker processes; browsers connected to the web process only see "
        "them through channels_redis and the Redis replay buffer (set REDIS_URL)."
    ),
    "pai.W002": 'ASGI_APPLICATION = "pai_threads.asgi.application" (see pai_threads.asgi).',
    "pai.W003": (
        'Put "daphne" first in INSTALLED_APPS (' + _EXTRA.format("server") + "); silence "
        "this check if another ASGI server serves the site."
    ),
    "pai.W004": 'Add "ninja" to INSTALLED_APPS: its static files serve the docs offline.',
    "pai.W005": 'Add "django.contrib.staticfiles" to INSTALLED_APPS and set STATIC_URL.',
    "pai.W006": 'Use DjangoTemplates with "APP_DIRS": True (Django\'s default).',
    "pai.W007": 'In the root URLconf: path("api/pai/", include("pai_threads.urls")).',
    "pai.W008": "Check the spelling against docs/reference/settings.md.",
    "pai.W009": (
        "Events of runs on workers never reach this process's buffer, so websocket clients "
        "miss them on resume: set REDIS_URL or PAI['REALTIME_BUFFER'] = 'redis'."
    ),
    "pai.W010": (
        'DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 20, '
        '"init_command": "PRAGMA journal_mode=WAL;"} (what the demo uses).'
    ),
    "pai.W011": (
        'Use "BACKEND": "pai_threads.realtime.redis_layer.RedisChannelLayer", or give each '
        'host a "socket_timeout" above 5 seconds.'
    ),
}


def _msg(check_id: str, text: str, hint: str | None = None) -> CheckMessage:
    """An error (``pai.E...``) or a warning (``pai.W...``), hinted from :data:`HINTS`."""
    level = Error if check_id.startswith("pai.E") else Warning
    return level(text, hint=hint or HINTS[check_id], id=check_id)


def _pai_unreadable() -> bool:
    """A ``PAI`` that is not a dict is reported once (``pai.E015``); other checks skip."""
    return not isinstance(getattr(settings, "PAI", {}), dict)


def _installed(package: str) -> bool:
    """Whether a module can be found (without importing it; its parents are imported)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _import_error(path: str) -> str | None:
    """None when ``path`` imports, else what went wrong (a module may fail with anything)."""
    try:
        import_string(path)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# --------------------------------------------------------------------------- the PAI dict


_ZERO_ALLOWED = frozenset(
    {"REALTIME_COALESCE_MS", "MODEL_MAX_RETRIES", "MODEL_RETRY_BACKOFF_SECONDS"}
)


def _number_problem(name: str, value: Any) -> str | None:
    """What is wrong with a numeric PAI setting, or None. Durations may be fractional;
    sizes and counts are integers; only the coalescing delay and the retry count and backoff
    may be 0."""
    if value is None and name == "CONTEXT_WINDOW_MESSAGES":
        return None
    fractional = name.endswith(("_SECONDS", "_TTL", "_MS"))
    integral = isinstance(value, int) and not isinstance(value, bool)
    if not (integral or (fractional and isinstance(value, float))):
        return "a number" if fractional else "an integer"
    if value < 0 or (value == 0 and name not in _ZERO_ALLOWED):
        return "positive"
    return None


@register("pai")
def check_pai_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The ``PAI`` dict itself: its shape, its numbers, and the dotted paths it names."""
    user = getattr(settings, "PAI", {})
    if not isinstance(user, dict):
        return [_msg("pai.E015", f"settings.PAI is a {type(user).__name__}, not a dict")]
    messages: list[CheckMessage] = []
    unknown = sorted(set(user) - set(DEFAULTS))
    if unknown:
        text = f"PAI has unknown keys, which are ignored: {', '.join(map(repr, unknown))}"
        messages.append(_msg("pai.W008", text))
    for name, default in DEFAULTS.items():
        if isinstance(default, int | float) and not isinstance(default, bool):
            value = getattr(pai_settings, name)
            problem = _number_problem(name, value)
            if problem:
                text = f"PAI[{name!r}] = {value!r} must be {problem}"
                messages.append(_msg("pai.E016", text, f"The default is {default!r}."))
    store_threads = pai_settings.STORE_THREADS
    problem = None if store_threads is None else _number_problem("STORE_THREADS", store_threads)
    if problem:
        text = f"PAI['STORE_THREADS'] = {store_threads!r} must be {problem}"
        messages.append(_msg("pai.E016", text, "The default, None, picks by database."))
    types = pai_settings.FILE_MEDIA_TYPES
    if not isinstance(types, list | tuple) or not all(isinstance(t, str) for t in types):
        messages.append(_msg("pai.E016", "PAI['FILE_MEDIA_TYPES'] must be a list of strings"))
    messages += _check_gc_tuning()
    messages += _check_executor_setting()
    messages += _check_dotted("IDENTITY_RESOLVER", "pai.E011")
    if pai_settings.FILE_PROVIDER is not None:
        messages += _check_dotted("FILE_PROVIDER", "pai.E004")
    return messages


def _check_gc_tuning() -> list[CheckMessage]:
    try:
        gc_thresholds(pai_settings.GC_TUNING)
    except ImproperlyConfigured as exc:
        hint = "True (the default), False, or gc.set_threshold()'s three arguments."
        return [_msg("pai.E016", str(exc), hint)]
    return []


def _check_executor_setting() -> list[CheckMessage]:
    executor = pai_settings.EXECUTOR
    if executor in ("thread", "celery"):
        return []
    problem = "is unknown"
    if isinstance(executor, str) and "." in executor:
        error = _import_error(executor)
        if error is None:
            return []
        problem = f"could not be imported ({error})"
    return [_msg("pai.E003", f"PAI['EXECUTOR'] = {executor!r} {problem}")]


def _check_dotted(name: str, check_id: str) -> list[CheckMessage]:
    value = getattr(pai_settings, name)
    if not isinstance(value, str):
        return [] if callable(value) else [_msg(check_id, f"PAI[{name!r}] = {value!r}")]
    error = _import_error(value)
    return [_msg(check_id, f"PAI[{name!r}] could not be imported: {error}")] if error else []


# --------------------------------------------------------------------------- agents


@register("pai")
def check_agents(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Each ``PAI["AGENTS"]`` entry imports and is a distinct ``define_agent()`` result."""
    if _pai_unreadable():
        return []
    from pai_agents.agent import AgentDefinition

    entries = pai_settings.AGENTS
    if isinstance(entries, str) or not isinstance(entries, list | tuple):
        return [_msg("pai.E016", f"PAI['AGENTS'] = {entries!r} must be a list", _AGENTS_EXAMPLE)]
    if not entries:
        return [_msg("pai.E002", "PAI['AGENTS'] is empty")]
    messages: list[CheckMessage] = []
    names: set[str] = set()
    for entry in entries:
        try:
            agent = import_string(entry) if isinstance(entry, str) else entry
        except Exception as exc:
            text = f"PAI['AGENTS'] entry {entry!r} could not be loaded: {type(exc).__name__}: {exc}"
            messages.append(_msg("pai.E001", text))
            continue
        if not isinstance(agent, AgentDefinition):
            kind = type(agent).__name__
            text = f"PAI['AGENTS'] entry {entry!r} is a {kind}, not an AgentDefinition"
            messages.append(_msg("pai.E005", text))
        elif agent.name in names:
            messages.append(_msg("pai.E006", f"PAI['AGENTS'] defines agent {agent.name!r} twice"))
        else:
            names.add(agent.name)
    return messages


# --------------------------------------------------------------------------- realtime


@register("pai")
def check_realtime(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The websocket's parts: a channel layer, a replay buffer, the auth middleware's apps,
    an ASGI application, and daphne for ``runserver``."""
    if _pai_unreadable():
        return []
    return [*_check_channel_layer(), *_check_buffer(), *_check_websocket_auth(), *_check_asgi()]


def _check_channel_layer() -> list[CheckMessage]:
    layer = (getattr(settings, "CHANNEL_LAYERS", None) or {}).get("default")
    if not layer:
        text = "CHANNEL_LAYERS has no 'default' layer: PAI's websocket would fail on connect"
        return [_msg("pai.E007", text)]
    backend = str(layer.get("BACKEND", ""))
    error = _import_error(backend)
    if error is not None:
        hint = _EXTRA.format("redis") + "." if backend.startswith("channels_redis") else None
        text = f"The channel layer {backend!r} could not be imported: {error}"
        return [_msg("pai.E008", text, hint)]
    if pai_settings.EXECUTOR == "celery" and "InMemoryChannelLayer" in backend:
        text = "PAI['EXECUTOR'] is 'celery' but the channel layer is in-memory"
        return [_msg("pai.W001", text)]
    if backend == "channels_redis.core.RedisChannelLayer" and _short_socket_timeout(layer):
        text = (
            "channels_redis' layer with redis-py's 5 s socket timeout: its 5 s blocking "
            "receive times out on idle websockets and Channels closes them with 1011"
        )
        return [_msg("pai.W011", text)]
    return []


def _short_socket_timeout(layer: dict[str, Any]) -> bool:
    """Whether a host of a stock channels_redis layer keeps redis-py's default timeout."""
    hosts = (layer.get("CONFIG") or {}).get("hosts") or ["redis://localhost:6379"]
    for host in hosts:
        timeout = host.get("socket_timeout") if isinstance(host, dict) else None
        if not isinstance(timeout, int | float) or timeout <= 5:
            return True
    return False


def _check_buffer() -> list[CheckMessage]:
    from pai_threads.realtime.conf import redis_url

    name = pai_settings.REALTIME_BUFFER or ("redis" if redis_url() else "memory")
    problem, hint = None, None
    if name == "redis" and not _installed("redis"):
        problem, hint = "needs the redis package", _EXTRA.format("redis") + "."
    elif name == "redis" and not redis_url():
        problem, hint = "has no server", 'Set PAI["REALTIME_REDIS_URL"] or settings.REDIS_URL.'
    elif name not in ("memory", "redis") and (error := _import_error(str(name))):
        problem = f"could not be imported ({error})"
    if problem:
        return [_msg("pai.E014", f"The replay buffer {name!r} {problem}", hint)]
    if name == "memory" and pai_settings.EXECUTOR == "celery":
        text = "PAI['EXECUTOR'] is 'celery' but the replay buffer is in-memory"
        return [_msg("pai.W009", text)]
    return []


def _check_websocket_auth() -> list[CheckMessage]:
    needed = ("django.contrib.auth", "django.contrib.contenttypes")
    missing = [app for app in needed if not apps.is_installed(app)]
    if not missing:
        return []
    return [_msg("pai.E018", f"{' and '.join(missing)} not in INSTALLED_APPS")]


def _check_asgi() -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    path = getattr(settings, "ASGI_APPLICATION", None)
    if not path:
        text = "ASGI_APPLICATION is not set: runserver cannot serve PAI's websocket"
        messages.append(_msg("pai.W002", text))
    elif not _installed(str(path).rpartition(".")[0]):
        messages.append(_msg("pai.E017", f"ASGI_APPLICATION = {path!r}: no such module"))
    order = [config.name for config in apps.get_app_configs()]
    if "daphne" not in order:
        where = "not in INSTALLED_APPS" + ("" if _installed("daphne") else " (nor installed)")
    elif "django.contrib.staticfiles" in order and order.index("daphne") > order.index(
        "django.contrib.staticfiles"
    ):
        where = "after django.contrib.staticfiles in INSTALLED_APPS"
    else:
        return messages
    text = f'"daphne" is {where}: runserver serves WSGI, and PAI\'s websocket is a 404'
    messages.append(_msg("pai.W003", text))
    return messages


# --------------------------------------------------------------------------- HTTP


@register("pai")
def check_http(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """What the HTTP API, its docs and the chat page need from the project."""
    if _pai_unreadable():
        return []
    messages = _check_sessions()
    if not apps.is_installed("ninja"):
        text = '"ninja" is not in INSTALLED_APPS: /api/pai/docs loads Swagger UI from a CDN'
        messages.append(_msg("pai.W004", text))
    if not apps.is_installed("django.contrib.staticfiles"):
        text = "django.contrib.staticfiles is not installed: pai/client.js is not served"
        messages.append(_msg("pai.W005", text))
    return messages + _check_urls()


def _has_middleware(path: str) -> bool:
    """Whether MIDDLEWARE has ``path`` or a subclass of it."""
    wanted = import_string(path)
    for candidate in getattr(settings, "MIDDLEWARE", None) or ():
        try:
            found = import_string(candidate)
        except ImportError:
            continue
        if inspect.isclass(found) and issubclass(found, wanted):
            return True
    return False


def _check_sessions() -> list[CheckMessage]:
    from pai_threads.identity import session_identity

    try:
        resolver = pai_settings.import_path("IDENTITY_RESOLVER")
    except Exception:
        return []  # reported as pai.E011
    if resolver is not session_identity:
        return []
    messages: list[CheckMessage] = []
    if not _has_middleware("django.contrib.sessions.middleware.SessionMiddleware"):
        text = "The default identity resolver needs SessionMiddleware, which is not in MIDDLEWARE"
        messages.append(_msg("pai.E009", text))
    database_sessions = settings.SESSION_ENGINE.endswith((".backends.db", ".backends.cached_db"))
    if database_sessions and not apps.is_installed("django.contrib.sessions"):
        text = (
            "The default identity resolver keeps sessions in the database, but "
            "django.contrib.sessions is not in INSTALLED_APPS"
        )
        messages.append(_msg("pai.E010", text))
    return messages


def _views(patterns: list[Any]) -> Iterator[Any]:
    """Every view callback of a URLconf, included ones too."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            yield from _views(pattern.url_patterns)
        else:
            yield pattern.callback


def _check_urls() -> list[CheckMessage]:
    from django.template import TemplateDoesNotExist
    from django.template.loader import get_template
    from django.urls import Resolver404, get_resolver, resolve

    from pai_threads.ai_sdk.endpoint import chat
    from pai_threads.views import ChatView

    try:
        views = list(_views(get_resolver().url_patterns))
    except Exception:
        return []  # Django's own URL checks report a URLconf that does not load
    messages: list[CheckMessage] = []
    try:
        served = resolve("/api/pai/ai-sdk/chat").func is chat
    except Resolver404:
        served = False
    if not served:
        text = "PAI's HTTP API is not at /api/pai/, where the chat page and client.js call it"
        messages.append(_msg("pai.W007", text))
    classes = [getattr(view, "view_class", None) for view in views]
    if any(isinstance(cls, type) and issubclass(cls, ChatView) for cls in classes):
        try:
            get_template(ChatView.template_name)
        except TemplateDoesNotExist:
            text = f"ChatView is mounted but its template {ChatView.template_name!r} is not found"
            messages.append(_msg("pai.W006", text))
    return messages


# --------------------------------------------------------------------------- database


@register("pai")
def check_database(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Timestamps are aware; runs write from background threads (or other processes)."""
    messages: list[CheckMessage] = []
    if not settings.USE_TZ:
        text = "USE_TZ is False: PAI stores timezone-aware timestamps, which the database refuses"
        messages.append(_msg("pai.E019", text))
    default = settings.DATABASES.get("default", {})
    options = default.get("OPTIONS") or {}
    if default.get("ENGINE") == "django.db.backends.sqlite3" and (
        str(options.get("transaction_mode", "")).upper() != "IMMEDIATE"
    ):
        text = (
            "SQLite without transaction_mode IMMEDIATE: a run writing while a request writes "
            "can fail with 'database is locked'"
        )
        messages.append(_msg("pai.W010", text))
    return messages


# --------------------------------------------------------------------------- Celery


@register("pai")
def check_celery(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The Celery executor's parts: the package, and a broker this process dispatches to."""
    if _pai_unreadable():
        return []
    if pai_settings.EXECUTOR != "celery":
        return []
    if not _installed("celery"):
        return [_msg("pai.E012", "PAI['EXECUTOR'] is 'celery' but Celery is not installed")]
    from celery import current_app

    if not current_app.conf.broker_url:
        text = (
            "PAI['EXECUTOR'] is 'celery' but this process's Celery app has no broker URL: "
            "runs would never reach a worker"
        )
        return [_msg("pai.E013", text)]
    return []

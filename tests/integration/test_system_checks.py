"""System checks: a project missing each piece PAI needs gets that piece's id at start-up.

Each case changes the demo settings by one omission (or one mistake) and runs Django's check
framework; a package that is "not installed" is hidden from the import system the way a
missing package is (``sys.modules[name] = None``). The demo settings themselves report none.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.checks import run_checks

from pai_threads.checks import HINTS

REPO_ROOT = Path(__file__).resolve().parents[2]

Configure = Callable[[Any, pytest.MonkeyPatch, Path], None]


def pai_ids() -> set[str]:
    messages = run_checks(tags=["pai"])
    for message in messages:
        assert message.hint, f"{message.id} has no hint"
    return {str(m.id) for m in messages}


def pai(settings: Any, **changes: Any) -> None:
    settings.PAI = {**django_settings.PAI, **changes}


def without_app(settings: Any, *names: str) -> None:
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a not in names]


def hide_packages(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``names`` (and their loaded submodules) unimportable, as if not installed."""
    for name in names:
        for loaded in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            monkeypatch.setitem(sys.modules, loaded, None)
        monkeypatch.setitem(sys.modules, name, None)


def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))


def broken_agent_module(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    module(tmp_path, monkeypatch, "adopter_agents", "from pai_agents import no_such_name\n")
    pai(settings, AGENTS=["adopter_agents.support"])


def redis_layer_without_channels_redis(
    settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hide_packages(monkeypatch, "channels_redis")
    layer = {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["x"]}}
    settings.CHANNEL_LAYERS = {"default": layer}


def celery_without_broker(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from celery import current_app

    # A Celery app reads the settings once; earlier tests in this process may have loaded it.
    # Patched first, while it still reads the real URL, so that the undo restores that URL.
    monkeypatch.setattr(current_app.conf, "broker_url", None)
    pai(settings, EXECUTOR="celery")
    settings.CELERY_BROKER_URL = None


def urlconf_without_api(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    source = (
        "from django.urls import path\n"
        "from pai_threads.views import ChatView\n"
        "urlpatterns = [path('chat/', ChatView.as_view())]\n"
    )
    module(tmp_path, monkeypatch, "adopter_urls", source)
    settings.ROOT_URLCONF = "adopter_urls"


def daphne_after_staticfiles(
    settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    apps = [a for a in settings.INSTALLED_APPS if a != "daphne"]
    settings.INSTALLED_APPS = [*apps, "daphne"]


def no_template_loader(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    engine = {**settings.TEMPLATES[0], "APP_DIRS": False}
    settings.TEMPLATES = [engine]


def delete(name: str) -> Configure:
    def configure(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        delattr(settings, name)

    return configure


def set_pai(**changes: Any) -> Configure:
    def configure(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        pai(settings, **changes)

    return configure


def set_setting(name: str, value: Any) -> Configure:
    def configure(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        setattr(settings, name, value)

    return configure


def remove_apps(*names: str) -> Configure:
    def configure(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        without_app(settings, *names)

    return configure


def celery_missing(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hide_packages(monkeypatch, "celery")
    pai(settings, EXECUTOR="celery")


def redis_buffer_without_redis(
    settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hide_packages(monkeypatch, "redis")
    pai(settings, REALTIME_BUFFER="redis", REALTIME_REDIS_URL="redis://127.0.0.1:1/0")


def without_session_middleware(
    settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    session = "django.contrib.sessions.middleware.SessionMiddleware"
    # Django's admin needs it too; PAI's finding is the one under test.
    without_app(settings, "django.contrib.admin")
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != session]


def sqlite_with_django_defaults(
    settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """startproject's SQLite entry; only the check reads it (connections keep theirs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Overriding setting DATABASES ..."
        settings.DATABASES = {
            "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "db")}
        }


AUTH_APPS = ("django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes")

# id -> (what is missing or wrong, how to configure it, ids allowed to come along)
CASES: dict[str, tuple[str, Configure, set[str]]] = {
    "pai.E001": ("an agent module that does not import", broken_agent_module, set()),
    "pai.E002": ("no agents", set_pai(AGENTS=[]), set()),
    "pai.E003": ("an executor that does not exist", set_pai(EXECUTOR="no.such.Executor"), set()),
    "pai.E004": ("a file provider that does not import", set_pai(FILE_PROVIDER="no.Such"), set()),
    "pai.E005": (
        "an agent entry that is a tool",
        set_pai(AGENTS=["pai_project.agents.demo.calculator"]),
        set(),
    ),
    "pai.E006": (
        "one agent twice",
        set_pai(AGENTS=["pai_project.agents.demo.assistant"] * 2),
        set(),
    ),
    "pai.E007": ("no CHANNEL_LAYERS", delete("CHANNEL_LAYERS"), set()),
    "pai.E008": (
        "the Redis layer without channels_redis",
        redis_layer_without_channels_redis,
        set(),
    ),
    "pai.E009": ("no SessionMiddleware", without_session_middleware, set()),
    "pai.E010": ("no sessions app", remove_apps("django.contrib.sessions"), set()),
    "pai.E011": (
        "an identity resolver that does not import",
        set_pai(IDENTITY_RESOLVER="x.y"),
        set(),
    ),
    "pai.E012": ("the Celery executor without Celery", celery_missing, {"pai.W001", "pai.W009"}),
    "pai.E013": (
        "the Celery executor without a broker",
        celery_without_broker,
        {"pai.W001", "pai.W009"},
    ),
    "pai.E014": ("the Redis replay buffer without redis", redis_buffer_without_redis, set()),
    "pai.E015": ("PAI that is not a dict", set_setting("PAI", ["assistant"]), set()),
    "pai.E016": ("a lease of zero seconds", set_pai(LEASE_SECONDS=0), set()),
    "pai.E017": (
        "ASGI_APPLICATION in no module",
        set_setting("ASGI_APPLICATION", "nope.app"),
        set(),
    ),
    "pai.E018": ("no auth apps (websocket auth)", remove_apps(*AUTH_APPS), set()),
    "pai.E019": ("USE_TZ off", set_setting("USE_TZ", False), set()),
    "pai.W001": (
        "the Celery executor with the in-memory layer",
        set_pai(EXECUTOR="celery", REALTIME_BUFFER="redis", REALTIME_REDIS_URL="redis://x"),
        set(),
    ),
    "pai.W002": ("no ASGI_APPLICATION", delete("ASGI_APPLICATION"), set()),
    "pai.W003": ("no daphne", remove_apps("daphne"), set()),
    "pai.W004": ("no ninja app", remove_apps("ninja"), set()),
    "pai.W005": ("no staticfiles", remove_apps("django.contrib.staticfiles"), set()),
    "pai.W006": ("a chat page without the app template loader", no_template_loader, set()),
    "pai.W007": ("a URLconf without the API", urlconf_without_api, set()),
    "pai.W010": ("SQLite without IMMEDIATE transactions", sqlite_with_django_defaults, set()),
    "pai.W008": ("a misspelt PAI key", set_pai(EXECUTER="celery"), set()),
    "pai.W011": (
        "the stock channels_redis layer with redis-py's 5 s socket timeout",
        set_setting(
            "CHANNEL_LAYERS",
            {
                "default": {
                    "BACKEND": "channels_redis.core.RedisChannelLayer",
                    "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
                }
            },
        ),
        set(),
    ),
    "pai.W009": (
        "the Celery executor with the in-memory buffer",
        set_pai(EXECUTOR="celery", REALTIME_BUFFER="memory"),
        {"pai.W001"},
    ),
}

# More ways to get the same finding.
VARIANTS: list[tuple[str, str, Configure]] = [
    ("pai.E001", "an agent module that is missing", set_pai(AGENTS=["no_such_module.agent"])),
    ("pai.E003", "an unknown executor name", set_pai(EXECUTOR="threads")),
    ("pai.E007", "CHANNEL_LAYERS without a default", set_setting("CHANNEL_LAYERS", {})),
    ("pai.E014", "the Redis buffer without a server", set_pai(REALTIME_BUFFER="redis")),
    ("pai.E016", "AGENTS as one string", set_pai(AGENTS="pai_project.agents.demo.assistant")),
    ("pai.E016", "a page size as text", set_pai(PAGE_SIZE="50")),
    ("pai.E016", "no store threads", set_pai(STORE_THREADS=0)),
    ("pai.E016", "store threads as text", set_pai(STORE_THREADS="4")),
    ("pai.W003", "daphne after staticfiles", daphne_after_staticfiles),
]


def test_every_id_has_a_case_and_a_hint() -> None:
    assert set(CASES) == set(HINTS)


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_missing_piece_reports_its_id(
    check_id: str, settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    what, configure, companions = CASES[check_id]
    configure(settings, monkeypatch, tmp_path)
    found = pai_ids()
    assert check_id in found, f"{what}: expected {check_id}, got {sorted(found)}"
    assert found - {check_id} <= companions, f"{what}: unrelated findings {sorted(found)}"


@pytest.mark.parametrize(
    ("check_id", "configure"),
    [(check_id, configure) for check_id, _, configure in VARIANTS],
    ids=[what for _, what, _ in VARIANTS],
)
def test_variant_reports_its_id(
    check_id: str,
    configure: Configure,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    configure(settings, monkeypatch, tmp_path)
    assert check_id in pai_ids()


def test_install_hints_name_the_extra(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing optional package points at the extra that brings it."""
    redis_layer_without_channels_redis(settings, monkeypatch, Path())
    (message,) = [m for m in run_checks(tags=["pai"]) if m.id == "pai.E008"]
    assert 'pip install "pai-django[redis]"' in str(message.hint)


def test_demo_settings_report_nothing() -> None:
    assert pai_ids() == set()


@pytest.mark.parametrize("environment", [{}, {"REDIS_URL": "redis://127.0.0.1:6379/0"}])
def test_demo_check_command_is_clean(environment: dict[str, str]) -> None:
    """``manage.py check`` on the demo site, embedded and with Redis/Celery: no finding at
    all, warnings included."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "REDIS_URL")}
    env.update(environment)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--fail-level", "WARNING"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout

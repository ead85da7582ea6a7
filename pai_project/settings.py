"""Settings for the demo site.

Embedded default: SQLite file, in-memory channel layer, in-process ("thread") executor and
the offline scripted model. Each of these switches to production parts through the
environment: DATABASE_URL, REDIS_URL, PAI_EXECUTOR, OPENAI_API_KEY / OPENAI_BASE_URL, PAI_MODEL.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "pai-demo-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",  # serves the Swagger UI's assets locally: /api/pai/docs works offline
    "pai_agents",
    "pai_threads",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "pai_project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "pai_project.wsgi.application"
ASGI_APPLICATION = "pai_project.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
    )
}
if (
    DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    and os.environ.get("DATABASE_POOL", "1") == "1"
):
    # Runs touch the database from many worker threads, each operation ending like a request
    # (close_old_connections); the pool makes that close a cheap return instead of a reconnect.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # The pool checks a connection before handing it out: after a database restart the first
    # operations get fresh connections instead of failing on ones the restart cut.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": int(os.environ.get("DATABASE_POOL_MAX_SIZE", "40")),
        "timeout": 30,
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the in-process executor write while requests read; the timeout rides out
    # the short write transactions of concurrent runs instead of failing with "locked".
    # synchronous=NORMAL (WAL's usual pairing): a commit survives a killed process but not a
    # power loss, and costs no fsync (docs/operations.md, Databases).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # Tests use a file, not Django's shared-cache in-memory database: runs write from other
    # threads, and shared-cache mode fails with "table is locked" instead of waiting.
    # One file per test process, so concurrent test runs never share (or delete) it.
    DATABASES["default"]["TEST"] = {
        "NAME": os.path.join(tempfile.gettempdir(), f"pai-test-{os.getpid()}.sqlite3")
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Uploaded files (PAI attachments) in the default storage; never served as static files.
MEDIA_ROOT = os.environ.get("DJANGO_MEDIA_ROOT") or BASE_DIR / "media"

REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "pai_threads.realtime.redis_layer.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "pai_threads.realtime.layers.InMemoryChannelLayer"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Through a broker outage: reconnect for as long as it takes (Celery's default gives up after
# 100 attempts and the worker exits), at most 4 s apart, keep runs in progress going (their
# lease, not the broker, says who executes them), and use kombu's Redis transport with the
# Celery 5.7 crash at connection loss fixed (pai_threads.executors.broker explains both).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CONSUMER = "pai_threads.executors.broker:Consumer"
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_TRANSPORT = (
    "pai_threads.executors.broker:Transport"
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
    else None
)
# The sweeper: re-dispatch runs whose worker died (run `celery -A pai_project beat`).
CELERY_BEAT_SCHEDULE = {
    "pai-recover-runs": {"task": "pai_threads.recover_runs", "schedule": 15.0},
}

PAI = {
    "AGENTS": ["pai_project.agents.demo.assistant"],
    "EXECUTOR": os.environ.get("PAI_EXECUTOR", "celery" if REDIS_URL else "thread"),
    "IDENTITY_RESOLVER": "pai_threads.identity.session_identity",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"pai": {"handlers": ["console"], "level": os.environ.get("PAI_LOG_LEVEL", "INFO")}},
}

"""Django settings for benchmark processes (the driver and the Celery worker alike).

The demo site's settings, with the benchmark agents registered and production-like
switches: ``DEBUG`` off (no ``connection.queries`` log growing per statement) and the
``pai`` logger at WARNING (one INFO line per run is noise in 600-run loops).
The database still comes from ``DATABASE_URL`` and the executor from ``PAI_EXECUTOR`` /
``REDIS_URL``, exactly as for the site.

``PAI_BENCH_BROKER_URL`` gives the benchmark *driver* a Celery broker without ``REDIS_URL``,
which would also move its realtime replay buffer and channel layer to Redis: W1/W2 must
measure the same configuration whether or not W3 (which needs the broker) runs too. The
Celery worker of W3 gets ``REDIS_URL`` itself, i.e. the full production configuration.
"""

from __future__ import annotations

import os

from pai_project.settings import *  # noqa: F403
from pai_project.settings import LOGGING, PAI

DEBUG = False

_BROKER_URL = os.environ.get("PAI_BENCH_BROKER_URL", "")
if _BROKER_URL:
    CELERY_BROKER_URL = _BROKER_URL

PAI = {
    **PAI,
    "AGENTS": [
        "benchmarks.agents.w1_agent",
        "benchmarks.agents.w1_lifecycle_agent",
        "benchmarks.agents.w2_agent",
        "benchmarks.agents.stream_agent",
        "benchmarks.agents.ttft_agent",
    ],
}

LOGGING = {
    **LOGGING,
    "loggers": {
        "pai": {"handlers": ["console"], "level": os.environ.get("PAI_LOG_LEVEL", "WARNING")},
    },
}

if os.environ.get("PAI_BENCH_CHANNEL_LAYER") == "throttled" and not os.environ.get("REDIS_URL"):
    # An experiment (benchmarks/experiments.py), never part of the published configuration.
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "benchmarks.experiments.ThrottledInMemoryChannelLayer"}
    }

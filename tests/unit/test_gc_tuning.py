"""PAI["GC_TUNING"] (issue 16): its validation, what tune_gc does to the interpreter, and that
a process started the way a server starts is tuned (and left alone with False).

Every test that tunes restores the interpreter afterwards (unfreeze, the old thresholds), so
the test process itself keeps CPython's defaults.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from pai_threads.checks import check_pai_settings
from pai_threads.executors import gc_tuning
from pai_threads.executors.gc_tuning import DEFAULT_THRESHOLDS, gc_thresholds, tune_gc

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def interpreter() -> Iterator[tuple[int, int, int]]:
    """The thresholds before the test; the gc state is restored after it."""
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0, "the test process must not run frozen"
    mp = pytest.MonkeyPatch()
    mp.setattr(gc_tuning, "_tuned_pid", None)
    try:
        yield before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
        mp.undo()


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, DEFAULT_THRESHOLDS),
        (False, None),
        ((10_000, 5, 5), (10_000, 5, 5)),
        ([10_000, 5, 5], (10_000, 5, 5)),
    ],
)
def test_valid_values(value: Any, expected: tuple[int, int, int] | None) -> None:
    assert gc_thresholds(value) == expected


BAD_VALUES = [None, 1, 0, "yes", (50_000, 20), (50_000, 20, 100, 1), (50_000, 20, "100")]
BAD_VALUES += [(0, 20, 100), (50_000, -1, 100), (True, 20, 100), (50_000.0, 20, 100), "abc"]


@pytest.mark.parametrize("value", BAD_VALUES)
def test_bad_values_raise_a_clear_error(value: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"PAI\['GC_TUNING'\] = .* must be True"):
        gc_thresholds(value)


@pytest.mark.parametrize("value", [(50_000, 20), "on", None])
def test_the_system_check_reports_a_bad_value(value: Any, settings: Any) -> None:
    settings.PAI = {**django_settings.PAI, "GC_TUNING": value}
    found = [m for m in check_pai_settings() if "GC_TUNING" in m.msg]
    assert [m.id for m in found] == ["pai.E016"]
    assert found[0].hint and "gc.set_threshold" in found[0].hint


@pytest.mark.parametrize("value", [True, False, (1000, 10, 10)])
def test_the_system_check_accepts_good_values(value: Any, settings: Any) -> None:
    settings.PAI = {**django_settings.PAI, "GC_TUNING": value}
    assert not [m for m in check_pai_settings() if "GC_TUNING" in m.msg]


def test_the_default_is_on() -> None:
    from pai_threads.conf import DEFAULTS

    assert DEFAULTS["GC_TUNING"] is True


# --------------------------------------------------------------------------- tune_gc


def test_tune_gc_freezes_and_sets_the_thresholds(interpreter: tuple[int, int, int]) -> None:
    assert tune_gc(True) == DEFAULT_THRESHOLDS
    assert gc.get_threshold() == DEFAULT_THRESHOLDS
    assert gc.get_freeze_count() > 0


def test_tune_gc_reads_the_setting(interpreter: tuple[int, int, int], settings: Any) -> None:
    settings.PAI = {**django_settings.PAI, "GC_TUNING": [20_000, 7, 9]}
    assert tune_gc() == (20_000, 7, 9)
    assert gc.get_threshold() == (20_000, 7, 9)


def test_false_leaves_the_interpreter_alone(interpreter: tuple[int, int, int]) -> None:
    assert tune_gc(False) is None
    assert gc.get_threshold() == interpreter
    assert gc.get_freeze_count() == 0


def test_tune_gc_is_idempotent(interpreter: tuple[int, int, int]) -> None:
    tune_gc(True)
    frozen = gc.get_freeze_count()
    assert tune_gc((1000, 10, 10)) is None  # once per process: the second call does nothing
    assert gc.get_threshold() == DEFAULT_THRESHOLDS
    assert gc.get_freeze_count() == frozen


def test_a_forked_child_tunes_itself_again(
    interpreter: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gc_tuning, "_tuned_pid", os.getpid() + 1)  # tuned by the "parent"
    assert tune_gc(True) == DEFAULT_THRESHOLDS


def test_a_bad_value_fails_before_touching_anything(interpreter: tuple[int, int, int]) -> None:
    with pytest.raises(ImproperlyConfigured):
        tune_gc((1, 2))
    assert gc.get_threshold() == interpreter
    assert gc.get_freeze_count() == 0


def test_celery_worker_processes_are_tuned(interpreter: tuple[int, int, int]) -> None:
    from celery.signals import worker_process_init

    import pai_threads.tasks  # noqa: F401  (connects the worker signals, as Celery's import does)

    worker_process_init.send(sender="worker@test")
    assert gc.get_threshold() == DEFAULT_THRESHOLDS
    assert gc.get_freeze_count() > 0


# --------------------------------------------------------------------------- a server process

# What a web process runs: Django set up, then start_background_services() (as
# pai_threads.asgi.get_application does). The Celery executor keeps the embedded sweeper,
# which would need a migrated database, out of it.
SERVER = textwrap.dedent(
    """
    import gc
    import django

    django.setup()
    from pai_threads.asgi import start_background_services

    start_background_services()
    print(tuple(gc.get_threshold()), gc.get_freeze_count() > 0)
    """
)


def _server_gc(tmp_path: Path, settings_module: str) -> str:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "PAI_EXECUTOR": "celery",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)]),
    }
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", SERVER],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_server_process_is_tuned_and_false_leaves_it_alone(tmp_path: Path) -> None:
    off = tmp_path / "gc_off_settings.py"
    off.write_text(
        'from pai_project.settings import *  # noqa\n\nPAI = {**PAI, "GC_TUNING": False}\n'
    )
    assert _server_gc(tmp_path, "pai_project.settings") == f"{DEFAULT_THRESHOLDS} True"
    assert _server_gc(tmp_path, "gc_off_settings") == f"{gc.get_threshold()} False"

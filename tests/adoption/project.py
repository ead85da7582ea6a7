"""A fresh adopter: PAI's wheel in a new virtualenv, and a ``startproject`` site using it.

:func:`build_wheel` builds the wheel from a copy of the working tree (the repository stays
clean). :class:`Environment` installs it into a new virtualenv in the background, so the two
Django lines install in parallel. :class:`Project` is a ``django-admin startproject`` site run
through that virtualenv's ``manage.py``, including ``runserver`` on a free loopback port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from tests.support.server import DaphneServer

__all__ = ["Environment", "Project", "Runserver", "build_wheel", "find_python", "scrubbed_env"]

REPO_ROOT = Path(__file__).resolve().parents[2]

# The adopter's shell knows nothing of this repository's settings, services, model keys or venv.
_FOREIGN_PREFIXES = ("DJANGO_", "PAI_", "OPENAI_")
_FOREIGN = ("DATABASE_URL", "REDIS_URL", "VIRTUAL_ENV", "PYTHONPATH")

Say = Callable[[str], None]


def scrubbed_env(venv: Path | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _FOREIGN and not k.startswith(_FOREIGN_PREFIXES)
    }
    env.update(PYTHONUNBUFFERED="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def find_python(minimum: str) -> str | None:
    """A working interpreter >= ``minimum`` (``scripts/find-python``), or None."""
    result = subprocess.run(
        [str(REPO_ROOT / "scripts" / "find-python"), minimum],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def copy_source(work: Path) -> Path:
    """The working tree's tracked and new files, copied to ``work/source``."""
    source = work / "source"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        origin = REPO_ROOT / name
        if origin.is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, source / name)
    return source


def build_wheel(work: Path, say: Say) -> Path:
    """``pip wheel --no-deps`` of the working tree's tracked and new files."""
    source = copy_source(work)
    say("building the wheel (pip wheel --no-deps)")
    out = work / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        env=scrubbed_env(),
        capture_output=True,
        check=True,
        timeout=600,
    )
    (wheel,) = out.glob("pai_django-*.whl")
    return wheel


class Environment:
    """A new virtualenv with the wheel (and its extras) and one Django line, installing in
    the background from the moment it is made."""

    def __init__(self, *, python: str, path: Path, requirements: list[str], say: Say) -> None:
        self.path = path
        self.log = path.with_suffix(".pip.log")
        self.say = say
        self.started = time.monotonic()
        script = (
            f"{python!s} -m venv {path!s} && "
            f"{path / 'bin' / 'python'!s} -m pip install --progress-bar off --no-compile "
            + " ".join(f'"{r}"' for r in requirements)
        )
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                ["bash", "-c", script],
                env=scrubbed_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def wait(self, timeout: float = 900.0) -> Environment:
        returncode = self.process.wait(timeout)
        tail = self.log.read_text(errors="replace")[-3000:]
        assert returncode == 0, f"installing into {self.path.name} failed:\n{tail}"
        self.say(f"{self.path.name}: installed ({time.monotonic() - self.started:.0f} s)")
        return self

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)


class Project:
    """A ``startproject`` site named ``mysite`` in ``path``, run with ``env``'s Python."""

    def __init__(self, env: Environment, path: Path) -> None:
        self.env = env
        self.path = path
        self.shell_env = scrubbed_env(env.path)

    @classmethod
    def start(cls, env: Environment, path: Path) -> Project:
        path.mkdir(parents=True)
        admin = env.path / "bin" / "django-admin"
        subprocess.run([str(admin), "startproject", "mysite", str(path)], check=True, timeout=120)
        return cls(env, path)

    @property
    def settings_file(self) -> Path:
        return self.path / "mysite" / "settings.py"

    @property
    def urls_file(self) -> Path:
        return self.path / "mysite" / "urls.py"

    def append(self, file: Path, block: str) -> None:
        file.parent.mkdir(parents=True, exist_ok=True)
        existing = file.read_text() if file.exists() else ""
        file.write_text(existing + ("\n\n" if existing else "") + block)

    def manage(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 180.0
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.env.python), "manage.py", *args],
            cwd=self.path,
            env={**self.shell_env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert result.returncode == 0, (
            f"manage.py {' '.join(args)} exited {result.returncode}\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
        return result

    @contextlib.contextmanager
    def runserver(self, log: Path) -> Iterator[Runserver]:
        """``manage.py runserver`` (daphne's, when it is first in INSTALLED_APPS)."""
        server = Runserver(self, log)
        try:
            yield server.start()
        finally:
            server.stop()


class Runserver(DaphneServer):
    """A project's ``manage.py runserver`` on a free loopback port, in the adopter's shell;
    stopped (and its log read) like the suite's own daphne servers."""

    def __init__(self, project: Project, log_path: Path) -> None:
        super().__init__(database_url="", log_path=log_path)
        self.project = project
        self.env = project.shell_env

    def start(self, timeout: float = 60.0) -> Runserver:
        address = f"127.0.0.1:{self.port}"
        argv = [str(self.project.env.python), "manage.py", "runserver", address, "--noreload"]
        with self.log_path.open("wb") as out:
            self.process = subprocess.Popen(
                argv,
                cwd=self.project.path,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/api/pai/session", timeout=2).status_code == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"runserver did not come up\n{self.log_text()[-4000:]}")

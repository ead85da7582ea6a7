"""Issue 14, point 1: the wheel and the sdist carry what a project needs from the apps.

Static files and templates live inside ``pai_threads`` (found by staticfiles and the app
template loader), with every migration and the ``py.typed`` markers; a distribution that
misses one gives an adopting project a 404 for ``/static/pai/client.js`` or a missing table.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.adoption.project import REPO_ROOT, build_wheel, copy_source, scrubbed_env

pytestmark = [pytest.mark.adoption, pytest.mark.slow]


def _expected() -> set[str]:
    package = REPO_ROOT / "pai_threads"
    names = {
        str(path.relative_to(REPO_ROOT))
        for pattern in ("static/pai/*", "templates/pai/*", "migrations/0*.py")
        for path in package.glob(pattern)
    }
    assert any(n.endswith("client.js") for n in names) and any(n.endswith(".html") for n in names)
    return names | {"pai_threads/py.typed", "pai_agents/py.typed"}


def test_the_wheel_carries_static_files_templates_and_migrations(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, lambda message: None)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert _expected() <= names, sorted(_expected() - names)


def test_the_sdist_carries_static_files_templates_and_migrations(tmp_path: Path) -> None:
    source = copy_source(tmp_path)
    venv = tmp_path / "build-venv"
    env = scrubbed_env()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "setuptools>=77", "wheel"],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    out = tmp_path / "dist"
    build = f"from setuptools import build_meta; build_meta.build_sdist({str(out)!r})"
    subprocess.run(
        [str(python), "-c", build],
        cwd=source,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (sdist,) = out.glob("pai_django-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert _expected() <= names, sorted(_expected() - names)

"""Fixtures of the adoption test: the wheel, one virtualenv per Django line, the new project.

Both virtualenvs install in parallel from the start; a line's tests wait only for its own.
Progress goes straight to the terminal (``[adoption  12.3 s] ...``), past pytest's capture.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.adoption.project import REPO_ROOT, Environment, Project, Say, build_wheel, find_python
from tests.adoption.readme import Command, commands, install_extras, marked_blocks

README = REPO_ROOT / "README.md"


@dataclass(frozen=True)
class DjangoLine:
    requirement: str
    minimum_python: str | None  # None: this test's own interpreter


LINES = {
    "5.2": DjangoLine("Django>=5.2,<5.3", None),
    "6.1": DjangoLine("Django>=6.1,<6.2", "3.12"),
}


@dataclass
class Adopted:
    """A migrated project, and what each README command printed."""

    line: str
    project: Project
    ran: list[tuple[Command, str]]


@pytest.fixture(scope="module")
def say(pytestconfig: pytest.Config) -> Say:
    started = time.monotonic()
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")

    def say(text: str) -> None:
        line = f"[adoption {time.monotonic() - started:6.1f} s] {text}"
        if capture is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)

    return say


@pytest.fixture(scope="module")
def blocks() -> dict[str, str]:
    found = marked_blocks(README)
    assert set(found) >= {"install", "settings", "urls", "agent", "commands"}, sorted(found)
    return found


@pytest.fixture(scope="module")
def environments(
    tmp_path_factory: pytest.TempPathFactory, blocks: dict[str, str], say: Say
) -> Iterator[dict[str, Environment | str]]:
    """Each Django line's virtualenv, installing; or why that line cannot run here."""
    work = tmp_path_factory.mktemp("adoption")
    wheel = build_wheel(work, say)
    extras = install_extras(blocks["install"])
    started: dict[str, Environment | str] = {}
    for line, spec in LINES.items():
        python = sys.executable
        if spec.minimum_python is not None:
            found = find_python(spec.minimum_python)
            if found is None:
                started[line] = (
                    f"Django {line} needs Python >= {spec.minimum_python}: scripts/find-python "
                    "found none ($PAI_PYTHON_DJANGO6, python3.14/3.13/3.12 on PATH, pyenv)"
                )
                say(f"SKIPPING Django {line}: {started[line]}")
                continue
            python = found
        say(f"django{line}: new virtualenv ({python}), installing {wheel.name}[{extras}]")
        started[line] = Environment(
            python=python,
            path=work / f"django{line}",
            requirements=[f"{wheel}[{extras}]", spec.requirement],
            say=say,
        )
    yield started
    for env in started.values():
        if isinstance(env, Environment):
            env.stop()


def target(project: Project, block: str) -> Path:
    """The file a python block names in its first line (``# myapp/agents.py``)."""
    first = block.splitlines()[0]
    assert first.startswith("# "), f"a block must name its file first: {first!r}"
    name = first[2:].split(" (")[0].strip()
    if name == "settings.py":
        return project.settings_file
    if name == "urls.py":
        return project.urls_file
    return project.path / name


@pytest.fixture(scope="module", params=sorted(LINES))
def adopted(
    request: pytest.FixtureRequest,
    environments: dict[str, Environment | str],
    blocks: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
    say: Say,
) -> Adopted:
    """startproject, the README's blocks applied, and the README's commands run in order
    (``runserver`` is the test's own job)."""
    line: str = request.param
    env = environments[line]
    if isinstance(env, str):
        pytest.skip(env)
    env.wait()
    project = Project.start(env, tmp_path_factory.mktemp(f"site-django{line}") / "mysite")
    say(f"django{line}: startproject, applying the README's blocks")
    for name in ("settings", "urls", "agent"):
        file = target(project, blocks[name])
        package = file.relative_to(project.path).parts[0]
        if file.suffix == ".py" and not (project.path / package).exists():
            project.manage("startapp", package)
        project.append(file, blocks[name])
    ran: list[tuple[Command, str]] = []
    for command in commands(blocks["commands"]):
        if command.argv[0] == "runserver":
            continue
        say(f"django{line}: manage.py {' '.join(command.argv)}")
        result = project.manage(*command.argv)
        ran.append((command, result.stdout + result.stderr))
    assert any(c.argv[:1] == ["runserver"] for c in commands(blocks["commands"]))
    return Adopted(line=line, project=project, ran=ran)

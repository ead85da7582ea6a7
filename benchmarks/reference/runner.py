"""Running a reference round from ``python -m benchmarks``: its virtualenv, its database, its JSON.

Each reference lives in a virtualenv of its own at the repository root (gitignored), created
with this interpreter and pip-installed from the package registry with the pinned
requirements beside this file when it is absent or its requirements changed (a stamp file
holds the requirements' text). The product's virtualenv never gets their dependencies.
A round is one subprocess (``python -m benchmarks.reference.<module>``) that writes JSON;
each PostgreSQL round gets a freshly created database, each SQLite round a fresh file, as
PAI's driver rounds do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["REFERENCES", "ReferenceSpec", "drop_databases", "ensure_venv", "run_round"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@dataclass(frozen=True, kw_only=True)
class ReferenceSpec:
    key: str  # the results' key
    label: str
    module: str
    venv: str
    requirements: str

    @property
    def python(self) -> Path:
        return ROOT / self.venv / "bin" / "python"


REFERENCES = (
    ReferenceSpec(
        key="langgraph",
        label="LangGraph",
        module="benchmarks.reference.langgraph_ref",
        venv=".venv-ref-langgraph",
        requirements="requirements-langgraph.txt",
    ),
    ReferenceSpec(
        key="openai_agents",
        label="OpenAI Agents",
        module="benchmarks.reference.openai_agents_ref",
        venv=".venv-ref-openai-agents",
        requirements="requirements-openai-agents.txt",
    ),
)


def ensure_venv(spec: ReferenceSpec) -> Path:
    """The reference's interpreter, after creating and installing its virtualenv if needed."""
    venv = ROOT / spec.venv
    requirements = HERE / spec.requirements
    stamp = venv / ".pai-requirements"
    wanted = requirements.read_text()
    if spec.python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return spec.python
    print(f"benchmarks: installing {spec.label} into {spec.venv} ...", file=sys.stderr, flush=True)
    if not spec.python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(spec.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(requirements)], check=True)
    stamp.write_text(wanted)
    return spec.python


def run_round(
    spec: ReferenceSpec,
    *,
    vendor: str,
    workloads: list[str],
    quick: bool,
    workdir: Path,
    server_url: str,
    database: str,
    round_index: int,
) -> dict[str, Any]:
    """One round of the reference's workloads on ``vendor``; its JSON result."""
    python = ensure_venv(spec)
    workdir.mkdir(parents=True, exist_ok=True)
    if vendor == "postgresql":
        from benchmarks.database import create_postgres_database

        url = create_postgres_database(server_url, database)
    else:
        path = workdir / f"{spec.key}-{round_index}.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        url = str(path)
    out = workdir / f"{spec.key}-{vendor}-{round_index}.json"
    argv = [str(python), "-m", spec.module, "--db", vendor, "--url", url, "--json", str(out)]
    argv += ["--only", ",".join(workloads)] + (["--quick"] if quick else [])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    env["PYTHONPATH"] = str(ROOT)
    subprocess.run(argv, cwd=ROOT, env=env, check=True)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def drop_databases(server_url: str, names: list[str]) -> None:
    """Drop this invocation's benchmark databases (they are recreated by every round)."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

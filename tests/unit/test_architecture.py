"""The layering contract: pai_agents is framework-free; imports point downwards only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold() -> None:
    """pai_agents imports nothing from django.db (nor the Django apps); layers point down."""
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pai_agents is framework-free" in result.stdout
    assert "0 broken" in result.stdout


def test_pai_agents_source_never_mentions_the_orm() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "pai_agents").rglob("*.py")
        if "django" in path.read_text()
    ]
    assert offenders == []

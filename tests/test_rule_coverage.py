"""docs/rule-coverage.md stays true: every rule it lists as covered is still cited by a test.

The catalogue lives outside the repository, so the page is the record of which rules the
suite covers; deleting or renaming the last test of a rule fails here (RULES.md rule 4).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| \*\*(?P<id>(?:LC|MF|AD|TH)-\d{3})\*\* .* \| (?P<status>[^|]+) \| [^|]* \|$")


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "rule_coverage", ROOT / "scripts" / "rule_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows() -> dict[str, str]:
    page = (ROOT / "docs" / "rule-coverage.md").read_text(encoding="utf-8")
    return {m["id"]: m["status"].strip() for m in map(ROW.match, page.splitlines()) if m}


def test_every_rule_listed_as_covered_is_cited_by_a_test() -> None:
    rows = _rows()
    assert len(rows) > 300, "the page lists the whole catalogue"
    cited = _script().citations()
    covered = [rule for rule, status in rows.items() if status == "covered"]
    lost = sorted(rule for rule in covered if rule not in cited)
    assert not lost, f"no test cites {lost} any more: restore the test or regenerate the page"


def test_every_rule_is_covered_or_explains_why_not() -> None:
    rows = _rows()
    unexplained = sorted(rule for rule, status in rows.items() if status == "NOT COVERED")
    assert not unexplained, f"rules with neither a test nor a documented reason: {unexplained}"
    assert all(s == "covered" or s.startswith(("deviation:", "not built:")) for s in rows.values())

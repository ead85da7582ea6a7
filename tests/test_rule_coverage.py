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


# --------------------------------------------------------------------------- the counting


def _cited(tmp_path: Path, files: dict[str, str]) -> dict[str, list[str]]:
    """What the counter finds in a throwaway tests/ tree holding ``files``."""
    for name, text in files.items():
        path = tmp_path / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return dict(_script().citations(tmp_path))


def test_a_module_docstring_names_no_rule(tmp_path: Path) -> None:
    """Only a test names a rule: a module docstring, a comment in a test body, an assertion
    message, a helper and a file that is not a test file cite nothing."""
    cited = _cited(
        tmp_path,
        {
            "test_mod.py": '"""LC-001, LC-002..LC-004."""\n'
            "def helper() -> None:\n"
            '    """LC-005."""\n'
            "def test_plain() -> None:\n"
            '    """Asserts something."""\n'
            "    # LC-006\n"
            '    assert True, "LC-007"\n',
            "support.py": 'def test_lc_008_in_a_support_module() -> None:\n    """LC-009."""\n',
        },
    )
    assert cited == {}


def test_an_id_in_a_test_name_counts(tmp_path: Path) -> None:
    """``test_lc_050_...`` names LC-050 (``_`` is a word character, so ``\\b`` missed it);
    ids touched by letters or digits are not ids."""
    cited = _cited(
        tmp_path,
        {
            "test_names.py": "def test_lc_050_mf_003_both() -> None: ...\n"
            "async def test_th_012_async() -> None: ...\n"
            "def test_xlc_051_and_lc_0520() -> None: ...\n"
        },
    )
    assert cited == {
        "LC-050": ["tests/test_names.py::test_lc_050_mf_003_both"],
        "MF-003": ["tests/test_names.py::test_lc_050_mf_003_both"],
        "TH-012": ["tests/test_names.py::test_th_012_async"],
    }


def test_a_range_names_every_id_in_it(tmp_path: Path) -> None:
    """``LC-040..LC-043`` names LC-040, 041, 042 and 043, not only the endpoints; so do
    ``AD-010..012`` and a test name's ``th_031_to_th_033``. A range across kinds or
    backwards names only its endpoints."""
    cited = _cited(
        tmp_path,
        {
            "test_ranges.py": "def test_one() -> None:\n"
            '    """LC-040..LC-043 and AD-010..012."""\n'
            "def test_th_031_to_th_033_named() -> None: ...\n"
            "def test_odd() -> None:\n"
            '    """MF-001..LC-003, MF-009..MF-007."""\n'
        },
    )
    one = ["tests/test_ranges.py::test_one"]
    named = ["tests/test_ranges.py::test_th_031_to_th_033_named"]
    odd = ["tests/test_ranges.py::test_odd"]
    assert cited == {
        **{f"LC-04{n}": one for n in range(4)},
        **{f"AD-01{n}": one for n in range(3)},
        **{f"TH-03{n}": named for n in range(1, 4)},
        "MF-001": odd,
        "LC-003": odd,
        "MF-009": odd,
        "MF-007": odd,
    }


def test_a_test_class_docstring_names_rules_for_its_methods(tmp_path: Path) -> None:
    """A ``Test*`` class docstring names its rules for each test method; a method's own
    name and docstring add to that; a class that pytest does not collect names nothing."""
    cited = _cited(
        tmp_path,
        {
            "test_classes.py": "class TestFacade:\n"
            '    """LC-011."""\n'
            "    def test_lc_012_append(self) -> None: ...\n"
            "    async def test_update(self) -> None:\n"
            '        """LC-013."""\n'
            "    def helper(self) -> None: ...\n"
            "class Helpers:\n"
            '    """LC-014."""\n'
            "    def test_not_collected(self) -> None: ...\n"
        },
    )
    append = "tests/test_classes.py::TestFacade::test_lc_012_append"
    update = "tests/test_classes.py::TestFacade::test_update"
    assert cited == {"LC-011": [append, update], "LC-012": [append], "LC-013": [update]}


def test_the_summary_counts_the_covered_rows() -> None:
    """The page's headline number is the number of rows it marks covered."""
    page = (ROOT / "docs" / "rule-coverage.md").read_text(encoding="utf-8")
    rows = _rows()
    summary = re.search(r"^(\d+) of (\d+) rules are cited by at least one test\.$", page, re.M)
    assert summary is not None
    assert (int(summary[1]), int(summary[2])) == (
        sum(status == "covered" for status in rows.values()),
        len(rows),
    )

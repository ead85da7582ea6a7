"""Write docs/rule-coverage.md: every rule of the catalogue and the tests that cite it.

A rule is covered when a test names it: a test function by its name (``test_lc_047_...``)
or its docstring, or a ``Test*`` class by its docstring (for each of its test methods).
A range such as ``LC-040..LC-043`` names every id in it. A module docstring, a comment or
a helper names nothing: the id must sit on the test that asserts the rule's effect.

The catalogue (``shared/RULES.md``) lives beside the project, not in it, so the generated
page carries each rule's ID, section and text; ``tests/test_rule_coverage.py`` then checks,
on any clone, that every rule the page calls covered is still cited by a test.

    .venv/bin/python scripts/rule_coverage.py [--rules ../shared/RULES.md] [--check]

``--check`` exits 1 when the page is out of date instead of writing it.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "rule-coverage.md"
RULE = re.compile(r"^- \*\*(?P<id>(?:LC|MF|AD|TH)-\d{3})\*\* \[(?P<tag>\w+)\] (?P<text>.*)$")
SECTION = re.compile(r"^#{2,3} (?P<title>.+)$")
# An id in prose (LC-047) or in a test name (lc_047); no letter or digit may touch it.
CITATION = re.compile(r"(?<![A-Za-z0-9])(LC|MF|AD|TH)[-_](\d{3})(?![0-9])", re.IGNORECASE)
RANGE = re.compile(
    r"(?<![A-Za-z0-9])(?P<kind>LC|MF|AD|TH)[-_](?P<first>\d{3})"
    r"(?:\s*(?:\.{2,3}|\u2013|\u2014)\s*(?:(?P<end_kind>LC|MF|AD|TH)[-_])?"
    r"|[-_ ]to[-_ ](?P<to_kind>LC|MF|AD|TH)[-_])(?P<last>\d{3})(?![0-9])",
    re.IGNORECASE,
)

# Rules no test cites on purpose: the reason is printed in the page instead of tests.
NOT_COVERED: dict[str, str] = {
    "AD-012": "deviation: thread ids are global primary keys (unique across partitions); "
    "a thread id of another partition is refused as not found (docs/concepts.md)",
    "AD-060": "not built: tools declare no context type, so `map_context` is optional "
    "(docs/reference/agents.md)",
    "AD-073": "deviation: client tools are agent tools without `execute`, not definitions "
    "sent by the browser (docs/reference/agents.md)",
    "AD-075": "deviation: the manifest lists tools in a list of entries, not keyed by name "
    "(docs/reference/agents.md)",
    "AD-076": "deviation: the manifest includes each tool's JSON Schema (input and output) "
    "(docs/reference/agents.md)",
}


def rule_ids(text: str) -> set[str]:
    """The rule ids a test name or docstring names: single ids and every id of a range.

    ``LC-040..LC-043``, ``LC-040..043`` and ``lc_040_to_lc_043`` (a test name) name
    LC-040, LC-041, LC-042 and LC-043, not only the endpoints.
    """
    found = {f"{kind.upper()}-{number}" for kind, number in CITATION.findall(text)}
    for match in RANGE.finditer(text):
        end_kind = (match["end_kind"] or match["to_kind"] or match["kind"]).upper()
        kind = match["kind"].upper()
        first, last = int(match["first"]), int(match["last"])
        if kind == end_kind and first < last:
            found.update(f"{kind}-{n:03d}" for n in range(first, last + 1))
    return found


def _tests(body: list[ast.stmt], inherited: str = "") -> Iterator[tuple[str, str]]:
    """(qualified test name, the text that may name its rules) for each test in ``body``.

    A test function names rules by its name and docstring; a ``Test*`` class's docstring
    names rules for each of its test methods. Module docstrings and helpers do not count.
    """
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test"):
                text = "\n".join((node.name, ast.get_docstring(node) or "", inherited))
                yield node.name, text
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            doc = "\n".join((inherited, ast.get_docstring(node) or ""))
            for name, text in _tests(node.body, doc):
                yield f"{node.name}::{name}", text


def citations(root: Path = ROOT) -> dict[str, list[str]]:
    """Rule ID -> the tests (``path::name``) that name it, for the test files under root."""
    cited: dict[str, list[str]] = defaultdict(list)
    for path in sorted((root / "tests").rglob("test_*.py")):
        if path.name == "test_rule_coverage.py":
            continue  # its fixtures name rules to test the counting itself
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(root).as_posix()
        for name, text in _tests(tree.body):
            for rule in sorted(rule_ids(text)):
                cited[rule].append(f"{where}::{name}")
    return cited


def render(rules_text: str) -> str:
    cited = citations()
    lines = [
        "# Rule coverage",
        "",
        "Every testable rule of the specification (`shared/RULES.md`: LC = lifecycle,",
        "MF = message format, AD = agent definitions, TH = Cloudflare Think parity) and the",
        "tests that cite it. A rule is covered when a test names it in its name",
        "(`test_lc_047_...`) or docstring, or a test class in its docstring; a range such as",
        "`LC-040..LC-043` names every id in it; module docstrings do not count.",
        "Generated by `scripts/rule_coverage.py`; `tests/test_rule_coverage.py`",
        "fails when a rule listed as covered is no longer cited by any test.",
        "",
    ]
    header = len(lines)
    total = covered = 0
    section = ""
    for raw in rules_text.splitlines():
        heading = SECTION.match(raw)
        if heading and not raw.startswith("# "):
            section = heading.group("title")
            level = "##" if raw.startswith("## ") else "###"
            if lines[-1]:
                lines.append("")
            lines += [f"{level} {section}", ""]
            if level == "###":
                lines += ["| Rule | Status | Tests |", "|---|---|---|"]
            continue
        match = RULE.match(raw)
        if not match:
            continue
        rule, text = match.group("id"), match.group("text").replace("|", "\\|")
        total += 1
        named = rule.lower().replace("-", "_")
        tests = sorted(cited.get(rule, []), key=lambda where: named not in where)
        if tests:
            covered += 1
            shown = ", ".join(f"`{t}`" for t in tests[:3])
            more = f" (+{len(tests) - 3} more)" if len(tests) > 3 else ""
            status, where = "covered", shown + more
        else:
            status, where = NOT_COVERED.get(rule, "NOT COVERED"), ""
        lines.append(f"| **{rule}** {text} | {status} | {where} |")
    summary = f"{covered} of {total} rules are cited by at least one test."
    lines[header:header] = [summary, ""]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=Path, default=ROOT.parent / "shared" / "RULES.md")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    page = render(args.rules.read_text(encoding="utf-8"))
    if args.check:
        if PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE} is out of date: run scripts/rule_coverage.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    missing = [line for line in page.splitlines() if "| NOT COVERED |" in line]
    print(f"wrote {PAGE.relative_to(ROOT)}; {len(missing)} rules not covered")
    for line in missing:
        print("  " + line[:100])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Ratchets on the code's shape (issue 10): module size, private names across modules, and
import cycles among the project's modules.

Each test lists what stands today and fails on anything new, on anything listed that grew,
and on a listed entry that is gone (so the lists only shrink: delete an entry when the
restructuring removes it). Issue 10's goal is all three lists empty.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pai_agents", "pai_threads", "pai_project")
# The size rule also holds for the benchmarks (the private-name and cycle rules do not).
SIZED = (*PACKAGES, "benchmarks")
MAX_LINES = 500

# Modules over MAX_LINES today, with their size: none may grow, none may join.
OVERSIZE: dict[str, int] = {}

# Strongly connected components of the module import graph (function-level imports count:
# they only hide a cycle). None may grow, none may appear.
CYCLES: list[set[str]] = []


def _sources(packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    return sorted(
        path
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    )


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_grows_past_500_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in _sources(SIZED)
    }
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    new = {name: n for name, n in over.items() if name not in OVERSIZE}
    grown = {name: n for name, n in over.items() if name in OVERSIZE and n > OVERSIZE[name]}
    fixed = sorted(name for name in OVERSIZE if sizes.get(name, 0) <= MAX_LINES)
    assert not new, f"modules over {MAX_LINES} lines: split them {new}"
    assert not grown, f"listed modules grew (split them instead): {grown}"
    assert not fixed, f"now within {MAX_LINES} lines: remove from OVERSIZE {fixed}"


def _private_imports() -> set[tuple[str, str]]:
    """(importing module, 'source.module._name') for every ``from pai_x... import _name``."""
    found: set[tuple[str, str]] = set()
    for path in _sources():
        importer = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if not node.module.startswith(PACKAGES):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.add((importer, f"{node.module}.{alias.name}"))
    return found


def test_no_new_private_name_is_imported_across_modules() -> None:
    found = _private_imports()
    listed = set(PRIVATE_IMPORTS)
    assert not found - listed, f"private names imported across modules: {sorted(found - listed)}"
    assert not listed - found, f"gone: remove from PRIVATE_IMPORTS {sorted(listed - found)}"


def _cycles() -> list[set[str]]:
    graph = grimp.build_graph(*PACKAGES)
    modules = sorted(m for m in graph.modules if m.startswith(PACKAGES))
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in modules:
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return components


def test_no_new_import_cycle() -> None:
    found = _cycles()
    unexpected = [sorted(c) for c in found if not any(c <= known for known in CYCLES)]
    gone = [sorted(k) for k in CYCLES if not any(k <= c for c in found)]
    assert not unexpected, f"new or grown import cycles: {unexpected}"
    assert not gone, f"broken up: remove from CYCLES {gone}"


# (importing module, imported private name) as they stand today.
PRIVATE_IMPORTS: list[tuple[str, str]] = []


# pai_threads is packaged by capability (issue 10): at its top level only Django's
# conventional modules, two documented entry points, and compatibility paths the docs and
# settings name, which only re-export. (``admin`` is a package: the console, one module per
# row kind.)
TOP_LEVEL_DJANGO = {"__init__", "apps", "asgi", "checks", "conf", "models"}
TOP_LEVEL_DJANGO |= {"routing", "tasks", "urls", "views"}
TOP_LEVEL_ENTRY_POINTS = {
    "errors": "the typed errors every layer raises (as django.core.exceptions)",
    "identity": "the IDENTITY_RESOLVER default, pai_threads.identity.session_identity",
}
COMPATIBILITY_PATHS = {"execute", "recovery", "file_provider"}


def test_pai_threads_top_level_holds_only_conventional_modules() -> None:
    found = {path.stem for path in (ROOT / "pai_threads").glob("*.py")}
    # Django's conventional modules may be packages (``models`` is: one model per module
    # where models.py would pass 500 lines).
    found |= {p.name for p in (ROOT / "pai_threads").iterdir() if p.name in TOP_LEVEL_DJANGO}
    allowed = TOP_LEVEL_DJANGO | set(TOP_LEVEL_ENTRY_POINTS) | COMPATIBILITY_PATHS
    assert found == allowed, (
        f"unexpected: {sorted(found - allowed)}, gone: {sorted(allowed - found)}"
    )


def test_compatibility_paths_only_re_export() -> None:
    for name in sorted(COMPATIBILITY_PATHS):
        tree = ast.parse((ROOT / "pai_threads" / f"{name}.py").read_text())
        for node in tree.body:
            is_docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            is_all = isinstance(node, ast.Assign) and [
                t.id for t in node.targets if isinstance(t, ast.Name)
            ] == ["__all__"]
            is_import = isinstance(node, ast.ImportFrom) and str(node.module).startswith(
                "pai_threads."
            )
            assert is_docstring or is_all or is_import, f"pai_threads/{name}.py defines code"

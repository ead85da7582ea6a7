"""The adoption steps, read from the README's marked blocks, so the test cannot drift from them.

A block is marked by an HTML comment on the line before its fence::

    <!-- adoption: settings -->
    ```python
    ...
    ```
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Command", "commands", "install_extras", "marked_blocks"]

_BLOCK = re.compile(
    r"^<!-- adoption: (?P<name>[a-z]+) -->\n```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Command:
    """One ``$ python manage.py ...`` line and the output lines shown under it."""

    argv: list[str]
    expected: list[str]


def marked_blocks(path: Path) -> dict[str, str]:
    """Each marked block's body, by name; a name marked twice is a mistake."""
    blocks: dict[str, str] = {}
    for match in _BLOCK.finditer(path.read_text(encoding="utf-8")):
        name = match["name"]
        assert name not in blocks, f"{path.name}: block {name!r} is marked twice"
        blocks[name] = match["body"]
    return blocks


def install_extras(block: str) -> str:
    """The extras of the ``pip install "/path/to/pai-django[...]"`` line."""
    match = re.search(r"pai-django\[([\w,]+)\]", block)
    assert match, f"no pai-django[extra] in the install block:\n{block}"
    return match[1]


def commands(block: str) -> list[Command]:
    """The console block's commands (``$ python manage.py ...``), each with its output."""
    found: list[Command] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            argv = shlex.split(line[2:])
            assert argv[:2] == ["python", "manage.py"], f"not a manage.py command: {line}"
            found.append(Command(argv=argv[2:], expected=[]))
        elif line.strip():
            assert found, f"output before any command: {line}"
            found[-1].expected.append(line)
    return found

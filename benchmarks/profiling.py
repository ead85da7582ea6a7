"""py-spy profiles of the W4/W5/TTFT server processes: starting a sampler on a pid and
summarising its collapsed stacks into the shares the report shows. A measuring aid: py-spy is
optional (``pip install py-spy``) and every caller copes with its absence."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["py_spy", "start_profile", "summarize_profile"]


def py_spy() -> str | None:
    """The py-spy executable next to this interpreter or on PATH (a measuring tool, not a
    dependency: ``pip install py-spy``); None when absent."""
    import shutil
    import sys

    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


def start_profile(pid: int, seconds: float, out: Path) -> Any:
    """Sample ``pid`` (all threads, without pausing it) for ``seconds`` into collapsed stacks."""
    import subprocess

    exe = py_spy()
    if exe is None:
        return None
    argv = [exe, "record", "-p", str(pid), "-d", str(max(1, round(seconds))), "-r", "100"]
    argv += ["-f", "raw", "-o", str(out), "--nonblocking", "--threads", "--gil"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# Frames every stack passes through (loops, thread bootstraps): no information inclusive.
_GENERIC = re.compile(
    r"\((asyncio/(base_events|events|runners)|threading|<frozen runpy>|daphne/(cli|server|"
    r"__main__)|twisted/internet/(asyncioreactor|base)|concurrent/futures/thread)\.?py|"
    r"^<module> |\(<frozen runpy>\)|\(threading\.py\)|\(selectors\.py\)"
)


def _frame_name(frame: str) -> str:
    """``fn (path/to/module.py:123)`` -> ``fn (module.py)``, grouping a function's lines."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = path.split("/")
    for anchor in ("site-packages", "main", "lib"):
        if anchor in parts:
            parts = parts[len(parts) - parts[::-1].index(anchor) :]
            break
    return f"{name} ({'/'.join(parts[-3:])})"


def summarize_profile(path: Path, top: int = 15) -> dict[str, Any] | None:
    """Self and inclusive shares of the top functions, and samples per thread."""
    from collections import Counter

    if not path.exists():
        return None
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        thread, frames = frames[0], frames[1:]
        if not frames:
            continue
        total += n
        threads[thread] += n
        names = [_frame_name(f) for f in frames]
        own[names[-1]] += n
        for name in set(names):
            if not _GENERIC.search(name):
                inclusive[name] += n
    if not total:
        return None

    def share(counter: Counter[str]) -> list[list[Any]]:
        return [[round(100 * c / total, 1), k] for k, c in counter.most_common(top)]

    return {
        "samples": total,
        "threads": share(threads),
        "self": share(own),
        "inclusive": share(inclusive),
    }

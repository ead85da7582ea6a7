"""Throwaway PostgreSQL + Redis for a benchmark run, through scripts/services.sh.

Started only when a workload needs a server whose URL the environment does not already give
(``PAI_TEST_POSTGRES_URL`` / ``PAI_TEST_REDIS_URL``), and always stopped at the end.
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from pathlib import Path

__all__ = ["Services"]


class Services:
    """``scripts/services.sh start DIR`` … ``stop DIR``, with the URLs it exports."""

    def __init__(self, root: Path) -> None:
        self._script = root / "scripts" / "services.sh"
        self.directory = Path(tempfile.mkdtemp(prefix="pai-bench-services-"))
        self.postgres_url = ""
        self.redis_url = ""

    def start(self) -> Services:
        subprocess.run([str(self._script), "start", str(self.directory)], check=True)
        env = (self.directory / "env").read_text()
        for line in env.splitlines():
            words = shlex.split(line)
            if len(words) == 2 and words[0] == "export" and "=" in words[1]:
                name, value = words[1].split("=", 1)
                if name == "PAI_TEST_POSTGRES_URL":
                    self.postgres_url = value
                elif name == "PAI_TEST_REDIS_URL":
                    self.redis_url = value
        if not (self.postgres_url and self.redis_url):
            raise RuntimeError(f"scripts/services.sh wrote no URLs:\n{env}")
        return self

    def stop(self) -> None:
        subprocess.run([str(self._script), "stop", str(self.directory)], check=False)

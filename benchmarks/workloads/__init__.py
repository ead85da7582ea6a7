"""The workloads of issue 6. Each module exposes ``run(bench) -> dict`` (JSON-ready)."""

WORKLOADS = ("W1", "W2", "W3", "W4", "W5")

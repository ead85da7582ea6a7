"""The workloads of issue 6. Each module exposes ``run(bench) -> dict`` (JSON-ready)."""

WORKLOADS = ("W1", "W1L", "W2", "W3", "W4", "W5", "TTFT", "DELIVERY")
# A workload's module is its name in lower case, except these.
MODULES = {"W1L": "w1_lifecycle"}


def module_name(workload: str) -> str:
    """``benchmarks.workloads.<this>`` runs ``workload``."""
    return MODULES.get(workload, workload.lower())

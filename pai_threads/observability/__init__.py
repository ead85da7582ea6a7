"""What a deployment observes of its runs: Django signals of the run lifecycle
(:mod:`.signals`). Log ids and spans come from the engine (``pai_agents.tracing``).
docs/operations.md, Observability."""

from pai_threads.observability.signals import (
    run_finished,
    run_queued,
    run_started,
    run_waiting,
)

__all__ = ["run_finished", "run_queued", "run_started", "run_waiting"]

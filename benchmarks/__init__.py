"""The runtime's own cost, measured: ``python -m benchmarks`` writes docs/benchmarks.md.

Workloads run ``ScriptedModel`` at zero latency so that only the runtime (engine, ORM store,
thread service, executor) shows up in the numbers. See docs/benchmarks.md and issue 6.
"""

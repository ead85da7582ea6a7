"""Reference implementations of the benchmark workloads on other runtimes (issue 6).

``langgraph_w1.py`` is W1 on LangGraph with its PostgreSQL checkpointer. It runs in its own
virtualenv (``.venv-langgraph``) and imports nothing from this package, so nothing here is
imported by ``python -m benchmarks``.
"""

"""Executing runs and the jobs beside them, in whatever process an executor chose.

* :mod:`.execute`: :func:`aexecute_run`: claim a run's lease, run the engine, publish;
* :mod:`.recovery`: the sweeper that re-dispatches runs nobody is executing;
* :mod:`.cancellation`: abort signals of the runs executing in this process;
* :mod:`.registry`: the agents this site serves (``PAI["AGENTS"]``);
* :mod:`.titles`: automatic thread titles after completed runs;
* :mod:`.file_provider`: stored files expanded into model input;
* :mod:`.terminal`: event sinks that render a run for ``manage.py pai_chat``.

How a run reaches a worker (the thread pool or Celery) is :mod:`pai_threads.executors`.
"""

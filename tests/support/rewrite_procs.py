"""A process that rewrites one thread's history again and again (LC-065 across processes).

``python -m tests.support.rewrite_procs THREAD_ID MESSAGE_ID COUNT GO_FILE`` (Django settings
and ``DATABASE_URL`` from the environment) waits for ``GO_FILE``, then flips the context
visibility of ``MESSAGE_ID`` ``COUNT`` times through ``services.update_visibility``, prints
each committed ``after_version`` as ``commit <version> <pid>``, and waits for its own deliveries.

The agent's ``history_rewritten`` appends ``enter``/``exit`` lines (with the pid and the
after-version) to ``PAI_TEST_REWRITE_LOG`` around a sleep: appends are atomic, so the file's
line order is the real order of calls across every process that shares it.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from pai_agents import ScriptedModel, define_agent

AGENT_NAME = "rewrite-procs"


def _log(event: str, input: Any) -> None:
    line = f"{event} {os.getpid()} {input.thread_id} {input.rewrite.after_version}\n"
    with open(os.environ["PAI_TEST_REWRITE_LOG"], "a") as log:
        log.write(line)


def history_rewritten(input: Any) -> None:
    _log("enter", input)
    time.sleep(float(os.environ.get("PAI_TEST_REWRITE_SLEEP", "0.15")))
    _log("exit", input)


agent = define_agent(
    AGENT_NAME,
    instructions="x",
    model=ScriptedModel(steps=[]),
    lifecycle={"history_rewritten": history_rewritten},
)


def main(thread_id: str, message_id: str, count: int, go_file: str) -> None:
    import django

    django.setup()
    from pai_agents.engine.rewrites import dispatcher
    from pai_threads import services
    from pai_threads.execution import registry
    from pai_threads.identity import Identity

    agents = {**registry.agents(), agent.name: agent}
    registry.agents = lambda: agents  # type: ignore[assignment]
    identity = Identity(scope_key="user:alice", data={"userId": "alice"})
    while not os.path.exists(go_file):
        time.sleep(0.005)
    for index in range(count):
        done = services.update_visibility(
            identity, thread_id, {message_id: {"context": index % 2 == 1}}
        )
        assert done is not None
        print(f"commit {done.after_version} {os.getpid()}", flush=True)
    assert dispatcher().wait_idle(timeout=60)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])

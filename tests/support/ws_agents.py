"""Agents of the websocket error, fuzz and fault tests (registered by :mod:`.ws_settings`).

``echo`` answers at once, so a fuzz that gets a send through does not keep the server busy;
``steady`` streams one small delta every ``STEADY_DELAY`` seconds for about eight seconds, long
enough to restart Redis in the middle of its generation.
"""

from __future__ import annotations

from pai_agents import ModelRequest, ScriptedModel, ScriptedStep, define_agent

__all__ = ["STEADY_DELAY", "echo", "steady", "steady_answer"]

STEADY_DELAY = 0.05
_STEADY_WORDS = 160


def steady_answer() -> str:
    return " ".join(f"w{i:03d}" for i in range(_STEADY_WORDS))


def _echo(request: ModelRequest) -> ScriptedStep:
    return ScriptedStep(text="ok")


def _steady(request: ModelRequest) -> ScriptedStep:
    return ScriptedStep(text=steady_answer(), chunk_size=5, delay=STEADY_DELAY)


echo = define_agent(
    "echo", instructions="Say ok.", model=ScriptedModel(respond=_echo, record_requests=False)
)
steady = define_agent(
    "steady",
    instructions="Stream for a while.",
    model=ScriptedModel(respond=_steady, record_requests=False),
)

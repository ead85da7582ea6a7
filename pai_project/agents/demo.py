"""The demo agent: every feature of PAI on one assistant, on a real model when configured.

Offline (no OPENAI_API_KEY / OPENAI_BASE_URL) it runs on a ScriptedModel whose responder
really decides from the conversation (:mod:`pai_project.agents.offline`): the calculator and
the clock, an approval tool, a client tool answered through a form, a slow answer to stop or
reload, reasoning, a tool with live progress and a failing run. The tools are in
:mod:`pai_project.agents.tools`; a real model is offered the same ones.

Threads get an automatic title after their first completed run (``thread_titles``): from the
real model when one is configured, else from a second offline model that names the
conversation after its first question.
"""

from __future__ import annotations

import os
from functools import cache

from pai_agents import (
    AgentBehaviorInput,
    LanguageModel,
    ScriptedModel,
    ThreadTitles,
    define_agent,
)
from pai_project.agents.offline import offline_model, offline_title
from pai_project.agents.tools import (
    ask_reservation,
    calculator,
    clock,
    count_primes,
    send_email,
)

__all__ = ["assistant", "choose_model", "offline_model", "offline_title"]


_OFFLINE = offline_model()
_OFFLINE_TITLES = ScriptedModel(
    respond=offline_title, model_name="offline-demo-titles", record_requests=False
)


@cache
def _online_model(api_key: str | None, base_url: str | None, model: str | None) -> LanguageModel:
    from pai_agents.models.openai_chat import OpenAIChatModel

    return OpenAIChatModel.from_env()


def choose_model(behavior: AgentBehaviorInput) -> LanguageModel:
    """A real model when the environment configures one, else the offline model."""
    env = os.environ
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return _online_model(
            env.get("OPENAI_API_KEY"), env.get("OPENAI_BASE_URL"), env.get("PAI_MODEL")
        )
    return _OFFLINE


def choose_title_model(behavior: AgentBehaviorInput) -> LanguageModel:
    """Titles come from the real model when there is one, else from the offline namer."""
    model = choose_model(behavior)
    return _OFFLINE_TITLES if model is _OFFLINE else model


assistant = define_agent(
    "assistant",
    version="1.1.0",
    description=(
        "A helpful assistant with a calculator, a clock, an email tool you approve, a "
        "reservation form you fill in and a prime counter that shows its progress."
    ),
    instructions=(
        "You are a concise, helpful assistant. Use the calculator tool for any arithmetic "
        "and the clock tool for dates and times; never compute in your head. Use send_email "
        "to send email (the user approves each one), ask_reservation to collect the details "
        "of a restaurant booking from the user, and count_primes to count primes."
    ),
    model=choose_model,
    tools=[calculator, clock, send_email, ask_reservation, count_primes],
    thread_titles=ThreadTitles(model=choose_title_model),
)

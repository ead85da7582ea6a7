"""The demo agent: a calculator and a clock, on a real model when one is configured.

Offline (no OPENAI_API_KEY / OPENAI_BASE_URL) it runs on a ScriptedModel whose responder
really decides from the conversation: arithmetic goes to the calculator, time questions
to the clock, and tool results are turned into an answer.

Threads get an automatic title after their first completed run (``thread_titles``): from the
real model when one is configured, else from a second offline model that names the
conversation after its first question.
"""

from __future__ import annotations

import logging
import os
import re
from datetime import UTC, datetime
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from pai_agents import (
    AgentBehaviorInput,
    LanguageModel,
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ThreadTitles,
    ToolError,
    define_agent,
    tool,
)
from pai_project.agents.calculator import evaluate

__all__ = ["assistant", "offline_model", "offline_title"]

logger = logging.getLogger("pai.demo")


class CalculatorInput(BaseModel):
    expression: str = Field(
        description="An arithmetic expression, e.g. '(2 + 3) * 7'.", max_length=200
    )


class ClockInput(BaseModel):
    timezone: str = Field(default="UTC", description="An IANA time zone name, e.g. 'Europe/Paris'.")


@tool(input=CalculatorInput)
def calculator(args: CalculatorInput) -> dict[str, Any]:
    """Evaluate an arithmetic expression exactly. Use it for any calculation."""
    try:
        return {"expression": args.expression, "result": evaluate(args.expression)}
    except (ValueError, ZeroDivisionError, OverflowError) as exc:
        raise ToolError(f"Cannot evaluate {args.expression!r}: {exc}") from exc


@tool(input=ClockInput)
def clock(args: ClockInput) -> dict[str, str]:
    """Tell the current date and time in a time zone."""
    try:
        zone = ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(f"Unknown time zone {args.timezone!r}") from exc
    now = datetime.now(UTC).astimezone(zone)
    return {
        "timezone": args.timezone,
        "iso": now.isoformat(timespec="seconds"),
        "weekday": now.strftime("%A"),
    }


_OPS = r"+\-*/%^\u00d7"
_ARITHMETIC = re.compile(rf"[-+(]*\d[\d\s.{_OPS}()]*[{_OPS}][\d\s.{_OPS}()]*\d\)*")
_TIME = re.compile(r"\b(time|clock|date|day is it|today)\b", re.IGNORECASE)


def _last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message["role"] == "user":
            return " ".join(
                p.get("text", "") for p in message["content"] if p.get("type") == "text"
            )
    return ""


def decide(request: ModelRequest) -> ScriptedStep:
    """The offline model's policy: a tiny, deterministic tool-using assistant."""
    last: dict[str, Any] = request.messages[-1] if request.messages else {"role": "user"}
    if last["role"] == "tool":
        result = last["content"][-1]
        output = result.get("output", {})
        if output.get("type", "").startswith("error"):
            return ScriptedStep.reply(
                f"The {result['toolName']} tool failed: {output.get('value')}"
            )
        value = output.get("value", {})
        if result["toolName"] == "calculator":
            return ScriptedStep.reply(f"{value['expression']} = {value['result']}")
        return ScriptedStep.reply(
            f"It is {value['weekday']}, {value['iso']} ({value['timezone']})."
        )
    text = _last_user_text(request)
    match = _ARITHMETIC.search(text)
    if match:
        return ScriptedStep.call("calculator", {"expression": match.group(0).strip()})
    if _TIME.search(text):
        return ScriptedStep.call("clock", {"timezone": "UTC"})
    return ScriptedStep.reply(
        "I am the offline demo model. Ask me to calculate something (like 12 * (3 + 4)) "
        "or what time it is. Set OPENAI_API_KEY or OPENAI_BASE_URL for a real model."
    )


def offline_model() -> ScriptedModel:
    return ScriptedModel(respond=decide, model_name="offline-demo", record_requests=False)


def offline_title(request: ModelRequest) -> ScriptedStep:
    """The offline title model: the default title call sends the conversation as
    ``User: ...`` / ``Assistant: ...`` lines; it names it after the first question."""
    lines = _last_user_text(request).splitlines()
    first = next((ln.removeprefix("User: ") for ln in lines if ln.startswith("User: ")), "")
    match = _ARITHMETIC.search(first)
    if match:
        return ScriptedStep.reply(f"Calculating {match.group(0).strip()}")
    if _TIME.search(first):
        return ScriptedStep.reply("The current time")
    words = " ".join(first.split()[:6]).strip(" ?!.,;:")
    return ScriptedStep.reply(words[:1].upper() + words[1:] if words else "A new chat")


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
    version="1.0.0",
    description="A helpful assistant with a calculator and a clock.",
    instructions=(
        "You are a concise, helpful assistant. Use the calculator tool for any arithmetic "
        "and the clock tool for dates and times; never compute in your head."
    ),
    model=choose_model,
    tools=[calculator, clock],
    thread_titles=ThreadTitles(model=choose_title_model),
)

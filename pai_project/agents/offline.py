"""The demo's offline model: a ScriptedModel whose responder decides from the conversation.

Every feature a visitor should try has a phrase (the chat page's empty state lists them):

- arithmetic ("what is 12 * (3 + 4)?") goes to the calculator, time questions to the clock;
- "email ..." calls ``send_email``, which waits for Approve or Deny;
- "book a table" calls the client tool ``ask_reservation``, answered through a form;
- "tell me a long story" streams slowly: long enough to press Stop or reload mid-answer;
- "think: is 221 prime?" reasons first (a collapsed reasoning part), then answers;
- "count the primes below 300000" runs a tool that shows live progress;
- "show me some markdown" answers with code, a long URL and a long unbroken token;
- "simulate a failure" fails the run mid-answer (the page marks it with its public error).
"""

from __future__ import annotations

import math
import re
from typing import Any

from pai_agents import ModelRequest, ScriptedModel, ScriptedStep, ScriptedToolCall
from pai_agents.models.scripted import last_user_text

__all__ = ["MARKDOWN_SAMPLE", "STORY", "decide", "last_user_text", "offline_model", "offline_title"]

_OPS = r"+\-*/%^\u00d7"
_ARITHMETIC = re.compile(rf"[-+(]*\d[\d\s.{_OPS}()]*[{_OPS}][\d\s.{_OPS}()]*\d\)*")
_TIME = re.compile(r"\b(time|clock|date|day is it|today)\b", re.IGNORECASE)
_ZONE = re.compile(r"\b([A-Z][a-z]+(?:/[A-Z][A-Za-z_]+)+)\b")
_CITIES = {
    "tokyo": "Asia/Tokyo",
    "paris": "Europe/Paris",
    "london": "Europe/London",
    "berlin": "Europe/Berlin",
    "new york": "America/New_York",
    "san francisco": "America/Los_Angeles",
    "sydney": "Australia/Sydney",
}
_FAIL = re.compile(r"\b(fail|failure|crash)\b", re.IGNORECASE)
_EMAIL = re.compile(r"\be-?mail\b", re.IGNORECASE)
_BOOK = re.compile(r"\b(book|reserve|reservation|table)\b", re.IGNORECASE)
_PRIMES = re.compile(r"\bprimes\b", re.IGNORECASE)
_THINK = re.compile(r"\b(think|reason|why)\b", re.IGNORECASE)
_STORY = re.compile(r"\b(story|long|slow)\b", re.IGNORECASE)
_MARKDOWN = re.compile(r"\b(markdown|format|formatting|code)\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d[\d,_]*")

STORY_DELAY = 0.04  # seconds per 4 characters: about 10 s for the story
STORY = """## The lighthouse keeper's ledger

Every evening at dusk the keeper climbed the hundred and twelve steps, trimmed the wick, \
and wrote one line in the ledger: the weather, the ships, the state of the lamp.

For thirty years the lines were short. *Fair, two trawlers, lamp good.* *Gale, none, lamp \
good.* Then one winter a line ran longer than the rest, because a ship had come in too \
close and the keeper had watched its lights turn, slowly, back toward open water.

The ledger is a durable thing. When the keeper's hand shook, the next keeper read it from \
the first page and knew exactly where the night had stopped, and went on from there, one \
line at a time, as if no one had ever left the stairs.

That is the whole trick of it: write each step down before you take the next, and anyone \
can pick up the lamp where you set it down.

You can press **Stop** while this streams, or reload the page: it reconnects and carries \
on from the same word."""

MARKDOWN_SAMPLE = """### What the renderer handles

- **bold**, *italic* and `inline code`
- a link: [the PAI docs](https://example.com/docs/quickstart)
- a very long URL: https://example.com/a/really/long/path/that/keeps/going/and/going/\
without/any/spaces/at/all/so/it/must/wrap/inside/the/bubble?query=1234567890abcdef
- a long unbroken token: \
Supercalifragilisticexpialidocious_pneumonoultramicroscopicsilicovolcanoconiosis_\
0123456789abcdefghijklmnopqrstuvwxyz_0123456789abcdefghijklmnopqrstuvwxyz

```python
def overflow_demo():
    # A line far wider than the bubble: the code block scrolls sideways instead of \
pushing the page wider.
    return [n * n for n in range(10)]  # squares, squares, squares, squares, squares, squares
```"""

_HELP = (
    "I am the offline demo model. Try `what is 12 * (3 + 4)?` or `what time is it in "
    "Tokyo?` (tools), `email the team that the demo works` (an approval), `book a table` (a "
    "form you fill in), `tell me a long story` (Stop it, or reload mid-answer), `think: is "
    "221 prime?` (reasoning), `count the primes below 300000` (live progress), `show me "
    "some markdown`, or `simulate a failure`. Set OPENAI_API_KEY or OPENAI_BASE_URL for a "
    "real model."
)


def _number(text: str, default: int) -> int:
    match = _NUMBER.search(text)
    return int(re.sub(r"[,_]", "", match.group(0))) if match else default


def _timezone(text: str) -> str:
    match = _ZONE.search(text)
    if match:
        return match.group(1)
    lowered = text.lower()
    return next((zone for city, zone in _CITIES.items() if city in lowered), "UTC")


def _think(text: str) -> ScriptedStep:
    """Reason about the first number in the question by trial division, then answer."""
    n = _number(text, 221)
    steps = [f"The question is about {n:,}. I try divisors up to √{n:,} ≈ {math.isqrt(n)}."]
    factor = next((d for d in range(2, math.isqrt(n) + 1) if n % d == 0), None)
    for d in (2, 3, 5, 7, 11, 13):
        if d * d > n or (factor is not None and d > factor):
            break
        steps.append(f"{n:,} ÷ {d} leaves {n % d}.")
    if n < 2:
        answer = f"{n} is not prime: primes start at 2."
    elif factor is None:
        steps.append("No divisor found.")
        answer = f"{n:,} is prime."
    else:
        steps.append(f"{factor} divides it: {n:,} = {factor} * {n // factor:,}.")
        answer = f"{n:,} is not prime: {n:,} = {factor} * {n // factor:,}."
    return ScriptedStep(reasoning=" ".join(steps), text=answer, delay=0.03)


def _after_tool(content: list[dict[str, Any]]) -> ScriptedStep:
    """Turn the last tool result into the answer."""
    result = content[-1]
    name, output = result["toolName"], result.get("output", {})
    kind = output.get("type", "")
    denied = any(
        c.get("type") == "tool-approval-response" and not c.get("approved") for c in content
    )
    if denied or kind == "execution-denied":
        return ScriptedStep.reply(f"Understood: I did not run {name}, you denied it.")
    if kind.startswith("error"):
        return ScriptedStep.reply(f"The {name} tool failed: {output.get('value')}")
    value = output.get("value", {})
    if name == "calculator":
        return ScriptedStep.reply(f"{value['expression']} = {value['result']}")
    if name == "clock":
        return ScriptedStep.reply(
            f"It is {value['weekday']}, {value['iso']} ({value['timezone']})."
        )
    if name == "send_email":
        return ScriptedStep.reply(f"Sent “{value['subject']}” to {value['to']}.")
    if name == "ask_reservation":
        chair = " with a high chair" if value.get("high_chair") else ""
        return ScriptedStep.reply(
            f"Booked: a table for {value.get('guests')} ({value.get('seating')}{chair}) on "
            f"{value.get('day')} under the name {value.get('name')}."
        )
    if name == "count_primes":
        return ScriptedStep.reply(
            f"There are {value['count']:,} primes up to {value['limit']:,}; "
            f"the largest is {value['largest']:,}."
        )
    return ScriptedStep.reply(f"The {name} tool answered: {value}")


def decide(request: ModelRequest) -> ScriptedStep:
    """The offline model's policy: a small, deterministic tool-using assistant."""
    last: dict[str, Any] = request.messages[-1] if request.messages else {"role": "user"}
    if last["role"] == "tool":
        return _after_tool(last["content"])
    text = last_user_text(request)
    if _FAIL.search(text):
        return ScriptedStep(
            text="Let me try that… ",
            delay=0.02,
            fail_with=RuntimeError("offline demo: a simulated provider outage"),
        )
    if _EMAIL.search(text):
        subject = text.strip()[:120] or "Hello"
        body = f"Hello team,\n\n{text.strip()}\n\nSent from the PAI demo."
        return ScriptedStep.call(
            "send_email", {"to": "team@example.com", "subject": subject, "body": body}
        )
    if _BOOK.search(text):
        question = "Who is the table for, how many guests, which day, and where to sit?"
        return ScriptedStep(
            text="Happy to book it. I need a few details first.",
            tool_calls=[ScriptedToolCall(name="ask_reservation", input={"question": question})],
        )
    if _PRIMES.search(text):
        limit = min(max(_number(text, 300_000), 10), 2_000_000)
        return ScriptedStep.call("count_primes", {"limit": limit})
    if _THINK.search(text):
        return _think(text)
    if _STORY.search(text):
        return ScriptedStep(text=STORY, chunk_size=4, delay=STORY_DELAY)
    if _MARKDOWN.search(text):
        return ScriptedStep(text=MARKDOWN_SAMPLE, chunk_size=16, delay=0.01)
    match = _ARITHMETIC.search(text)
    if match:
        return ScriptedStep.call("calculator", {"expression": match.group(0).strip()})
    if _TIME.search(text):
        return ScriptedStep.call("clock", {"timezone": _timezone(text)})
    return ScriptedStep.reply(_HELP)


def offline_model() -> ScriptedModel:
    return ScriptedModel(respond=decide, model_name="offline-demo", record_requests=False)


def offline_title(request: ModelRequest) -> ScriptedStep:
    """The offline title model: the default title call sends the conversation as
    ``User: ...`` / ``Assistant: ...`` lines; it names it after the first question."""
    lines = last_user_text(request).splitlines()
    first = next((ln.removeprefix("User: ") for ln in lines if ln.startswith("User: ")), "")
    match = _ARITHMETIC.search(first)
    if match:
        return ScriptedStep.reply(f"Calculating {match.group(0).strip()}")
    if _TIME.search(first):
        return ScriptedStep.reply("The current time")
    words = " ".join(first.split()[:6]).strip(" ?!.,;:")
    return ScriptedStep.reply(words[:1].upper() + words[1:] if words else "A new chat")

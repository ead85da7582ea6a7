"""Repair truncated JSON: a port of the AI SDK's ``parsePartialJson``/``fixJson``.

Streaming tool inputs arrive as JSON text fragments; the reducer shows the partial object
after every fragment, so it must parse what is there so far the way browsers do.
"""

from __future__ import annotations

from typing import Any, Final

from pai_agents.json import strict_loads

__all__ = ["parse_partial_json"]

_LITERALS: Final = ("true", "false", "null")
_OBJECT_STATES: Final = frozenset(
    {
        "obj-start",
        "obj-key",
        "obj-after-key",
        "obj-after-comma",
        "obj-before-value",
        "obj-after-value",
    }
)
_ARRAY_STATES: Final = frozenset({"arr-start", "arr-after-comma", "arr-after-value"})


def _fix_json(text: str) -> str:
    """Close what a truncated JSON text left open: a port of the SDK's ``fixJson`` scanner."""
    stack = ["root"]
    last_valid = -1
    literal_start = 0

    def value_start(char: str, index: int, swap: str) -> None:
        nonlocal last_valid, literal_start
        opened = {'"': "string", "{": "obj-start", "[": "arr-start"}
        if char in opened:
            inner = opened[char]
        elif char in "tfn":
            inner, literal_start = "literal", index
        elif char == "-" or char.isdigit():
            inner = "number"
        else:
            return
        if char != "-":
            last_valid = index
        stack[-1] = swap
        stack.append(inner)

    def after_value(char: str, index: int) -> None:
        nonlocal last_valid
        top = stack[-1]
        if top == "obj-after-value":
            if char == ",":
                stack[-1] = "obj-after-comma"
            elif char == "}":
                last_valid = index
                stack.pop()
        elif top == "arr-after-value":
            if char == ",":
                stack[-1] = "arr-after-comma"
            elif char == "]":
                last_valid = index
                stack.pop()

    for index, char in enumerate(text):
        state = stack[-1]
        if state == "root":
            value_start(char, index, "finish")
        elif state == "obj-start":
            if char == '"':
                stack[-1] = "obj-key"
            elif char == "}":
                last_valid = index
                stack.pop()
        elif state == "obj-after-comma":
            if char == '"':
                stack[-1] = "obj-key"
        elif state == "obj-key":
            if char == '"':
                stack[-1] = "obj-after-key"
        elif state == "obj-after-key":
            if char == ":":
                stack[-1] = "obj-before-value"
        elif state == "obj-before-value":
            value_start(char, index, "obj-after-value")
        elif state in ("obj-after-value", "arr-after-value"):
            after_value(char, index)
        elif state == "string":
            if char == '"':
                stack.pop()
                last_valid = index
            elif char == "\\":
                stack.append("escape")
            else:
                last_valid = index
        elif state == "escape":
            stack.pop()
            last_valid = index
        elif state == "arr-start":
            if char == "]":
                last_valid = index
                stack.pop()
            else:
                value_start(char, index, "arr-after-value")
        elif state == "arr-after-comma":
            value_start(char, index, "arr-after-value")
        elif state == "number":
            if char.isdigit():
                last_valid = index
            elif char not in "eE-+.":
                stack.pop()
                after_value(char, index)
        elif state == "literal":
            partial = text[literal_start : index + 1]
            if any(lit.startswith(partial) for lit in _LITERALS):
                last_valid = index
            else:
                stack.pop()
                after_value(char, index)

    result = text[: last_valid + 1]
    for state in reversed(stack):
        if state == "string":
            result = _drop_broken_escape(result) + '"'
        elif state in _OBJECT_STATES:
            result += "}"
        elif state in _ARRAY_STATES:
            result += "]"
        elif state == "literal":
            partial = text[literal_start:]
            for lit in _LITERALS:
                if lit.startswith(partial):
                    result += lit[len(partial) :]
                    break
    return result


def _drop_broken_escape(text: str) -> str:
    """Cut a trailing incomplete escape (``\\`` or ``\\u12``) so the closed string parses."""
    backslash = text.rfind("\\")
    if backslash == -1:
        return text
    run = len(text[:backslash]) - len(text[:backslash].rstrip("\\"))
    if run % 2 == 1:  # this backslash is itself escaped
        return text
    tail = text[backslash + 1 :]
    if tail == "" or (tail[0] == "u" and len(tail) < 5):
        return text[:backslash]
    return text


def parse_partial_json(text: str, default: Any = None) -> Any:
    """Parse possibly truncated JSON the way the SDK's ``parsePartialJson`` does.

    Complete JSON parses as is; otherwise open strings, arrays and objects are closed and
    dangling keys, commas and partial numbers dropped (``{"city":`` gives ``{}``).
    Returns ``default`` when even the repaired text does not parse.
    """
    for candidate in (text, _fix_json(text)):
        try:
            return strict_loads(candidate)
        except ValueError:
            continue
    return default

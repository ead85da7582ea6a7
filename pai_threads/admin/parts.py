"""Message parts rendered for people: text as text, tool calls as input, state and output.

The console shows what a user or a model saw, one block per part, instead of raw JSON; any
part type it does not know is shown as JSON, so nothing is hidden.
"""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from pai_threads.admin.base import pretty_json, short

__all__ = ["part_summary", "render_parts"]


def _tool_name(part: dict[str, Any]) -> str:
    kind = str(part.get("type", ""))
    if kind == "dynamic-tool":
        return str(part.get("toolName", "tool"))
    return kind.removeprefix("tool-")


def _is_tool(part: dict[str, Any]) -> bool:
    kind = str(part.get("type", ""))
    return kind.startswith("tool-") or kind == "dynamic-tool"


def _render_tool(part: dict[str, Any]) -> SafeString:
    rows: list[tuple[str, SafeString]] = [("input", pretty_json(part.get("input")))]
    if "output" in part:
        rows.append(("output", pretty_json(part.get("output"))))
    if part.get("errorText"):
        rows.append(("error", format_html("<pre class='pai-json'>{}</pre>", part["errorText"])))
    for key in ("approval", "data", "suspensions", "pendingSuspension"):
        if part.get(key):
            rows.append((key, pretty_json(part[key])))
    body = format_html_join("", "<dt>{}</dt><dd>{}</dd>", rows)
    return format_html(
        "<div class='pai-part pai-tool'><strong>tool {}</strong> · call {} · state <code>{}</code>"
        "<dl>{}</dl></div>",
        _tool_name(part),
        part.get("toolCallId", "?"),
        part.get("state", "?"),
        body,
    )


def _render_part(part: Any) -> SafeString:
    if not isinstance(part, dict):
        return pretty_json(part)
    kind = str(part.get("type", ""))
    if kind == "text":
        return format_html(
            "<div class='pai-part pai-text'><pre class='pai-json'>{}</pre></div>",
            part.get("text", ""),
        )
    if kind == "reasoning":
        return format_html(
            "<div class='pai-part pai-reasoning'><em>reasoning</em>"
            "<pre class='pai-json'>{}</pre></div>",
            part.get("text", ""),
        )
    if _is_tool(part):
        return _render_tool(part)
    if kind == "step-start":
        return format_html("<div class='pai-part pai-step'><em>{}</em></div>", "step start")
    if kind == "file":
        return format_html(
            "<div class='pai-part pai-file'>file <code>{}</code> {}</div>",
            part.get("mediaType", "?"),
            part.get("filename") or part.get("fileId") or part.get("url", ""),
        )
    if kind.startswith("source-"):
        return format_html(
            "<div class='pai-part pai-source'>{} {}</div>",
            kind,
            part.get("url") or part.get("title") or part.get("sourceId", ""),
        )
    return format_html(
        "<div class='pai-part pai-data'><em>{}</em>{}</div>", kind or "part", pretty_json(part)
    )


def render_parts(parts: Any) -> SafeString:
    """Every part of a message, in order, as readable blocks."""
    if not isinstance(parts, list) or not parts:
        return mark_safe("<em>no parts</em>")
    return format_html_join("", "{}", ((_render_part(part),) for part in parts))


def part_summary(parts: Any, limit: int = 70) -> str:
    """One line for a list column: the text, or the tools called."""
    if not isinstance(parts, list):
        return ""
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif _is_tool(part):
            texts.append(f"[{_tool_name(part)}: {part.get('state', '?')}]")
        elif part.get("type") == "file":
            texts.append(f"[file {part.get('mediaType', '')}]")
    return short(" ".join(texts), limit)

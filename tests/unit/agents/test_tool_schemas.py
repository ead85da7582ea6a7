"""A tool's JSON schema is built once and handed out as a copy (issue 16: it was rebuilt on
every model step)."""

from __future__ import annotations

from pydantic import BaseModel

from pai_agents import tool


class LookupInput(BaseModel):
    q: str
    limit: int = 3


def lookup(args: LookupInput) -> str:
    return args.q


def test_a_changed_schema_copy_never_reaches_the_next_request() -> None:
    lookup_tool = tool("lookup", input=LookupInput, execute=lookup)
    first = lookup_tool.spec()
    first["inputSchema"]["properties"]["q"]["type"] = "integer"
    first["inputSchema"]["required"].append("limit")
    again = lookup_tool.spec()
    assert again["inputSchema"] == LookupInput.model_json_schema()
    assert lookup_tool.manifest()["inputSchema"] == LookupInput.model_json_schema()

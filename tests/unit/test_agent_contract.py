"""The agent contract (pai_agents.contract): the full registered contract on the definition
and the public client contract, both JSON Schemas, both free of callables and secrets."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from pai_agents import (
    AgentContract,
    CommandContext,
    ProviderTool,
    ScriptedModel,
    ToolContext,
    capability,
    define_agent,
    define_command,
    subagent,
    tool,
)
from pai_agents.agent import AgentDefinition
from pai_agents.lifecycle import MetadataSchemas
from pai_agents.mcp import MCPServer
from tests.support.contract_models import Empty, RunPrivate, RunPublic, ThreadPrivate, ThreadPublic

SECRET = "sk-contract-SECRET-7731"
GENERIC = {"type": "object"}


class Identity(BaseModel):
    user_id: str
    workspace_id: str


class ClientData(BaseModel):
    locale: str = "en"


class MessagePrivate(BaseModel):
    moderation_score: float | None = None


class MessagePublic(BaseModel):
    pinned: bool = False


class Progress(BaseModel):
    percent: int = Field(ge=0, le=100)


class LookupInput(BaseModel):
    order_id: str


class LookupOutput(BaseModel):
    status: str


class Address(BaseModel):
    street: str
    city: str


class PickInput(BaseModel):
    options: list[str]


class RefundInput(BaseModel):
    amount_cents: int


class ExportOutput(BaseModel):
    text: str


class Desk:
    """The interface a capability binding implements."""


DESK = capability("tickets.desk", Desk)
RUN_METADATA = MetadataSchemas(private=RunPrivate, public=RunPublic)


async def lookup(args: LookupInput, ctx: ToolContext) -> LookupOutput:
    return LookupOutput(status="shipped")


async def ship(args: LookupInput, ctx: ToolContext) -> Any:
    return ctx.suspend("address")


def export_transcript(args: Empty, ctx: CommandContext) -> ExportOutput:
    return ExportOutput(text="")


def grant_refund(args: RefundInput, ctx: CommandContext) -> None:
    return None


def _agent() -> AgentDefinition:
    servers = [
        MCPServer.http(
            "tickets", url="https://mcp.example.com/mcp", headers={"Authorization": SECRET}
        ),
        MCPServer.stdio("files", command="mcp-files", env={"FILES_TOKEN": SECRET}),
    ]
    return define_agent(
        "support",
        instructions="Help.",
        model=ScriptedModel(),
        identity=Identity,
        client_data=ClientData,
        run_metadata=RUN_METADATA,
        thread_metadata=MetadataSchemas(private=ThreadPrivate, public=ThreadPublic),
        message_metadata=MetadataSchemas(private=MessagePrivate, public=MessagePublic),
        ui_data_schemas={"report-progress": Progress},
        tools=[
            tool(
                "lookup",
                input=LookupInput,
                output=LookupOutput,
                execute=lookup,
                description="Look an order up.",
                idempotent=True,
                capabilities={"desk": DESK},
            ),
            tool("ship", input=LookupInput, execute=ship, suspends={"address": Address}),
            tool("pick", input=PickInput, description="Ask the person.", needs_approval=True),
            subagent("searcher", description="Search the web."),
        ],
        provider_tools={"web_search": ProviderTool(definition={"type": "web", "key": SECRET})},
        commands=[
            define_command(
                "export_transcript",
                input=Empty,
                output=ExportOutput,
                execute=export_transcript,
                exposed=True,
            ),
            define_command(
                "grant_refund",
                input=RefundInput,
                execute=grant_refund,
                run_metadata=RUN_METADATA,
                description="Server only.",
            ),
        ],
        mcp_servers=servers,
    )


def _walk(value: Any, path: str = "$") -> list[str]:
    """Where ``value`` holds something that is not plain JSON data or a contract value."""
    if isinstance(value, str | int | float | bool) or value is None:
        return []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return [bad for f in fields for bad in _walk(getattr(value, f.name), f"{path}.{f.name}")]
    if isinstance(value, Mapping):
        return [
            bad
            for key, item in value.items()
            for bad in ([] if isinstance(key, str) else [f"{path} key {key!r}"])
            + _walk(item, f"{path}[{key!r}]")
        ]
    if isinstance(value, list | tuple):
        return [bad for i, item in enumerate(value) for bad in _walk(item, f"{path}[{i}]")]
    return [f"{path}: {type(value).__name__}"]


def test_ad_074_a_definition_exposes_name_version_contract_manifest_and_capabilities() -> None:
    """AD-074: name, version, contract, manifest and capabilities; ``manifest`` is a method
    in Python (the documented deviation), the contract a value built once."""
    agent = _agent()
    assert agent.name == "support" and agent.version
    assert isinstance(agent.contract, AgentContract)
    assert (agent.contract.name, agent.contract.version) == (agent.name, agent.version)
    assert agent.contract is agent.contract  # cached: built on first use only
    assert callable(agent.manifest) and agent.manifest()["name"] == "support"
    assert dict(agent.capabilities) == {"tickets.desk": DESK}
    assert agent.contract.capabilities == ("tickets.desk",)


def test_ad_077_the_full_contract_holds_server_only_commands_and_private_shapes() -> None:
    """AD-077: ``definition.contract`` is the full registered contract: every command (the
    server-only one flagged) and the private run, thread and message metadata schemas."""
    full = _agent().contract.as_dict()
    assert full["public"] is False
    assert set(full["commands"]) == {"export_transcript", "grant_refund"}
    refund = full["commands"]["grant_refund"]
    assert (refund["exposed"], refund["metadataAware"], refund["startsRun"]) == (
        False,
        True,
        False,
    )
    assert refund["inputSchema"] == RefundInput.model_json_schema()
    assert "outputSchema" not in refund
    export = full["commands"]["export_transcript"]
    assert export["exposed"] is True and export["metadataAware"] is False
    assert export["outputSchema"] == ExportOutput.model_json_schema(mode="serialization")
    for key, private, public in (
        ("runMetadata", RunPrivate, RunPublic),
        ("threadMetadata", ThreadPrivate, ThreadPublic),
        ("messageMetadata", MessagePrivate, MessagePublic),
    ):
        assert full[key] == {
            "private": private.model_json_schema(mode="serialization"),
            "public": public.model_json_schema(mode="serialization"),
        }
    assert full["identity"] == Identity.model_json_schema(mode="serialization")
    assert full["clientData"] == ClientData.model_json_schema()
    assert full["uiData"] == {"report-progress": Progress.model_json_schema(mode="serialization")}
    assert full["capabilities"] == ["tickets.desk"]


def test_ad_077_the_public_contract_omits_server_only_commands_and_erases_private_shapes() -> None:
    """AD-077: the client contract omits server-only commands and erases the private run
    and thread metadata (and, stricter than the seed, the message one) to a generic JSON
    object; public shapes, tools and exposed commands are kept; capability ids dropped."""
    agent = _agent()
    full, public = agent.contract, agent.contract.public()
    data = public.as_dict()
    assert data["public"] is True
    assert set(data["commands"]) == {"export_transcript"}
    assert data["commands"]["export_transcript"] == full.as_dict()["commands"]["export_transcript"]
    for key, shape in (
        ("runMetadata", RunPublic),
        ("threadMetadata", ThreadPublic),
        ("messageMetadata", MessagePublic),
    ):
        assert data[key] == {
            "private": GENERIC,
            "public": shape.model_json_schema(mode="serialization"),
        }
    assert data["tools"] == full.as_dict()["tools"]
    assert "capabilities" not in data
    text = json.dumps(data)
    for hidden in ("grant_refund", "evaluation_job_id", "crm_ticket_ref", "moderation_score"):
        assert hidden not in text
    assert public.public() is public  # idempotent
    # The full contract is untouched by the projection.
    assert set(full.commands) == {"export_transcript", "grant_refund"}
    assert "evaluation_job_id" in json.dumps(full.as_dict())


def test_ad_077_tools_are_keyed_by_registration_name_with_schemas_and_source() -> None:
    """AD-077: each tool by registration name: source, description, input and output
    schemas, approval, declared suspensions with their answer schemas; provider tools by
    name with no provider-native definition."""
    tools = _agent().contract.as_dict()["tools"]
    assert list(tools) == ["lookup", "ship", "pick", "searcher", "web_search"]
    assert tools["lookup"] == {
        "name": "lookup",
        "description": "Look an order up.",
        "source": "backend",
        "inputSchema": LookupInput.model_json_schema(),
        "outputSchema": LookupOutput.model_json_schema(mode="serialization"),
        "needsApproval": False,
        "idempotent": True,
    }
    assert tools["ship"]["suspends"] == {"address": Address.model_json_schema()}
    assert (tools["pick"]["source"], tools["pick"]["needsApproval"]) == ("client", True)
    assert (tools["searcher"]["source"], tools["searcher"]["agent"]) == ("subagent", "searcher")
    assert tools["web_search"] == {
        "name": "web_search",
        "description": "",
        "source": "provider",
        "inputSchema": {},
        "needsApproval": False,
        "idempotent": False,
    }


def test_ad_077_both_contracts_round_trip_through_json_and_hold_no_callables() -> None:
    """AD-077: the full and the public contract are plain JSON (strict: no NaN) and neither
    the contract values nor their dicts hold a callable, a class or any other object."""
    contract = _agent().contract
    for value in (contract, contract.public()):
        assert _walk(value) == []
        data = value.as_dict()
        assert _walk(data) == []
        assert json.loads(json.dumps(data, allow_nan=False)) == data
        assert value.to_json() == data
        data["tools"]["lookup"]["inputSchema"]["properties"].clear()  # a copy
        assert value.as_dict()["tools"]["lookup"]["inputSchema"] == LookupInput.model_json_schema()


def test_ad_077_mcp_credentials_are_in_neither_contract() -> None:
    """AD-077: MCP tools are listed per run, so both contracts name the servers only: an
    HTTP server's headers and a stdio server's environment (and a provider tool's
    definition) never appear."""
    contract = _agent().contract
    for value in (contract, contract.public()):
        data = value.as_dict()
        assert data["mcpServers"] == ["tickets", "files"]
        text = json.dumps(data) + repr(value)
        assert SECRET not in text
        assert "mcp.example.com" not in text and "mcp-files" not in text


def test_ad_077_an_agent_without_schemas_takes_generic_json_objects() -> None:
    """AD-077: no identity, client data or metadata schemas: each is a generic JSON object;
    no commands, no ui data; the public contract differs only by its flag."""
    agent = define_agent("plain", instructions="x", model=ScriptedModel())
    full = agent.contract.as_dict()
    for key in ("identity", "clientData"):
        assert full[key] == GENERIC
    for key in ("runMetadata", "threadMetadata", "messageMetadata"):
        assert full[key] == {"private": GENERIC, "public": GENERIC}
    assert (full["tools"], full["commands"], full["uiData"], full["mcpServers"]) == (
        {},
        {},
        {},
        [],
    )
    public = agent.contract.public().as_dict()
    assert {**public, "public": False, "capabilities": []} == full

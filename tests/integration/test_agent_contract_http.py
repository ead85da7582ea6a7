"""``GET /api/pai/agents/{name}/contract``: the public contract over HTTP, never the full one,
with the access rules of ``GET /agents``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from pai_agents import CommandContext, ScriptedModel, define_agent, define_command
from pai_agents.agent import AgentDefinition
from pai_agents.lifecycle import MetadataSchemas
from pai_agents.mcp import MCPServer
from pai_threads.execution import registry
from tests.support.contract_models import Empty, RunPrivate, RunPublic, ThreadPrivate

pytestmark = pytest.mark.django_db

API = "/api/pai"
SECRET = "sk-contract-http-SECRET-5150"


def no_identity(request: Any) -> None:
    """An identity resolver that recognises nobody."""
    return None


def _noop(args: Empty, ctx: CommandContext) -> None:
    return None


@pytest.fixture
def agent(settings: Any) -> AgentDefinition:
    run_metadata = MetadataSchemas(private=RunPrivate, public=RunPublic)
    definition = define_agent(
        "contract-http",
        instructions="x",
        model=ScriptedModel(),
        run_metadata=run_metadata,
        thread_metadata=MetadataSchemas(private=ThreadPrivate, public=Empty),
        commands=[
            define_command("export_transcript", input=Empty, execute=_noop, exposed=True),
            define_command("grant_refund", input=Empty, execute=_noop, run_metadata=run_metadata),
        ],
        mcp_servers=[
            MCPServer.http("tickets", url="https://mcp.test/mcp", headers={"X-Key": SECRET})
        ],
    )
    # An AGENTS entry may be the definition itself; changing PAI clears the registry cache.
    settings.PAI = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], definition]}
    assert registry.get_agent("contract-http") is definition
    return definition


def test_ad_077_the_contract_endpoint_serves_the_public_contract_only(
    agent: AgentDefinition,
) -> None:
    """AD-077: the endpoint returns ``contract.public()``: no server-only command, private
    run and thread metadata erased to a generic object, no MCP credentials."""
    response = Client().get(f"{API}/agents/contract-http/contract")
    assert response.status_code == 200
    body = response.json()
    assert body == json.loads(json.dumps(agent.contract.public().as_dict()))
    assert body["public"] is True and set(body["commands"]) == {"export_transcript"}
    assert body["runMetadata"]["private"] == {"type": "object"}
    assert body["threadMetadata"]["private"] == {"type": "object"}
    assert body["mcpServers"] == ["tickets"]
    for hidden in ("grant_refund", "evaluation_job_id", "crm_ticket_ref", SECRET, "mcp.test"):
        assert hidden not in response.content.decode()


def test_ad_077_the_contract_endpoint_follows_the_manifest_endpoints_access_rules(
    agent: AgentDefinition, settings: Any
) -> None:
    """AD-077: an unknown agent is 404 ``not_found``; with no identity both the manifest
    list and the contract are 401."""
    client = Client()
    missing = client.get(f"{API}/agents/nope/contract")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    settings.PAI = {**settings.PAI, "IDENTITY_RESOLVER": f"{__name__}.no_identity"}
    for path in ("/agents", "/agents/contract-http/contract"):
        response = client.get(f"{API}{path}")
        assert response.status_code == 401, path
        assert response.json()["error"]["code"] == "unauthenticated"

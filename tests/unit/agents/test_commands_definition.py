"""Command definitions (docs/commands.md): ``@command`` / ``define_command`` and what
``define_agent(commands=)`` checks, folds and publishes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import (
    AgentDefinitionError,
    CapabilityBindingError,
    CommandContext,
    CommandRun,
    ScriptedModel,
    capability,
    command,
    define_agent,
    define_command,
    tool,
)
from pai_agents.lifecycle import MetadataSchemas


class Args(BaseModel):
    n: int = 1


class Out(BaseModel):
    doubled: int


class Public(BaseModel):
    topic: str = ""


class Private(BaseModel):
    note: str = ""


class Desk:
    pass


def _agent(**kwargs: Any) -> Any:
    return define_agent("cmd", instructions="x", model=ScriptedModel(steps=[]), **kwargs)


@command(exposed=True)
async def double(args: Args, ctx: CommandContext) -> Out:
    """Double a number."""
    return Out(doubled=args.n * 2)


@command
def secret(args: Args, ctx: CommandContext) -> None:
    """Server-only."""


def test_command_decorator_reads_name_doc_input_and_output() -> None:
    assert double.name == "double" and double.description == "Double a number."
    assert double.input_model is Args and double.output_model is Out
    assert double.exposed is True and double.starts_run is False
    assert secret.exposed is False, "server-only unless the author exposes it"


def test_command_input_is_validated_with_typed_errors() -> None:
    from pai_agents.commands import CommandInputError

    assert double.parse_input({"n": 3}) == Args(n=3)
    with pytest.raises(CommandInputError) as caught:
        double.parse_input({"n": "many"})
    assert caught.value.errors[0]["loc"] == ["n"]
    with pytest.raises(CommandInputError):
        double.parse_input([1, 2])


def test_ad_036_metadata_aware_command_needs_the_very_schema_pair_object() -> None:
    """AD-036: a metadata-aware command bound to the agent's own pair object registers; one
    bound to an equal copy (or another pair) is refused by define_agent."""
    pair = MetadataSchemas(private=Private, public=Public)
    copy = MetadataSchemas(private=Private, public=Public)
    assert copy == pair and copy is not pair

    def execute(args: Args, ctx: CommandContext) -> CommandRun:
        return CommandRun(message="go")

    bound = define_command("go", input=Args, execute=execute, starts_run=True, run_metadata=pair)
    agent = _agent(run_metadata=pair, commands=[bound])
    assert agent.commands["go"].run_metadata is agent.run_metadata

    drifted = define_command("go", input=Args, execute=execute, run_metadata=copy)
    with pytest.raises(AgentDefinitionError, match="AD-036"):
        _agent(run_metadata=pair, commands=[drifted])
    with pytest.raises(AgentDefinitionError, match="different run_metadata"):
        _agent(commands=[drifted])  # the agent has no pair at all


def test_ad_036_both_definitions_validate_the_schema_pair() -> None:
    """AD-036: define_command validates its pair as define_agent does (a schema that does
    not accept ``{}`` is refused at each boundary)."""

    class Required(BaseModel):
        needed: str

    bad = MetadataSchemas.__new__(MetadataSchemas)
    object.__setattr__(bad, "private", Private)
    object.__setattr__(bad, "public", Required)
    with pytest.raises(AgentDefinitionError, match="command 'x': run_metadata"):
        define_command("x", input=Args, execute=lambda a, c: None, run_metadata=bad)
    with pytest.raises(AgentDefinitionError, match="run_metadata"):
        define_command("x", input=Args, execute=lambda a, c: None, run_metadata={"a": 1})  # type: ignore[arg-type]
    with pytest.raises(AgentDefinitionError, match="run_metadata"):
        _agent(run_metadata=bad)


def test_ad_062_capabilities_fold_tools_and_commands_by_id() -> None:
    """AD-062: the requirement map is keyed by id across tools and commands, aliases
    remapped; one id through two distinct capability objects raises."""
    desk = capability("desk", Desk)
    clock = capability("clock", Desk)

    @tool(input=Args, capabilities={"d": desk})
    def use_desk(args: Args) -> int:
        return 1

    @command(capabilities={"mine": desk, "wall": clock})
    def ring(args: Args, ctx: CommandContext) -> None:
        return None

    agent = _agent(tools=[use_desk], commands=[ring])
    assert agent.capabilities == {"clock": clock, "desk": desk}

    other_desk = capability("desk", Desk)

    @command(capabilities={"d": other_desk})
    def clash(args: Args, ctx: CommandContext) -> None:
        return None

    with pytest.raises(CapabilityBindingError, match="'desk'"):
        _agent(tools=[use_desk], commands=[clash])
    with pytest.raises(CapabilityBindingError):
        define_command("x", input=Args, execute=print, capabilities={"d": "desk"})  # type: ignore[dict-item]


def test_ad_075_ad_076_manifest_lists_exposed_commands_by_name_without_schemas() -> None:
    """AD-075, AD-076 (commands): the manifest keys client-exposed commands by name, omits
    server-only ones, and holds no callable or JSON Schema; it is JSON-serializable."""

    @command(exposed=True, starts_run=True)
    def summarise(args: Args, ctx: CommandContext) -> CommandRun:
        """Summarise."""
        return CommandRun(message="sum")

    agent = _agent(commands=[double, secret, summarise])
    manifest = agent.manifest()
    assert manifest["commands"] == {
        "double": {"name": "double", "description": "Double a number.", "startsRun": False},
        "summarise": {"name": "summarise", "description": "Summarise.", "startsRun": True},
    }
    text = json.dumps(manifest["commands"])
    assert "secret" not in text and "schema" not in text.lower() and "properties" not in text
    assert set(agent.commands) == {"double", "secret", "summarise"}, "the full registry"
    assert _agent().manifest()["commands"] == {}


def test_command_names_are_unique_and_distinct_from_tools() -> None:
    @tool(input=Args)
    def double_tool(args: Args) -> int:
        return 1

    clashing = define_command("double_tool", input=Args, execute=lambda a, c: None)
    with pytest.raises(AgentDefinitionError, match="duplicate command"):
        _agent(commands=[double, double])
    with pytest.raises(AgentDefinitionError, match="clashes with a tool"):
        _agent(tools=[double_tool], commands=[clashing])
    with pytest.raises(AgentDefinitionError, match="!= its name"):
        _agent(commands={"other": double})
    with pytest.raises(AgentDefinitionError, match="not a Command"):
        _agent(commands=[double_tool])  # type: ignore[list-item]


def test_malformed_commands_are_refused_at_definition() -> None:
    with pytest.raises(AgentDefinitionError, match="must be letters"):
        define_command("no spaces", input=Args, execute=lambda a, c: None)
    with pytest.raises(AgentDefinitionError, match="input must be a pydantic model"):
        define_command("x", input=dict, execute=lambda a, c: None)  # type: ignore[arg-type]
    with pytest.raises(AgentDefinitionError, match="execute must be callable"):
        define_command("x", input=Args, execute="no")  # type: ignore[arg-type]
    with pytest.raises(AgentDefinitionError, match="annotate its first parameter"):
        command(lambda args, ctx: None)
    with pytest.raises(AgentDefinitionError, match="returns a CommandRun"):
        define_command("x", input=Args, output=Out, execute=lambda a, c: None, starts_run=True)


def test_commands_change_the_default_version_fingerprint() -> None:
    plain = _agent()
    assert _agent(commands=[double]).version != plain.version
    assert _agent(commands=[double]).version == _agent(commands=[double]).version

"""Agent-definition rules (AD-*) that hold without Django: define_agent, tools, selections and
what the engine hands to builders, on the in-memory store."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from pai_agents import (
    AbortSignal,
    AgentDefinitionError,
    InMemoryThreadStore,
    ModelRequest,
    ModelSelection,
    RecordingSink,
    RunEngine,
    RunOutcome,
    ScriptedModel,
    ScriptedStep,
    define_agent,
    tool,
)
from pai_agents.agent import AgentBehaviorInput, ToolConfig, ToolOutputInput
from pai_agents.json import NotStrictJson
from pai_agents.lifecycle import (
    Complete,
    Continue,
    MetadataSchemaError,
    MetadataSchemas,
    ModelStepPatch,
)
from pai_agents.tools import ToolContext

pytestmark = pytest.mark.filterwarnings("error")


class Args(BaseModel):
    q: str = ""


executed: list[str] = []


@tool(input=Args)
def lookup(args: Args) -> str:
    """Look something up."""
    executed.append(args.q)
    return f"found {args.q}"


@tool(input=Args)
def other(args: Args) -> str:
    """Another tool."""
    return "other"


@tool(input=Args, needs_approval=True)
def wire(args: Args) -> str:
    """A person approves each call."""
    executed.append(f"wire:{args.q}")
    return "sent"


# No execute: a client or a manual submitter answers it.
ask_client = tool("ask_client", input=Args, description="Answered by the browser.")


@pytest.fixture(autouse=True)
def _reset() -> None:
    executed.clear()


def _thread(agent_name: str, **send: Any) -> tuple[InMemoryThreadStore, str]:
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s1", agent_name=agent_name)
    run_id = store.send(
        thread_id,
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        **send,
    )
    return store, run_id


async def _episode(
    store: InMemoryThreadStore, run_id: str, agent: Any, *, signal: AbortSignal | None = None
) -> RunOutcome:
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    engine = RunEngine(agent=agent, store=store, sink=RecordingSink())
    return await engine.run_episode(claim, signal=signal)


# --------------------------------------------------------------------------- define_agent


def test_ad_002_name_is_required_and_an_omitted_version_is_a_string_pai_supplies() -> None:
    """AD-002: no name, no agent; without ``version`` the definition still has a string one
    (stable for the same definition), and an application version is kept as given."""
    model = ScriptedModel()
    with pytest.raises(TypeError):
        define_agent(instructions="x", model=model)  # type: ignore[call-arg]
    first = define_agent("versioned", instructions="x", model=model, tools=[lookup])
    again = define_agent("versioned", instructions="y", model=model, tools=[lookup])
    assert isinstance(first.version, str) and first.version
    assert again.version == first.version
    assert first.manifest()["version"] == first.version
    assert define_agent("versioned", version="1.2.0", instructions="x", model=model).version == (
        "1.2.0"
    )
    with pytest.raises(AgentDefinitionError):
        define_agent("versioned", version="", instructions="x", model=model)


async def test_ad_003_model_and_instructions_are_required_and_every_model_form_resolves() -> None:
    """AD-003: ``model`` and ``instructions`` are required; ``model`` may be a LanguageModel, a
    ModelSelection or a sync/async callable returning either."""
    model = ScriptedModel()
    with pytest.raises(TypeError):
        define_agent("m", instructions="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        define_agent("m", model=model)  # type: ignore[call-arg]
    with pytest.raises(AgentDefinitionError):
        define_agent("m", instructions="x", model="gpt-4o")  # type: ignore[arg-type]

    selection = ModelSelection(model=model, settings={"temperature": 0.5})

    async def async_resolver(behavior: AgentBehaviorInput) -> ModelSelection:
        return selection

    behavior = AgentBehaviorInput(
        identity={}, client_data={}, runtime_context=None, thread_id="t", run_id="r"
    )
    for source in (model, selection, lambda behavior: model, async_resolver):
        agent = define_agent("m", instructions="x", model=source)
        resolved = await agent.resolve_model(behavior)
        assert isinstance(resolved, ModelSelection) and resolved.model is model
    bad = define_agent("m", instructions="x", model=lambda behavior: "gpt-4o")
    with pytest.raises(AgentDefinitionError):
        await bad.resolve_model(behavior)


@pytest.mark.parametrize(
    "key", ["middleware", "input_processors", "output_processors", "telemetry", "unknown_key"]
)
def test_ad_004_define_agent_rejects_unknown_config_keys(key: str) -> None:
    """AD-004: unknown keys, including middleware/processors/telemetry, are refused."""
    with pytest.raises(TypeError):
        define_agent("k", instructions="x", model=ScriptedModel(), **{key: []})  # type: ignore[arg-type]


def test_ad_005_only_pydantic_schemas_are_accepted_at_definition_time() -> None:
    """AD-005: identity, client data, ui data, tool and metadata schemas must be pydantic;
    a JSON-Schema dict or another object is refused when the agent or tool is defined."""
    model = ScriptedModel()
    json_schema = {"type": "object", "properties": {"q": {"type": "string"}}}

    class NotPydantic:
        q: str

    for options in (
        {"identity": json_schema},
        {"identity": NotPydantic},
        {"client_data": json_schema},
        {"ui_data_schemas": {"progress": json_schema}},
    ):
        with pytest.raises(AgentDefinitionError):
            define_agent("schemas", instructions="x", model=model, **options)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tool("t", input=json_schema, execute=lambda args: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tool("t", input=Args, output=NotPydantic, execute=lambda args: None)  # type: ignore[arg-type]
    with pytest.raises(MetadataSchemaError):
        MetadataSchemas(private=json_schema, public=Args)  # type: ignore[arg-type]

    accepted = define_agent(
        "schemas",
        instructions="x",
        model=model,
        identity=Args,
        client_data=Args,
        ui_data_schemas={"progress": Args, "label": TypeAdapter(str)},
    )
    assert accepted.identity_schema is Args


async def test_ad_006_max_steps_defaults_to_ten_model_steps_per_episode() -> None:
    """AD-006: without ``max_steps`` an episode runs at most 10 model steps."""
    model = ScriptedModel(respond=lambda request: ScriptedStep.call("lookup", {"q": "again"}))
    agent = define_agent("loop", instructions="x", model=model, tools=[lookup])
    assert agent.max_steps == 10
    store, run_id = _thread("loop")
    outcome = await _episode(store, run_id, agent)

    assert outcome.status == "completed"
    assert len(model.requests) == 10
    assert [s.index for s in store.steps[run_id]] == list(range(10))
    assert len(executed) == 10


async def test_ad_008_a_tool_without_execute_becomes_a_pending_action_not_a_server_call() -> None:
    """AD-008: a call of a tool without an executor waits for a client or manual submitter."""
    model = ScriptedModel(steps=[ScriptedStep.call("ask_client", {"q": "which?"}, id="c1")])
    agent = define_agent("client", instructions="x", model=model, tools=[ask_client])
    store, run_id = _thread("client")
    outcome = await _episode(store, run_id, agent)

    assert outcome.status == "waiting"
    action = store.actions[(run_id, "c1")]
    assert action["status"] == "pending"
    assert action["request"].kind == "client"
    assert action["request"].input == {"q": "which?"}
    part = next(
        p
        for m in store.thread_messages(store.runs[run_id].thread_id)
        for p in m["parts"]
        if p.get("toolCallId") == "c1"
    )
    assert part["type"] == "tool-ask_client" and part["state"] == "input-available"


# --------------------------------------------------------------------------- behaviour input


async def test_ad_013_runtime_context_builder_input_and_its_value_reaches_every_callable() -> None:
    """AD-013: the builder gets identity, client data, thread id and the run's signal; what it
    returns is the ``runtime_context`` of model and instruction resolvers, ``enabled``,
    ``map_context``, ``on_output`` and hooks."""
    context = {"workspace": "w1"}
    built: list[AgentBehaviorInput] = []
    seen: dict[str, Any] = {}

    def runtime_context(input: AgentBehaviorInput) -> Any:
        built.append(input)
        return context

    def record(name: str) -> Any:
        def fn(input: Any) -> Any:
            seen[name] = input.runtime_context
            return True

        return fn

    def model(behavior: AgentBehaviorInput) -> Any:
        seen["model"] = behavior.runtime_context
        return scripted

    def instructions(behavior: AgentBehaviorInput) -> str:
        seen["instructions"] = behavior.runtime_context
        return "x"

    def map_context(behavior: AgentBehaviorInput) -> Any:
        seen["map_context"] = behavior.runtime_context
        return {"mapped": True}

    def on_output(input: ToolOutputInput) -> None:
        seen["on_output"] = input.runtime_context

    def prepare_run(input: Any) -> None:
        seen["prepare_run"] = input.runtime_context

    scripted = ScriptedModel(
        steps=[ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")]
    )
    agent = define_agent(
        "ctx",
        instructions=instructions,
        model=model,
        runtime_context=runtime_context,
        tools=[
            ToolConfig(
                tool=lookup, enabled=record("enabled"), map_context=map_context, on_output=on_output
            )
        ],
        lifecycle={"prepare_run": prepare_run},
    )
    store, run_id = _thread("ctx", identity={"userId": "alice"}, client_data={"tab": "inbox"})
    signal = AbortSignal()
    outcome = await _episode(store, run_id, agent, signal=signal)

    assert outcome.status == "completed"
    (input,) = built
    assert input.identity == {"userId": "alice"}
    assert input.client_data == {"tab": "inbox"}
    assert input.thread_id == store.runs[run_id].thread_id
    assert input.signal is signal
    assert set(seen) == {
        "model",
        "instructions",
        "enabled",
        "map_context",
        "on_output",
        "prepare_run",
    }
    assert all(value is context for value in seen.values())


@pytest.mark.parametrize("hooked", [False, True], ids=["plain", "lifecycle"])
async def test_ad_016_the_builder_signal_aborts_when_the_run_is_cancelled(hooked: bool) -> None:
    """AD-016: the signal builders and behaviour callables receive is the run's: cancelling
    the run (here from inside a tool) aborts it."""
    captured: list[AbortSignal] = []
    run_signal = AbortSignal()

    def runtime_context(input: AgentBehaviorInput) -> None:
        captured.append(input.signal)

    def instructions(behavior: AgentBehaviorInput) -> str:
        captured.append(behavior.signal)
        return "x"

    @tool(input=Args)
    def cancel(args: Args, ctx: ToolContext) -> str:
        """Cancels the run it runs in."""
        assert not captured[0].aborted
        run_signal.abort("cancelled")
        return "bye"

    agent = define_agent(
        "sig",
        instructions=instructions,
        model=ScriptedModel(steps=[ScriptedStep.call("cancel", {}), ScriptedStep.reply("no")]),
        runtime_context=runtime_context,
        tools=[cancel],
        lifecycle={"prepare_run": lambda input: None} if hooked else None,
    )
    store, run_id = _thread("sig")
    outcome = await _episode(store, run_id, agent, signal=run_signal)

    assert outcome.status == "cancelled"
    assert len(captured) == 2
    assert all(signal is run_signal and signal.aborted for signal in captured)


# --------------------------------------------------------------------------- model selection


async def test_ad_019_a_resume_calls_the_model_resolver_again_only_when_it_reaches_the_model() -> (
    None
):
    """AD-019: after an approval the resumed execution resolves the model again because it
    continues into the model loop; a resume that prepare_run completes does not."""
    for complete_on_resume in (False, True):
        calls: list[str] = []
        scripted = ScriptedModel(
            steps=[ScriptedStep.call("wire", {"q": "x"}, id="c1"), ScriptedStep.reply("sent it")]
        )

        def resolver(
            behavior: AgentBehaviorInput,
            calls: list[str] = calls,
            scripted: ScriptedModel = scripted,
        ) -> Any:
            calls.append(behavior.run_id)
            return scripted

        def prepare_run(input: Any, complete: bool = complete_on_resume) -> Any:
            if complete and input.run.execution.operation == "resume":
                return Complete()
            return None

        agent = define_agent(
            "resume",
            instructions="x",
            model=resolver,
            tools=[wire],
            lifecycle={"prepare_run": prepare_run},
        )
        store, run_id = _thread("resume")
        assert (await _episode(store, run_id, agent)).status == "waiting"
        assert len(calls) == 1
        store.respond(run_id, "c1", approved=True)
        outcome = await _episode(store, run_id, agent)

        assert outcome.status == "completed"
        if complete_on_resume:
            assert len(calls) == 1, "prepare_run completed the resume before the model loop"
            assert len(scripted.requests) == 1
        else:
            assert len(calls) == 2
            assert len(scripted.requests) == 2
            assert executed == ["wire:x"]
        executed.clear()


def test_ad_022_provider_options_map_provider_names_to_json_objects() -> None:
    """AD-022: provider options are ``{provider: JSON object}``; anything else is refused."""
    model = ScriptedModel()
    ok = ModelSelection(model=model, provider_options={"openai": {"store": False, "x": [1, None]}})
    assert ok.provider_options["openai"]["x"] == [1, None]
    with pytest.raises(NotStrictJson):
        ModelSelection(model=model, provider_options={"openai": {"t": float("nan")}})
    with pytest.raises(NotStrictJson):
        ModelSelection(model=model, provider_options={"openai": {"when": object()}})
    with pytest.raises(TypeError):
        ModelSelection(model=model, provider_options={"openai": "fast"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        ModelSelection(model=model, provider_options=[("openai", {})])  # type: ignore[arg-type]


async def test_ad_023_selection_settings_and_options_are_every_steps_defaults() -> None:
    """AD-023: a ModelSelection's settings and provider options reach every step until a
    lifecycle patch changes them (here step 1 overrides the temperature only)."""
    scripted = ScriptedModel(
        steps=[
            ScriptedStep.call("lookup", {"q": "a"}),
            ScriptedStep.call("lookup", {"q": "b"}),
            ScriptedStep.reply("done"),
        ]
    )
    selection = ModelSelection(
        model=scripted,
        settings={"temperature": 0.2, "seed": 7},
        provider_options={"openai": {"user": "u1"}},
    )

    def prepare_model_step(input: Any) -> Any:
        if input.step.index == 1:
            return Continue(patch=ModelStepPatch(model_settings={"temperature": 0.9}))
        return None

    for lifecycle in (None, {"prepare_model_step": prepare_model_step}):
        scripted.requests.clear()
        scripted._queue = [
            ScriptedStep.call("lookup", {"q": "a"}),
            ScriptedStep.call("lookup", {"q": "b"}),
            ScriptedStep.reply("done"),
        ]
        agent = define_agent(
            "sel", instructions="x", model=selection, tools=[lookup], lifecycle=lifecycle
        )
        store, run_id = _thread("sel")
        assert (await _episode(store, run_id, agent)).status == "completed"
        requests = scripted.requests
        assert len(requests) == 3
        assert all(dict(r.provider_options) == {"openai": {"user": "u1"}} for r in requests)
        temperatures = [r.settings.get("temperature") for r in requests]
        assert temperatures == ([0.2, 0.2, 0.2] if lifecycle is None else [0.2, 0.9, 0.2])
        assert all(r.settings.get("seed") == 7 for r in requests)


# --------------------------------------------------------------------------- instructions

CACHE = {"anthropic": {"cacheControl": {"type": "ephemeral"}}}
STRUCTURED = [
    {"role": "system", "content": "You are terse."},
    {"role": "system", "content": "Cite sources.", "providerOptions": CACHE},
]


def _first_request(scripted: ScriptedModel) -> ModelRequest:
    (request,) = scripted.requests
    return request


@pytest.mark.parametrize("hooked", [False, True], ids=["plain", "lifecycle"])
async def test_ad_024_ad_025_structured_instructions_keep_order_and_their_options(
    hooked: bool,
) -> None:
    """AD-024, AD-025: instructions may be a string, one system message or an ordered list;
    the list order and message-local provider options reach the provider request."""
    lifecycle = {"prepare_run": lambda input: None} if hooked else None
    cases: list[tuple[Any, str | None, list[dict[str, Any]]]] = [
        ("Be brief.", "Be brief.", []),
        (STRUCTURED[1], None, [STRUCTURED[1]]),
        (STRUCTURED, None, STRUCTURED),
        (lambda behavior: list(STRUCTURED), None, STRUCTURED),
    ]
    for instructions, system, leading in cases:
        scripted = ScriptedModel(steps=[ScriptedStep.reply("ok")])
        agent = define_agent(
            "instr", instructions=instructions, model=scripted, lifecycle=lifecycle
        )
        store, run_id = _thread("instr")
        assert (await _episode(store, run_id, agent)).status == "completed"
        request = _first_request(scripted)
        assert request.system == system
        assert request.messages[: len(leading)] == leading
        assert request.messages[len(leading)]["role"] == "user"
        assert sum(m["role"] == "system" for m in request.messages) == len(leading)


def test_ad_024_instructions_other_than_system_messages_are_refused() -> None:
    """AD-024: structured instructions are system messages only."""
    with pytest.raises(AgentDefinitionError):
        define_agent(
            "instr",
            instructions=[{"role": "user", "content": "hi"}],  # type: ignore[list-item]
            model=ScriptedModel(),
        )


# --------------------------------------------------------------------------- tools and data


class Progress(BaseModel):
    label: str
    percent: int


async def test_ad_039_mf_010_a_ui_data_schema_key_names_its_typed_data_part() -> None:
    """AD-039, MF-010: the ``report-progress`` key yields parts of type
    ``data-report-progress``, typed by its schema (the parsed value is stored) and otherwise
    passed through unchanged into the message and the published chunks."""

    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            input.ui_data.write(
                {
                    "type": "data-report-progress",
                    "id": "p1",
                    "data": {"label": "d", "percent": "40"},
                }
            )
            async for part in input.stream:
                yield part

        return stream()

    agent = define_agent(
        "data",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
        ui_data_schemas={"report-progress": Progress},
        lifecycle={"transform_step_stream": transform},
    )
    store, run_id = _thread("data")
    sink = RecordingSink()
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    assert (await RunEngine(agent=agent, store=store, sink=sink).run_episode(claim)).status == (
        "completed"
    )
    answer = store.thread_messages(store.runs[run_id].thread_id)[-1]
    expected = {"type": "data-report-progress", "id": "p1", "data": {"label": "d", "percent": 40}}
    assert [p for p in answer["parts"] if p["type"].startswith("data-")] == [expected]
    assert [c for c in sink.chunks(answer["id"]) if c["type"].startswith("data-")] == [expected]


async def test_ad_056_a_disabled_tool_is_not_advertised_in_that_steps_request() -> None:
    """AD-056: a tool whose ``enabled`` is false (statically or for this runtime context) is
    missing from the step's tools; enabled ones are advertised."""
    scripted = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    agent = define_agent(
        "gate",
        instructions="x",
        model=scripted,
        runtime_context=lambda input: {"admin": False},
        tools=[
            ToolConfig(tool=lookup, enabled=False),
            ToolConfig(tool=wire, enabled=lambda behavior: behavior.runtime_context["admin"]),
            other,
        ],
    )
    store, run_id = _thread("gate")
    assert (await _episode(store, run_id, agent)).status == "completed"
    assert [t["name"] for t in _first_request(scripted).tools] == ["other"]
    assert sorted(t["name"] for t in agent.manifest()["tools"]) == ["lookup", "other", "wire"]

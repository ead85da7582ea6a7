"""Typed tools: a pydantic input model, an optional output model, and an ``execute`` callable.

The JSON schema the model sees is generated from the input model, and the same model
validates what the model sends back, so a malformed call becomes a model-visible tool error
instead of an exception in the run.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import BaseModel, ValidationError

from pai_agents.abort import AbortSignal
from pai_agents.capabilities import Capability, check_declarations
from pai_agents.json import JsonValue, NotStrictJson, ensure_strict_json
from pai_agents.models.base import ToolSpec
from pai_agents.suspensions import Suspend, answer_schema, check_suspends, suspend_value
from pai_agents.sync_calls import run_sync
from pai_agents.tool_data import ToolData

if TYPE_CHECKING:
    from pai_agents.lifecycle.inputs import ToolExecutionEntry
    from pai_agents.lifecycle.suspensions import SuspensionEpisode

__all__ = [
    "Suspend",
    "Tool",
    "ToolContext",
    "ToolData",
    "ToolError",
    "ToolFailure",
    "ToolInputError",
    "tool",
]


AnswerT = TypeVar("AnswerT", bound=BaseModel)


class ToolError(Exception):
    """Raise from ``execute`` to report a failure the model should see, verbatim."""


@dataclass(frozen=True)
class ToolFailure:
    """A deliberate failure *returned* from ``execute`` (``return ctx.fail("...")``).

    The model sees ``message`` verbatim as the call's ``output-error``, like a
    :class:`ToolError`, but lifecycle hooks can tell the two apart: ``after_tool_result``
    sees ``source="fail"`` here and ``source="throw"`` for anything raised (LC-139).
    """

    message: str


class ToolInputError(ValueError):
    """The model's arguments did not match the tool's input model."""


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a tool can know about the call it serves."""

    tool_call_id: str
    tool_name: str
    run_id: str
    thread_id: str
    identity: Mapping[str, Any]
    runtime_context: Any
    signal: AbortSignal
    messages: list[dict[str, Any]] = field(default_factory=list)
    # ToolData: progress/preliminary records joined onto this call's tool part (TH-037).
    data: ToolData = field(default_factory=ToolData)
    # The bound implementations of the capabilities this tool declared, by its own aliases.
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    # How this execution started: None (initial) or the ResumeEntry of an answered
    # suspension, and every suspension episode of the call so far (docs/suspensions.md).
    entry: ToolExecutionEntry | None = None
    suspend_history: Sequence[SuspensionEpisode] = ()
    # The tool's declared suspensions (name -> answer model), for suspend() and answer().
    suspends: Mapping[str, type[BaseModel]] = field(default_factory=dict)

    @property
    def context(self) -> Any:
        """The tool's context: its registration's ``map_context`` value, else the agent's
        runtime context (AD-059)."""
        return self.runtime_context

    def fail(self, message: str) -> ToolFailure:
        """Return this from ``execute`` to fail the call on purpose (``source="fail"``)."""
        return ToolFailure(str(message))

    def suspend(self, name: str, *, payload: Any = None) -> Suspend:
        """Return this from ``execute`` to wait for a person's answer to the declared
        suspension ``name``; ``payload`` (strict JSON, public) is what they are shown.
        ``execute`` runs again from the top once the answer is accepted."""
        return suspend_value(self.tool_name, self.suspends, name, payload)

    @overload
    def answer(self, name: str) -> BaseModel | None: ...

    @overload
    def answer(self, name: str, model: type[AnswerT]) -> AnswerT | None: ...

    def answer(self, name: str, model: type[BaseModel] | None = None) -> BaseModel | None:
        """The validated answer of the latest answered episode of suspension ``name`` (an
        instance of its declared model), or None while it has not been answered. Pass the
        declared ``model`` to get it typed (``ctx.answer("address", Address)``)."""
        declared = self.suspends.get(name)
        if declared is None:
            raise ValueError(f"tool {self.tool_name} declares no suspension {name!r}")
        if model is not None and not issubclass(declared, model):
            raise TypeError(
                f"suspension {name!r} answers {declared.__name__}, not {model.__name__}"
            )
        model = declared
        for episode in reversed(self.suspend_history):
            resolution = episode.resolution
            if (
                episode.kind == "input"
                and episode.name == name
                and isinstance(resolution, dict)
                and "answer" in resolution
            ):
                return model.model_validate(resolution["answer"])
        return None


Execute = Callable[..., Any]


def _accepts_context(execute: Execute) -> bool:
    parameters = list(inspect.signature(execute).parameters.values())
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    has_varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    return has_varargs or len(positional) >= 2


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A tool definition. Build it with :func:`tool`."""

    name: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel] | None = None
    execute: Execute | None = None
    # A person must approve each call before it executes (a pending action of kind approval).
    needs_approval: bool = False
    # Safe to run again after a crash mid-execution; otherwise an interrupted call becomes a
    # model-visible error (at-most-once execution).
    idempotent: bool = False
    # Dependencies the project binds (docs/capabilities.md): ``{alias: capability(...)}``;
    # ``ctx.capabilities[alias]`` is the implementation while the tool runs (AD-062).
    capabilities: Mapping[str, Capability] = field(default_factory=dict, hash=False)
    # Declared suspensions (docs/suspensions.md): ``{name: answer model}``; ``execute``
    # returns ``ctx.suspend(name, payload=...)`` to wait for a person's typed answer.
    suspends: Mapping[str, type[BaseModel]] = field(default_factory=dict, hash=False)
    _pass_context: bool = False

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "a").replace("-", "a").isalnum():
            raise ValueError(f"tool name {self.name!r} must be letters, digits, '_' or '-'")
        # AD-005: only pydantic schemas describe a tool's input and output.
        if not (isinstance(self.input_model, type) and issubclass(self.input_model, BaseModel)):
            raise TypeError(f"tool {self.name!r}: input must be a pydantic model class")
        if self.output_model is not None and not (
            isinstance(self.output_model, type) and issubclass(self.output_model, BaseModel)
        ):
            raise TypeError(f"tool {self.name!r}: output must be a pydantic model class")
        declared = check_declarations(f"tool {self.name!r}", self.capabilities)
        object.__setattr__(self, "capabilities", declared)
        suspends = check_suspends(
            f"tool {self.name!r}", self.suspends, executes=self.execute is not None
        )
        object.__setattr__(self, "suspends", suspends)

    @property
    def resumes_with_answers(self) -> bool:
        """Whether an answered episode re-enters ``execute`` (declared suspensions, and a
        sub-agent's outcome): the engine then loads the call's episodes on resume."""
        return bool(self.suspends)

    @cached_property
    def _schema(self) -> dict[str, Any]:
        return self.input_model.model_json_schema()

    @property
    def input_schema(self) -> dict[str, Any]:
        """The input model's JSON schema: built once per tool (pydantic takes ~0.4 ms per
        build, which every run paid), handed out as a copy callers may change."""
        return copy.deepcopy(self._schema)

    def spec(self) -> ToolSpec:
        spec: ToolSpec = {"name": self.name, "inputSchema": self.input_schema}
        if self.description:
            spec["description"] = self.description
        return spec

    def manifest(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "executes": "server" if self.execute is not None else "client",
            "needsApproval": self.needs_approval,
            "idempotent": self.idempotent,
        }
        if self.output_model is not None:
            entry["outputSchema"] = self.output_model.model_json_schema()
        if self.suspends:
            entry["suspends"] = {n: answer_schema(m) for n, m in self.suspends.items()}
        return entry

    def parse_input(self, raw: Any) -> BaseModel:
        """Validate model arguments (a JSON text or a decoded value) against the input model."""
        try:
            value = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise ToolInputError(f"Invalid JSON arguments for tool {self.name}: {exc.msg}") from exc
        try:
            # Parsed once (LC-121): what is persisted is the model's raw input, not a dump.
            return self.input_model.model_validate(value)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or '(input)'}: {error['msg']}"
                for error in exc.errors()
            )
            raise ToolInputError(f"Invalid input for tool {self.name}: {details}") from exc

    async def arun(
        self, parsed: BaseModel, context: ToolContext
    ) -> JsonValue | ToolFailure | Suspend:
        """Execute the tool; sync callables run in a worker thread to keep the loop free.

        A returned :class:`ToolFailure` or :class:`Suspend` is passed on as is (the engine
        makes it the call's error, or a pending action); any other value is the output,
        serialized."""
        if self.execute is None:
            raise ToolError(f"Tool {self.name} has no server-side execute")
        args: tuple[Any, ...] = (parsed, context) if self._pass_context else (parsed,)
        if inspect.iscoroutinefunction(self.execute):
            result = await self.execute(*args)
        else:
            result = await run_sync(self.execute, *args)
            if inspect.isawaitable(result):
                result = await result
        if isinstance(result, ToolFailure | Suspend):
            return result
        return self.serialize_output(result)

    def serialize_output(self, result: Any) -> JsonValue:
        """The output as stored: parsed by the output model and dumped, which must be a
        fixed point of the schema (MF-046: parsing the stored value again gives it back)."""
        if self.output_model is not None and not isinstance(result, BaseModel):
            result = self.output_model.model_validate(result)
        if isinstance(result, BaseModel):
            model = self.output_model or type(result)
            try:
                result = _fixed_point(model, result)
            except ValidationError as exc:
                raise ToolError(f"output of tool {self.name} does not parse again: {exc}") from exc
            if result is None:
                raise ToolError(
                    f"output of tool {self.name} changes when parsed again: not a fixed point "
                    "of its output schema (MF-046)"
                )
        try:
            return ensure_strict_json(result, what=f"output of tool {self.name}")
        except NotStrictJson as exc:
            raise ToolError(str(exc)) from exc


def _fixed_point(model: type[BaseModel], parsed: BaseModel) -> Any:
    """``parsed`` dumped as JSON if that dump parses back to itself, else None (MF-046);
    ``ValidationError`` when the dump is not even valid input."""
    dumped = parsed.model_dump(mode="json")
    again = model.model_validate(copy.deepcopy(dumped)).model_dump(mode="json")
    return dumped if again == dumped else None


@overload
def tool(
    name: str,
    *,
    input: type[BaseModel],
    execute: Execute | None = None,
    description: str = "",
    output: type[BaseModel] | None = None,
    needs_approval: bool = False,
    idempotent: bool = False,
    capabilities: Mapping[str, Capability] | None = None,
    suspends: Mapping[str, type[BaseModel]] | None = None,
) -> Tool: ...


@overload
def tool(
    name: None = None,
    *,
    input: type[BaseModel],
    execute: None = None,
    description: str = "",
    output: type[BaseModel] | None = None,
    needs_approval: bool = False,
    idempotent: bool = False,
    capabilities: Mapping[str, Capability] | None = None,
    suspends: Mapping[str, type[BaseModel]] | None = None,
) -> Callable[[Execute], Tool]: ...


def tool(
    name: str | None = None,
    *,
    input: type[BaseModel],
    execute: Execute | None = None,
    description: str = "",
    output: type[BaseModel] | None = None,
    needs_approval: bool = False,
    idempotent: bool = False,
    capabilities: Mapping[str, Capability] | None = None,
    suspends: Mapping[str, type[BaseModel]] | None = None,
) -> Tool | Callable[[Execute], Tool]:
    """Define a tool.

    Either call it with a name (``tool("clock", input=ClockInput, execute=now)``; omit
    ``execute`` for a client-fulfilled tool) or use it as a decorator, where the function's
    name and docstring become the tool's name and description::

        @tool(input=AddInput)
        def add(args: AddInput) -> int:
            '''Add two numbers.'''
            return args.a + args.b

    ``execute`` takes the validated input model and, optionally, a :class:`ToolContext`;
    it may be ``def`` or ``async def``. ``needs_approval`` turns each call into a pending
    action a person approves or denies; ``idempotent`` allows re-execution after a crash.
    ``capabilities`` maps local aliases to :func:`~pai_agents.capabilities.capability`
    declarations the project binds; the tool reads them as ``ctx.capabilities[alias]``.
    ``suspends`` maps suspension names to the pydantic models of their answers: ``execute``
    returns ``ctx.suspend(name, payload=...)`` to wait for a person (docs/suspensions.md).
    """

    def build(fn: Execute | None, tool_name: str, doc: str) -> Tool:
        return Tool(
            name=tool_name,
            description=description or doc,
            input_model=input,
            output_model=output,
            execute=fn,
            needs_approval=needs_approval,
            idempotent=idempotent,
            capabilities=dict(capabilities or {}),
            suspends=dict(suspends or {}),
            _pass_context=fn is not None and _accepts_context(fn),
        )

    if name is not None:
        return build(execute, name, "")

    def decorator(fn: Execute) -> Tool:
        return build(fn, fn.__name__, inspect.cleandoc(fn.__doc__ or ""))

    return decorator

"""How an agent reaches an MCP server: :class:`MCPServer` and the per-server tool options.

A server is a frozen value on the agent definition (docs/mcp.md); nothing connects until a
run starts. Secrets belong in ``headers`` / ``env`` callables, read per run, so the
definition itself never holds them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from pai_agents.behavior import AgentBehaviorInput

__all__ = [
    "MCPError",
    "MCPServer",
    "MCPServerUnavailable",
    "MCPToolConflict",
    "StringMap",
    "ToolSelection",
]

StringMap: TypeAlias = "Mapping[str, str] | Callable[[AgentBehaviorInput], Mapping[str, str]]"
ToolSelection: TypeAlias = "bool | frozenset[str]"

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


class MCPError(Exception):
    """Base of the MCP errors a run can fail with (kept private on the run)."""


class MCPServerUnavailable(MCPError):
    """A required server could not be started or reached, or did not list its tools."""


class MCPToolConflict(MCPError):
    """Two tools of one run would have the same name (a prefix resolves it)."""


@dataclass(frozen=True, kw_only=True)
class MCPServer:
    """One MCP server an agent uses; build it with :meth:`stdio` or :meth:`http`."""

    name: str
    transport: Literal["stdio", "http"]
    command: str = ""
    args: tuple[str, ...] = ()
    env: StringMap | None = field(default=None, repr=False)
    cwd: str | None = None
    url: str = ""
    headers: StringMap | None = field(default=None, repr=False)
    prefix: str = ""
    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    needs_approval: ToolSelection = False
    idempotent: ToolSelection = False
    connect_timeout: float = 10.0
    call_timeout: float | None = 60.0
    optional: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"MCP server name {self.name!r} must be letters, digits, '_' or '-'")
        what = f"MCP server {self.name!r}"
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"{what}: a stdio server needs a command")
        if self.transport == "http" and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"{what}: url must be an http:// or https:// URL")
        if self.transport not in ("stdio", "http"):
            raise ValueError(f"{what}: transport must be 'stdio' or 'http'")
        if self.prefix and not _NAME.match(self.prefix):
            raise ValueError(f"{what}: prefix must be letters, digits, '_' or '-'")
        if not self.connect_timeout > 0 or (
            self.call_timeout is not None and not self.call_timeout > 0
        ):
            raise ValueError(f"{what}: timeouts must be positive")
        for label, value in (("env", self.env), ("headers", self.headers)):
            if value is not None and not (callable(value) or isinstance(value, Mapping)):
                raise TypeError(f"{what}: {label} must be a mapping or a callable")

    @classmethod
    def stdio(
        cls,
        name: str,
        *,
        command: str,
        args: Sequence[str] = (),
        env: StringMap | None = None,
        cwd: str | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server started as a subprocess per run episode, spoken to over stdin/stdout.

        ``options``: ``prefix``, ``allow``, ``deny``, ``needs_approval``, ``idempotent``,
        ``connect_timeout``, ``call_timeout``, ``optional`` (docs/mcp.md)."""
        return cls(
            name=name,
            transport="stdio",
            command=command,
            args=tuple(args),
            env=env,
            cwd=cwd,
            **_options(options),
        )

    @classmethod
    def http(
        cls, name: str, *, url: str, headers: StringMap | None = None, **options: Any
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (one session per run episode)."""
        return cls(name=name, transport="http", url=url, headers=headers, **_options(options))

    def keeps(self, remote_name: str) -> bool:
        """Whether the allow/deny lists keep the tool the server lists as ``remote_name``."""
        if remote_name in self.deny:
            return False
        return self.allow is None or remote_name in self.allow

    def tool_name(self, remote_name: str) -> str:
        """The name the model sees: the prefix, then the listed name with characters a tool
        name cannot hold replaced by ``_``."""
        return self.prefix + _INVALID.sub("_", remote_name)

    def approval_for(self, remote_name: str) -> bool:
        return _selected(self.needs_approval, remote_name)

    def idempotent_for(self, remote_name: str) -> bool:
        return _selected(self.idempotent, remote_name)


def _selected(selection: ToolSelection, remote_name: str) -> bool:
    if isinstance(selection, bool):
        return selection
    return remote_name in selection


def _names(value: Any, label: str) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"MCP server option {label} must be a set of tool names")
    names = frozenset(value)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"MCP server option {label} must be a set of tool names")
    return names


_OPTIONS = frozenset(
    {
        "prefix",
        "allow",
        "deny",
        "needs_approval",
        "idempotent",
        "connect_timeout",
        "call_timeout",
        "optional",
    }
)


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The per-server options, sets normalized to frozensets; unknown ones are a TypeError."""
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise TypeError(f"unknown MCP server option(s): {', '.join(unknown)}")
    result = dict(options)
    if result.get("allow") is not None:
        result["allow"] = _names(result["allow"], "allow")
    if "deny" in result:
        result["deny"] = _names(result["deny"], "deny")
    for key in ("needs_approval", "idempotent"):
        if key in result and not isinstance(result[key], bool):
            result[key] = _names(result[key], key)
    return result

"""Sessions with MCP servers for one run episode, and the tools they list.

Each server's session is owned by its own task: the SDK's transports run anyio task groups,
and a server that dies mid-episode must break that session's calls (a model-visible error),
never cancel the run's task. :func:`episode_tools` opens every server of an agent, lists
and converts their tools, and closes the sessions when the episode ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from pai_agents._callables import call_user
from pai_agents.mcp.config import MCPServer, MCPServerUnavailable, MCPToolConflict
from pai_agents.mcp.tools import MCPTool, build_tool
from pai_agents.tools import Tool, ToolError

if TYPE_CHECKING:
    from pai_agents.behavior import AgentBehaviorInput

__all__ = ["MCPSession", "episode_tools", "sdk_missing"]

logger = logging.getLogger("pai.mcp")

_MAX_PAGES = 100
_CLOSE_SECONDS = 5.0


def sdk_missing() -> str | None:
    """Why MCP servers cannot be used here (the SDK is not installed), else None."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        return (
            'MCP servers need the official SDK: install the "mcp" extra (pip install "mcp>=2.3,<3")'
        )
    return None


class MCPSession:
    """One open session with one server, owned by a background task."""

    def __init__(self, server: MCPServer, *, env: Mapping[str, str], headers: Mapping[str, str]):
        self.server = server
        self._env = dict(env)
        self._headers = dict(headers)
        self._session: Any = None
        self._ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> list[Any]:
        """Start the session and list the server's tools (every page); raises
        :class:`MCPServerUnavailable` when that fails or takes over ``connect_timeout``."""
        self._task = asyncio.create_task(self._own(), name=f"pai-mcp-{self.server.name}")
        try:
            return await asyncio.wait_for(
                asyncio.shield(self._ready), timeout=self.server.connect_timeout
            )
        except TimeoutError:
            await self.close()
            raise MCPServerUnavailable(
                f"MCP server {self.server.name!r} did not list its tools within "
                f"{self.server.connect_timeout:g} s"
            ) from None
        except MCPServerUnavailable:
            await self.close()
            raise

    async def call(self, remote_name: str, arguments: dict[str, Any]) -> Any:
        """Call one tool; protocol errors, timeouts and a broken session raise
        :class:`ToolError` (model-visible), their details going to the log."""
        from mcp.shared.exceptions import MCPError as SDKError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        name, server = remote_name, self.server
        try:
            return await self._session.call_tool(
                remote_name, arguments, read_timeout_seconds=server.call_timeout
            )
        except SDKError as exc:
            code = _code(exc)
            if code == REQUEST_TIMEOUT:
                raise ToolError(
                    f"MCP tool {name} did not answer within {server.call_timeout:g} s."
                ) from exc
            if code == CONNECTION_CLOSED:
                raise ToolError(
                    f"MCP server {server.name} closed the connection during the call to {name}."
                ) from exc
            message = str(getattr(exc.error, "message", "") or type(exc).__name__)[:500]
            raise ToolError(
                f"MCP server {server.name} rejected the call to {name}: {message}"
            ) from exc
        except (asyncio.CancelledError, ToolError):
            raise
        except Exception as exc:
            logger.warning(
                "MCP call %s on %s failed", name, server.name, exc_info=True, extra={"tool": name}
            )
            raise ToolError(
                f"MCP server {server.name} failed during the call to {name} ({type(exc).__name__})."
            ) from exc

    async def close(self) -> None:
        """End the session (stop the stdio process, terminate the HTTP session)."""
        self._closing.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=_CLOSE_SECONDS)
        except (TimeoutError, Exception):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _own(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                self._session = await self._connect(stack)
                await self._session.initialize()
                listed = await self._list()
                self._ready.set_result(listed)
                await self._closing.wait()
        except BaseException as exc:  # the owner task: nothing above it to tell
            if not self._ready.done():
                self._ready.set_exception(
                    MCPServerUnavailable(
                        f"MCP server {self.server.name!r} is unavailable: {_describe(exc)}"
                    )
                )
            elif not self._closing.is_set():
                logger.warning("MCP session %s ended: %s", self.server.name, _describe(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _connect(self, stack: AsyncExitStack) -> Any:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        server = self.server
        if server.transport == "stdio":
            params = StdioServerParameters(
                command=server.command, args=list(server.args), env=self._env, cwd=server.cwd
            )
            # The server's stderr is the worker's: its own errors reach the operator's log.
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=self._headers,
                    timeout=httpx2.Timeout(server.connect_timeout, read=300),
                )
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(server.url, http_client=client)
            )
        return await stack.enter_async_context(ClientSession(read, write))

    async def _list(self) -> list[Any]:
        from mcp_types import PaginatedRequestParams

        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools


@contextlib.asynccontextmanager
async def episode_tools(
    servers: Sequence[MCPServer], behavior: AgentBehaviorInput, *, taken: Mapping[str, Tool]
) -> AsyncIterator[dict[str, MCPTool]]:
    """Open every server's session, list and convert their tools, and close the sessions
    on exit. ``taken``: the agent's own tools, whose names a listed tool must not reuse.

    Raises :class:`MCPServerUnavailable` for a required server that cannot be reached and
    :class:`MCPToolConflict` for a name two tools would share."""
    sessions: list[MCPSession] = []
    try:
        opened = await asyncio.gather(
            *(_open(server, behavior, sessions) for server in servers), return_exceptions=True
        )
        tools: dict[str, MCPTool] = {}
        for server, result in zip(servers, opened, strict=True):
            if isinstance(result, MCPServerUnavailable) and server.optional:
                logger.warning("optional %s; the run goes on without its tools", result)
                continue
            if isinstance(result, BaseException):
                raise result
            session, listed = result
            for item in listed:
                if not server.keeps(str(item.name)):
                    continue
                tool = _convert(server, item, session)
                if tool.name in taken or tool.name in tools:
                    raise MCPToolConflict(
                        f"MCP server {server.name!r} lists a tool named {tool.name!r}, which "
                        "the run already has; give the server a prefix"
                    )
                tools[tool.name] = tool
        yield tools
    finally:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


async def _open(
    server: MCPServer, behavior: AgentBehaviorInput, sessions: list[MCPSession]
) -> tuple[MCPSession, list[Any]]:
    env = await _strings(server.env, behavior, "env", server)
    headers = await _strings(server.headers, behavior, "headers", server)
    session = MCPSession(server, env=env, headers=headers)
    sessions.append(session)
    return session, await session.open()


def _convert(server: MCPServer, item: Any, session: MCPSession) -> MCPTool:
    try:
        return build_tool(server, item, session.call)
    except (ValueError, TypeError) as exc:
        raise MCPServerUnavailable(
            f"MCP server {server.name!r} listed tool {item.name!r} that cannot be used: {exc}"
        ) from exc


async def _strings(
    value: Any, behavior: AgentBehaviorInput, label: str, server: MCPServer
) -> dict[str, str]:
    """``env`` / ``headers``: a mapping, or a callable of the run, as a dict of strings."""
    if value is None:
        return {}
    if callable(value):
        value = await call_user(value, behavior)
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise MCPServerUnavailable(
            f"MCP server {server.name!r}: {label} must give a mapping of strings to strings"
        )
    return dict(value)


def _code(exc: Any) -> Any:
    """The JSON-RPC error code of an SDK error (the SDK's own codes included)."""
    return getattr(getattr(exc, "error", None), "code", None)


def _describe(exc: BaseException) -> str:
    """A short account of why a session failed (an exception group's first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__

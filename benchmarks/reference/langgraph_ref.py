"""PAI's W1, W2 and W3 on LangGraph 1.x: the reference issue 16's time targets compare against.

    .venv-ref-langgraph/bin/python -m benchmarks.reference.langgraph_ref \\
        --db postgresql --url postgresql://.../ref_langgraph --json OUT [--quick]

(:mod:`benchmarks.reference.runner` creates the virtualenv and runs this, round by round.)

The graph is the canonical ReAct loop: ``StateGraph`` over ``MessagesState``, a model node,
LangGraph's prebuilt ``ToolNode`` and ``tools_condition``, compiled with the checkpointer of
the database: ``AsyncPostgresSaver`` on a psycopg pool (autocommit, as documented) or
``AsyncSqliteSaver`` (aiosqlite; its ``setup`` turns on WAL mode, as PAI's SQLite runs).
Runs use the async API (``graph.astream``, ``stream_mode="messages"``: token streaming) on
one event loop, as PAI's ``aexecute_run`` is driven, with ``durability="sync"``: every step
is checkpointed before the next starts, PAI's per-step durability. The model is a
zero-latency ``BaseChatModel`` (tool call first, then 100 chunks of 4 characters).

W2's thread is one checkpoint holding N messages (``aupdate_state``); every measured run
forks from that checkpoint (its ``checkpoint_id`` in the config), so each sees exactly N.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from benchmarks.reference.protocol import DELTA, DELTAS, INSTRUCTIONS, PRIOR_TEXT, USER_TEXT, main

__all__ = ["LangGraphReference"]

POOL_SIZE = 10


def _graph(checkpointer: Any, *, calls_tool: bool) -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, SystemMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.tools import StructuredTool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    class ScriptedModel(BaseChatModel):
        """Stateless, as PAI's bench models: a tool result last (or no tool) means answer."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        @staticmethod
        def _answers(messages: list[Any]) -> bool:
            return not calls_tool or isinstance(messages[-1], ToolMessage)

        @staticmethod
        def _call() -> AIMessageChunk:
            chunk = {"name": "lookup", "args": '{"q": "x"}', "id": f"call_{uuid.uuid4().hex[:12]}"}
            return AIMessageChunk(content="", tool_call_chunks=[{**chunk, "index": 0}])

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            if self._answers(messages):
                message = AIMessage(content=DELTA * DELTAS)
            else:
                message = AIMessage(content="", tool_calls=self._call().tool_calls)
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _stream(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Iterator[ChatGenerationChunk]:
            if not self._answers(messages):
                yield ChatGenerationChunk(message=self._call())
                return
            for _ in range(DELTAS):
                yield ChatGenerationChunk(message=AIMessageChunk(content=DELTA))

        async def _astream(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> AsyncIterator[ChatGenerationChunk]:
            for chunk in self._stream(messages):
                yield chunk

    async def lookup(q: str) -> dict[str, int]:
        """Look something up."""
        return {"answer": 42}

    tool = StructuredTool.from_function(coroutine=lookup, name="lookup")
    model = ScriptedModel().bind_tools([tool])
    system = SystemMessage(content=INSTRUCTIONS)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke([system, *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    if calls_tool:
        builder.add_node("tools", ToolNode([tool]))
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


class LangGraphReference:
    name = "langgraph"
    tables: tuple[str, ...] = (
        "checkpoints",
        "checkpoint_blobs",
        "checkpoint_writes",
        "checkpoint_migrations",
    )

    def __init__(self) -> None:
        self.saver: Any = None
        self.closers: list[Any] = []
        self.w1_threads: list[str] = []
        self.checked: set[str] = set()

    async def open(self, db: str, url: str) -> None:
        if db == "postgresql":
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
            pool = AsyncConnectionPool(url, max_size=POOL_SIZE, kwargs=kwargs, open=False)
            await pool.open()
            self.closers.append(pool.close)
            self.saver = AsyncPostgresSaver(pool)
        else:
            import aiosqlite
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            conn = await aiosqlite.connect(url)
            # PAI's SQLite setting (no fsync per commit): the same durability for both.
            await conn.execute("PRAGMA synchronous=NORMAL")
            self.closers.append(conn.close)
            self.saver = AsyncSqliteSaver(conn)
        await self.saver.setup()
        self.tool_graph = _graph(self.saver, calls_tool=True)
        self.text_graph = _graph(self.saver, calls_tool=False)

    async def close(self) -> None:
        try:
            for thread_id in self.w1_threads[-5:]:
                await self._check_w1(thread_id)
        finally:
            for close in reversed(self.closers):
                await close()

    async def _stream(self, graph: Any, config: dict[str, Any]) -> None:
        from langchain_core.messages import HumanMessage

        tokens = []
        inputs = {"messages": [HumanMessage(content=USER_TEXT)]}
        async for chunk, meta in graph.astream(
            inputs, config, stream_mode="messages", durability="sync"
        ):
            if meta.get("langgraph_node") == "agent" and chunk.content:
                tokens.append(chunk.content)
        if len(tokens) != DELTAS or any(t != DELTA for t in tokens):
            raise RuntimeError(f"LangGraph run streamed {len(tokens)} chunks, want {DELTAS}")

    async def thread(self) -> str:
        return str(uuid.uuid4())

    async def w1(self, thread_id: str) -> None:
        await self._stream(self.tool_graph, {"configurable": {"thread_id": thread_id}})
        self.w1_threads.append(thread_id)

    async def _check_w1(self, thread_id: str) -> None:
        """Checkpointed to the end: user, tool call, tool result, answer; step 3 last."""
        tup = await self.saver.aget_tuple({"configurable": {"thread_id": thread_id}})
        messages = tup.checkpoint["channel_values"].get("messages", []) if tup else []
        if len(messages) != 4 or messages[-1].content != DELTA * DELTAS:
            raise RuntimeError(f"LangGraph thread {thread_id}: {len(messages)} messages stored")

    async def prefill(self, messages: int) -> dict[str, Any]:
        from langchain_core.messages import AIMessage, HumanMessage

        thread_id = str(uuid.uuid4())
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        if not messages:
            return {"thread_id": None, "prior": 0}
        history = [
            (HumanMessage if i % 2 == 0 else AIMessage)(content=PRIOR_TEXT) for i in range(messages)
        ]
        stored = await self.text_graph.aupdate_state(config, {"messages": history}, as_node="agent")
        return {"config": stored, "prior": messages, "thread_id": thread_id}

    async def w2(self, thread: dict[str, Any]) -> None:
        if thread["thread_id"] is None:  # the baseline: a new thread each run
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        else:
            config = thread["config"]
        await self._stream(self.text_graph, config)

    async def undo(self, thread: dict[str, Any]) -> None:
        """Nothing to undo (the next run forks from the same checkpoint); checked once."""
        thread_id = thread["thread_id"]
        if thread_id is None or thread_id in self.checked:
            return
        state = await self.text_graph.aget_state({"configurable": {"thread_id": thread_id}})
        if len(state.values["messages"]) != thread["prior"] + 2:
            raise RuntimeError(f"LangGraph W2 fork saw {len(state.values['messages'])} messages")
        self.checked.add(thread_id)

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        names = (
            "langgraph",
            "langgraph-checkpoint",
            "langgraph-checkpoint-postgres",
            "langgraph-checkpoint-sqlite",
            "langchain-core",
            "psycopg",
            "aiosqlite",
        )
        return {n: version(n) for n in names}


if __name__ == "__main__":
    sys.exit(main(LangGraphReference()))

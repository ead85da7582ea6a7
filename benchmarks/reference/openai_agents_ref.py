"""PAI's W1, W2 and W3 on the OpenAI Agents SDK, with its sessions as the durable history.

    .venv-ref-openai-agents/bin/python -m benchmarks.reference.openai_agents_ref \\
        --db sqlite --url /tmp/oa.sqlite3 --json OUT [--quick]

(:mod:`benchmarks.reference.runner` creates the virtualenv and runs this, round by round.)

An ``Agent`` with one function tool (``lookup``) and a zero-latency ``Model`` that streams
Responses events: step 1 a ``function_call`` of ``lookup(q="x")``, step 2 100
``response.output_text.delta`` events of 4 characters, each step ending with
``response.completed``. The run is ``Runner.run_streamed(agent, text, session=...)``
consumed through ``stream_events()`` on one event loop, tracing off. The history lives in
the SDK's session: ``SQLAlchemySession`` on PostgreSQL (an async engine on psycopg, tables
created once) and ``SQLiteSession`` on SQLite (the documented pairing), one session per
thread. The SDK writes the session when it saves a turn's items; it has no per-step
checkpoint of the run itself (what the commit counts show).

W2's thread is a session holding N items (user messages and assistant answers of ~200
characters); after each measured run the two items it added are popped again (unmeasured).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

from benchmarks.reference.protocol import DELTA, DELTAS, INSTRUCTIONS, PRIOR_TEXT, USER_TEXT, main

__all__ = ["OpenAIAgentsReference"]


def _model(*, calls_tool: bool) -> Any:
    from agents.models.interface import Model
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseTextDeltaEvent,
    )

    def completed(output: list[Any], seq: int) -> Any:
        response = Response.model_construct(
            id=f"resp_{uuid.uuid4().hex[:12]}",
            object="response",
            created_at=0.0,
            model="scripted",
            output=output,
            usage=None,
            tools=[],
            tool_choice="auto",
            parallel_tool_calls=False,
        )
        return ResponseCompletedEvent.model_construct(
            type="response.completed", response=response, sequence_number=seq
        )

    class ScriptedModel(Model):
        """Stateless, as PAI's bench models: a tool output last (or no tool) means answer."""

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark streams")

        async def stream_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> AsyncIterator[Any]:
            last = input[-1] if isinstance(input, list) and input else {}
            if calls_tool and last.get("type") != "function_call_output":
                call = ResponseFunctionToolCall.model_construct(
                    type="function_call",
                    id=f"fc_{uuid.uuid4().hex[:12]}",
                    call_id=f"call_{uuid.uuid4().hex[:12]}",
                    name="lookup",
                    arguments='{"q": "x"}',
                    status="completed",
                )
                yield completed([call], 0)
                return
            item_id = f"msg_{uuid.uuid4().hex[:12]}"
            for seq in range(DELTAS):
                yield ResponseTextDeltaEvent.model_construct(
                    type="response.output_text.delta",
                    item_id=item_id,
                    output_index=0,
                    content_index=0,
                    delta=DELTA,
                    logprobs=[],
                    sequence_number=seq,
                )
            text = ResponseOutputText.model_construct(
                type="output_text", text=DELTA * DELTAS, annotations=[], logprobs=[]
            )
            message = ResponseOutputMessage.model_construct(
                id=item_id, type="message", role="assistant", status="completed", content=[text]
            )
            yield completed([message], DELTAS)

    return ScriptedModel()


def _agents() -> tuple[Any, Any]:
    from agents import Agent, function_tool

    @function_tool
    async def lookup(q: str) -> dict[str, int]:
        """Look something up."""
        return {"answer": 42}

    tool_agent = Agent(
        name="bench_w1", instructions=INSTRUCTIONS, model=_model(calls_tool=True), tools=[lookup]
    )
    text_agent = Agent(name="bench_w2", instructions=INSTRUCTIONS, model=_model(calls_tool=False))
    return tool_agent, text_agent


def _async_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


class OpenAIAgentsReference:
    name = "openai_agents"
    tables: tuple[str, ...] = ("agent_sessions", "agent_messages")

    def __init__(self) -> None:
        self.engine: Any = None
        self.path = ""
        self.sessions: list[Any] = []

    async def open(self, db: str, url: str) -> None:
        from agents import set_tracing_disabled

        set_tracing_disabled(True)
        self.tool_agent, self.text_agent = _agents()
        if db == "postgresql":
            from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
            from sqlalchemy.ext.asyncio import create_async_engine

            self.engine = create_async_engine(_async_url(url))
            first = SQLAlchemySession("setup", engine=self.engine, create_tables=True)
            await first.get_items()  # creates the tables, once (not per thread)
        else:
            self.path = url

    async def close(self) -> None:
        for session in self.sessions:
            closing = session.close()
            if closing is not None:
                await closing
        if self.engine is not None:
            await self.engine.dispose()

    async def thread(self) -> Any:
        session_id = f"thread_{uuid.uuid4().hex}"
        if self.engine is not None:
            from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

            session: Any = SQLAlchemySession(session_id, engine=self.engine)
        else:
            from agents import SQLiteSession

            session = SQLiteSession(session_id, db_path=self.path)
            self.sessions.append(session)
        return session

    async def _stream(self, agent: Any, session: Any) -> None:
        from agents import Runner

        result = Runner.run_streamed(agent, USER_TEXT, session=session)
        tokens = [
            event.data.delta
            async for event in result.stream_events()
            if event.type == "raw_response_event"
            and event.data.type == "response.output_text.delta"
        ]
        if len(tokens) != DELTAS or result.final_output != DELTA * DELTAS:
            raise RuntimeError(f"OpenAI Agents run streamed {len(tokens)} deltas, want {DELTAS}")

    async def w1(self, session: Any) -> None:
        await self._stream(self.tool_agent, session)

    async def prefill(self, messages: int) -> dict[str, Any]:
        session = await self.thread()
        items: list[Any] = []
        for i in range(messages):
            if i % 2 == 0:
                items.append({"role": "user", "content": PRIOR_TEXT})
            else:
                text = {"type": "output_text", "text": PRIOR_TEXT, "annotations": []}
                items.append(
                    {
                        "id": f"msg_{uuid.uuid4().hex[:12]}",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [text],
                    }
                )
        for start in range(0, len(items), 1000):
            await session.add_items(items[start : start + 1000])
        return {"session": session, "prior": messages, "checked": False}

    async def w2(self, thread: dict[str, Any]) -> None:
        await self._stream(self.text_agent, thread["session"])

    async def undo(self, thread: dict[str, Any]) -> None:
        session = thread["session"]
        for _ in range(2):  # the user input and the answer
            await session.pop_item()
        if not thread["checked"]:
            count = len(await session.get_items())
            if count != thread["prior"]:
                raise RuntimeError(
                    f"OpenAI Agents W2 session holds {count}, want {thread['prior']}"
                )
            thread["checked"] = True

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        names = ("openai-agents", "openai", "SQLAlchemy", "psycopg")
        return {n: version(n) for n in names}


if __name__ == "__main__":
    sys.exit(main(OpenAIAgentsReference()))

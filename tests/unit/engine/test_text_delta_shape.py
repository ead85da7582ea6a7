"""LC-104: the canonical ``text-delta`` keeps its fragment in ``delta`` (a documented
deviation, docs/lifecycle.md); a part yielded in the seeds' shape (``text``) is accepted."""

from __future__ import annotations

from typing import Any

from pai_agents import ScriptedStep
from tests.support.engine_harness import harness, text_of


async def test_lc_104_text_delta_carries_delta_and_the_seed_shape_is_accepted() -> None:
    """LC-104: hooks read ``delta``; yielding ``text`` instead (the seeds' shape) streams
    and stores the same text."""
    seen: list[dict[str, Any]] = []

    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                seen.append(dict(part))
                if part["type"] == "text-delta":
                    yield {"type": "text-delta", "id": part["id"], "text": part["delta"].upper()}
                else:
                    yield part

        return stream()

    h = harness([ScriptedStep.reply("hello there")], parts=[{"transform_step_stream": transform}])
    assert (await h.run()).status == "completed"
    deltas = [p for p in seen if p["type"] == "text-delta"]
    assert deltas and all("delta" in p and "text" not in p for p in deltas)
    [message] = h.assistant()
    assert text_of(message) == "HELLO THERE"
    published = [c for c in h.sink.chunks(message["id"]) if c["type"] == "text-delta"]
    assert "".join(c["delta"] for c in published) == "HELLO THERE"

"""A Python fold of the thread websocket protocol: what ``static/pai/client.js`` does.

Tests feed it every frame a client received and compare the resulting state with the
database, or with another client's state.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pai_agents.messages.chunks import validate_chunk
from pai_agents.messages.reducer import MessageReducer
from pai_agents.messages.tool_data import project_tool_data, tool_data_chunk

__all__ = ["ThreadState", "normalise_ids", "unproject_tool_data"]


class ThreadState:
    def __init__(self) -> None:
        self.thread: dict[str, Any] | None = None
        self.messages: list[dict[str, Any]] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self.seq: int | None = None
        self.reducers: dict[str, MessageReducer] = {}
        self.next_index: dict[str, int] = {}
        self.frames: list[dict[str, Any]] = []

    def _find(self, message_id: str) -> int | None:
        for index, message in enumerate(self.messages):
            if message["id"] == message_id:
                return index
        return None

    def _upsert(self, message: dict[str, Any]) -> None:
        index = self._find(message["id"])
        if index is not None:
            self.messages[index] = message
            return
        pai = message.get("metadata", {}).get("pai", {})
        if pai.get("relation") == "input" and pai.get("runId"):
            for position, other in enumerate(self.messages):
                other_pai = other.get("metadata", {}).get("pai", {})
                if other_pai.get("runId") == pai["runId"] and other["role"] == "assistant":
                    self.messages.insert(position, message)
                    return
        self.messages.append(message)

    def apply(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        kind = frame["type"]
        if "seq" in frame and kind not in ("snapshot", "synced"):
            assert self.seq is None or frame["seq"] > self.seq, (self.seq, frame)
            self.seq = frame["seq"]
        if kind == "snapshot":
            state = frame["state"]
            self.thread = state["thread"]
            self.messages = copy.deepcopy(state["messages"])
            self.runs = {run["id"]: run for run in state["runs"]}
            self.reducers.clear()
            self.seq = frame["seq"]
        elif kind == "synced":
            self.seq = frame["seq"]
        elif kind == "generation.started":
            message_id = frame["messageId"]
            # A new generation of the same run abandons an unfinished one (a crashed attempt).
            self.messages = [
                m
                for m in self.messages
                if not (
                    m["id"] != message_id
                    and m["id"] in self.reducers
                    and m["metadata"]["pai"].get("runId") == frame["runId"]
                )
            ]
            # As client.js: a continued generation (results joining a committed message,
            # e.g. a recovered run settling its interrupted tool call) folds onto it.
            found = self._find(message_id) if frame.get("continued") else None
            existing = self.messages[found] if found is not None else None
            shell = existing or {
                "id": message_id,
                "role": "assistant",
                "metadata": {"pai": {"status": "open", "runId": frame["runId"]}},
                "parts": [],
            }
            seed = unproject_tool_data(existing)["parts"] if existing else []
            self.reducers[message_id] = MessageReducer(
                {"id": message_id, "role": "assistant", "parts": copy.deepcopy(seed)}
            )
            self.next_index[message_id] = 0
            self._upsert(shell)
        elif kind == "generation.message.chunk":
            message_id = frame["messageId"]
            assert frame["index"] == self.next_index[message_id], (frame, self.next_index)
            self.next_index[message_id] += 1
            reducer = self.reducers[message_id]
            reducer.apply(validate_chunk(frame["chunk"]))
            index = self._find(message_id)
            assert index is not None
            # As client.js: ToolData joined onto its tool parts (MF-012, MF-019); the Python
            # reducer drops transient records, which client.js shows as live overlays.
            self.messages[index] = project_tool_data(
                {**self.messages[index], "parts": copy.deepcopy(reducer.message["parts"])}
            )
        elif kind == "generation.finished":
            self.reducers.pop(frame["messageId"], None)
            self._upsert(frame["message"])
        elif kind == "message.committed":
            self._upsert(frame["message"])
        elif kind == "run.status":
            self.runs[frame["runId"]] = frame.get("run") or {
                **self.runs.get(frame["runId"], {}),
                "status": frame["status"],
            }
        elif kind == "thread.updated":
            self.thread = frame["thread"]

    def transcript(self) -> list[dict[str, Any]]:
        """Messages without timestamps (which differ between a live fold and a re-read)."""
        out = []
        for message in self.messages:
            message = copy.deepcopy(message)
            pai = message.get("metadata", {}).get("pai", {})
            pai.pop("createdAt", None)
            pai.pop("updatedAt", None)
            out.append(message)
        return out


def unproject_tool_data(message: dict[str, Any]) -> dict[str, Any]:
    """The stored form of a projected message: each tool part's ``data`` back as reserved
    ToolData parts at the end (client.js's ``unprojectToolData``)."""
    parts: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for part in message.get("parts") or []:
        data = part.get("data")
        if not part.get("toolCallId") or not isinstance(data, dict):
            parts.append(part)
            continue
        parts.append({key: value for key, value in part.items() if key != "data"})
        for channel, entries in data.items():
            for entry in entries:
                if entry.get("transient"):
                    continue
                records.append(
                    tool_data_chunk(
                        part["toolCallId"], channel, entry["id"], copy.deepcopy(entry["value"])
                    )
                )
    return {**message, "parts": [*parts, *records]}


def normalise_ids(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replace per-run ids (message, text, reasoning, tool call ids) by stable placeholders."""
    names: dict[str, str] = {}
    keys = ("messageId", "id", "toolCallId")

    def rename(value: str) -> str:
        return names.setdefault(value, f"<id{len(names)}>")

    out = []
    for chunk in chunks:
        chunk = json.loads(json.dumps(chunk))
        for key in keys:
            if isinstance(chunk.get(key), str):
                chunk[key] = rename(chunk[key])
        out.append(chunk)
    return out

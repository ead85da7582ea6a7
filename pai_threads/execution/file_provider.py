"""The default file provider: PAI-managed files from Django's default storage, inlined.

Each reference becomes one AI SDK ``file`` part whose data is a ``data:`` URL of the stored
bytes (images, text and documents alike); the model provider decides how to send it (see
``pai_agents/models/openai_files.py``). Nothing is written back: the stored message keeps
its reference (MF-039, MF-040). One instance serves one run, and caches what it read, since
files are immutable and every step of the run sends the same context again.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from django.core.files.storage import default_storage

from pai_agents.files import FileProvider, FileRef
from pai_threads.conf import pai_settings
from pai_threads.models import File
from pai_threads.store.db import run_db

__all__ = ["StorageFileProvider", "file_provider"]

logger = logging.getLogger("pai.files")


def _unavailable(ref: FileRef) -> list[dict[str, Any]]:
    """What the model sees for a file that is gone: a note, not a failed run."""
    name = ref.filename or ref.file_id
    return [{"type": "text", "text": f"[Attachment {name!r} is no longer available.]"}]


class StorageFileProvider:
    """Expands a reference of the run's partition into a ``file`` part with a data URL."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], list[dict[str, Any]]] = {}

    async def expand(self, ref: FileRef) -> list[dict[str, Any]]:
        key = (ref.scope_key, ref.file_id)
        if key not in self._cache:
            self._cache[key] = await run_db(self.expand_sync, ref)
        return self._cache[key]

    def expand_sync(self, ref: FileRef) -> list[dict[str, Any]]:
        row = File.objects.filter(id=ref.file_id, scope_key=ref.scope_key).first()
        if row is None or (row.thread_id is not None and row.thread_id != ref.thread_id):
            logger.warning("file %s not found for thread %s", ref.file_id, ref.thread_id)
            return _unavailable(ref)
        try:
            with default_storage.open(row.storage_name, "rb") as handle:
                content = handle.read()
        except OSError:
            logger.warning("file %s: stored bytes unreadable", row.id, exc_info=True)
            return _unavailable(ref)
        encoded = base64.b64encode(content).decode("ascii")
        part: dict[str, Any] = {
            "type": "file",
            "mediaType": row.media_type,
            "data": {"type": "url", "url": f"data:{row.media_type};base64,{encoded}"},
        }
        if row.filename:
            part["filename"] = row.filename
        return [part]


def file_provider() -> FileProvider | None:
    """A new instance of ``PAI["FILE_PROVIDER"]`` (one per run), or None when unset."""
    if pai_settings.FILE_PROVIDER is None:
        return None
    provider: FileProvider = pai_settings.import_path("FILE_PROVIDER")()
    return provider

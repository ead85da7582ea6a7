"""Moving threads between databases and scopes: ``pai_export`` / ``pai_import``.

A thread travels with its runs, attempts, steps, messages, queue items, pending actions and
files (bytes included) as JSON Lines (:mod:`.records` describes the format); an import
reproduces every row exactly, ids included, or imports nothing.
"""

from __future__ import annotations

from pai_threads.operations.portability.export import ExportSummary, export_threads
from pai_threads.operations.portability.import_ import ImportSummary, import_threads
from pai_threads.operations.portability.records import (
    FORMAT,
    VERSION,
    ExportFormatError,
    ImportConflict,
    PortabilityError,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "ExportFormatError",
    "ExportSummary",
    "ImportConflict",
    "ImportSummary",
    "PortabilityError",
    "export_threads",
    "import_threads",
]

"""Compatibility path (named in the docs and in settings).

The code is in :mod:`pai_threads.execution.file_provider`.
"""

from pai_threads.execution.file_provider import StorageFileProvider, file_provider

__all__ = ["StorageFileProvider", "file_provider"]

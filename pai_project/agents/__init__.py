"""The demo agents."""

from pai_project.agents.assistant import assistant

__all__ = ["assistant"]

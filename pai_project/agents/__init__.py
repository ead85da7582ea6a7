"""The demo agents."""

from pai_project.agents.demo import assistant

__all__ = ["assistant"]

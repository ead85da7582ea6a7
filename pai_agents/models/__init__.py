"""Model providers and the provider-neutral model boundary."""

from pai_agents.models.base import (
    LanguageModel,
    ModelError,
    ModelMessage,
    ModelRequest,
    ModelSelection,
    ModelSettings,
    StepStreamPart,
    ToolSpec,
    Usage,
    add_usage,
)

__all__ = [
    "LanguageModel",
    "ModelError",
    "ModelMessage",
    "ModelRequest",
    "ModelSelection",
    "ModelSettings",
    "StepStreamPart",
    "ToolSpec",
    "Usage",
    "add_usage",
]

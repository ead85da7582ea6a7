"""Model providers and the provider-neutral model boundary."""

from pai_agents.models.base import (
    LanguageModel,
    ModelError,
    ModelMessage,
    ModelRequest,
    ModelSelection,
    ModelSettings,
    ProviderTool,
    ResponseFormat,
    StepStreamPart,
    ToolSpec,
    Usage,
    add_usage,
)
from pai_agents.models.openai_chat import OpenAIChatModel
from pai_agents.models.scripted import ScriptedModel, ScriptedStep, ScriptedToolCall

__all__ = [
    "LanguageModel",
    "ModelError",
    "ModelMessage",
    "ModelRequest",
    "ModelSelection",
    "ModelSettings",
    "OpenAIChatModel",
    "ProviderTool",
    "ResponseFormat",
    "ScriptedModel",
    "ScriptedStep",
    "ScriptedToolCall",
    "StepStreamPart",
    "ToolSpec",
    "Usage",
    "add_usage",
]

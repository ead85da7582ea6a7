"""The model settings a request may carry: the portable allowlist (AD-021, LC-084).

Written once, for the agent's ``ModelSelection.settings`` and every patch's
``model_settings`` alike: allowlisted keys are spread into the provider call, their Python
(snake_case) spellings are mapped to the wire names, and anything else (headers, retries,
timeouts, abort signals) is never forwarded. Retries are the run's ``max_retries``, not a
model setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "MODEL_SETTINGS_KEYS",
    "SNAKE_CASE_SETTINGS",
    "LifecyclePatchError",
    "allowed_model_settings",
]

MODEL_SETTINGS_KEYS: Final = frozenset(
    {"maxOutputTokens", "temperature", "topP", "topK", "presencePenalty",
     "frequencyPenalty", "stopSequences", "seed", "reasoning"}
)  # fmt: skip
# The Python spellings of the same settings (AD-021 names them so): accepted and mapped.
SNAKE_CASE_SETTINGS: Final = {
    "max_output_tokens": "maxOutputTokens",
    "top_p": "topP",
    "top_k": "topK",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "stop_sequences": "stopSequences",
}


class LifecyclePatchError(ValueError):
    """A patch is malformed: a runtime-owned or unknown field, or an undeclared provider tool."""


def allowed_model_settings(settings: Mapping[str, Any], *, strict: bool = False) -> dict[str, Any]:
    """``settings`` projected onto the allowlist (AD-021): snake_case spellings mapped to the
    wire names, every other key (headers, retries, timeouts, abort signals) left out.

    ``strict`` (a patch's settings): a snake_case name outside the allowlist is a mistake, not
    a provider object's extra field, so it raises :class:`LifecyclePatchError` instead of
    being dropped unseen; so does a setting given in both spellings."""
    projected: dict[str, Any] = {}
    for key, value in settings.items():
        name = SNAKE_CASE_SETTINGS.get(key, key)
        if name not in MODEL_SETTINGS_KEYS:
            if strict and "_" in key:
                raise LifecyclePatchError(
                    f"model_settings has no {key!r}; the settings are "
                    f"{sorted(SNAKE_CASE_SETTINGS.keys() | MODEL_SETTINGS_KEYS)}"
                    + (" (retries are the patch's max_retries)" if "retr" in key else "")
                )
            continue
        if name in projected:
            raise LifecyclePatchError(f"model settings give {name!r} twice (as {key!r} too)")
        projected[name] = value
    return projected

"""An OpenAI-compatible Chat Completions provider on the official ``openai`` SDK.

Chat Completions is the lowest common denominator of hosted APIs and local servers (vLLM,
Ollama, llama.cpp, LM Studio, gateways), so this one provider covers them all through
``base_url``. It translates a provider-neutral :class:`ModelRequest` to a streaming request and
the chunk stream back to :data:`StepStreamPart` dicts; it keeps no state between calls.

This module holds the model (clients per event loop, the stream loop, key-free errors); the
request conversion is in :mod:`~pai_agents.models.openai_request` (provider tools, AD-071, are a
pass-through there), the chunk translation in :mod:`~pai_agents.models.openai_stream` and the
prompt abort of a network wait in :mod:`~pai_agents.models.abort_watch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import re
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any

import openai

from pai_agents.abort import Aborted, AbortSignal
from pai_agents.models.abort_watch import AbortWatch
from pai_agents.models.base import ModelError, ModelRequest, StepStreamPart
from pai_agents.models.openai_request import build_request_params, convert_messages
from pai_agents.models.openai_stream import StreamState

__all__ = ["OpenAIChatModel", "convert_messages"]


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP client's transport error classes: the openai SDK runs on ``httpx`` or, in
    newer releases, ``httpx2``; a connection dropped mid-stream surfaces from whichever it
    uses, unwrapped. Neither is imported unless installed."""
    found: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        if importlib.util.find_spec(name) is not None:
            found.append(importlib.import_module(name).TransportError)
    return tuple(found)


_TRANSPORT_ERRORS = _transport_errors()

DEFAULT_MODEL = "gpt-4o-mini"
# Local servers ignore the key but the SDK insists on one.
_LOCAL_PLACEHOLDER_KEY = "not-needed"

# HTTP statuses worth retrying: rate limits, server faults, and the ones the SDK itself retries.
_RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Anything shaped like an OpenAI key, in case a server echoes a key other than ours.
_SECRET_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")


class OpenAIChatModel:
    """A :class:`~pai_agents.models.base.LanguageModel` speaking streaming Chat Completions."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        provider: str = "openai",
        max_retries: int = 0,
        timeout: float | None = 60,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        """``default_headers`` go with every request of this model (TH-020: a run that needs
        its own headers swaps in a model configured with them, from around_model_call).

        ``max_retries`` is the SDK's own retry of a request that failed before streaming;
        it is 0 because the run loop retries whole steps itself (``ModelError.retryable``,
        the agent's ``max_retries``), mid-stream failures included, and two layers of
        retries would multiply each other."""
        self._model = model
        self._provider = provider
        self._owns_client = client is None
        if client is None:
            key = api_key or os.environ.get("OPENAI_API_KEY") or None
            if key is None:
                if not base_url:
                    raise ValueError(
                        "OpenAIChatModel needs an API key: pass api_key=..., set OPENAI_API_KEY, "
                        "or pass base_url=... for a local server that needs none."
                    )
                key = _LOCAL_PLACEHOLDER_KEY
            self._client_options: dict[str, Any] = {
                "api_key": key,
                "base_url": base_url,
                "max_retries": max_retries,
                "timeout": timeout,
                "default_headers": dict(default_headers or {}) or None,
            }
            self._api_key: str | None = key
        else:
            if default_headers:
                raise ValueError("default_headers configure an owned client; set them on client")
            key_attr = getattr(client, "api_key", None)
            self._api_key = key_attr if isinstance(key_attr, str) else None
        self._given_client = client
        # An httpx connection pool belongs to the event loop that opened it, so an owned client
        # is made per loop: a model shared by several loops (asyncio.run per turn, one loop per
        # worker thread) never reuses a pool from a closed loop.
        self._loop_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, openai.AsyncOpenAI
        ] = weakref.WeakKeyDictionary()

    @classmethod
    def from_env(cls, model: str | None = None) -> OpenAIChatModel:
        """Build from OPENAI_API_KEY, OPENAI_BASE_URL and PAI_MODEL (default gpt-4o-mini)."""
        return cls(
            model=model or os.environ.get("PAI_MODEL") or DEFAULT_MODEL,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
        )

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The client for the running event loop (the given one, or one made for this loop)."""
        if self._given_client is not None:
            return self._given_client
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return openai.AsyncOpenAI(**self._client_options)
        client = self._loop_clients.get(loop)
        if client is None:
            client = self._loop_clients[loop] = openai.AsyncOpenAI(**self._client_options)
        return client

    async def aclose(self) -> None:
        """Close this loop's HTTP client if this model created it (a given one is the caller's)."""
        if self._owns_client:
            client = self._loop_clients.pop(asyncio.get_running_loop(), None)
            if client is not None:
                await client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(provider={self._provider!r}, model={self._model!r})"

    # -- request ------------------------------------------------------------------------------

    def build_request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create`` (public for tests and tracing)."""
        return build_request_params(request, model=self._model, provider=self._provider)

    # -- streaming ----------------------------------------------------------------------------

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        """Stream one step; raises :class:`ModelError` on provider faults, ``Aborted`` on abort."""
        if signal is not None:
            signal.raise_if_aborted()
        params = self.build_request_params(request)
        watch = AbortWatch(signal)
        sdk_stream: openai.AsyncStream[Any] | None = None
        functions = {tool["name"] for tool in request.tools}
        state = StreamState(
            provider_tools=frozenset(request.provider_tools) - functions, provider=self._provider
        )
        try:
            try:
                opened = await watch.wait(self.client.chat.completions.create(**params))
                sdk_stream = opened
                while True:
                    watch.check()
                    try:
                        chunk = await watch.wait(opened.__anext__())
                    except StopAsyncIteration:
                        break
                    for part in state.consume(chunk):
                        yield part
                watch.check()
            except (Aborted, asyncio.CancelledError):
                raise
            except openai.OpenAIError as exc:
                watch.check()
                raise self._model_error(exc) from None
            except _TRANSPORT_ERRORS as exc:
                # The SDK wraps transport errors of the request only; a connection dropped
                # mid-stream surfaces from httpx itself. Transient: worth a retry.
                watch.check()
                detail = self._scrub(f"connection lost mid-stream ({type(exc).__name__})")
                raise ModelError(f"{self._label}: {detail}", retryable=True) from None
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                watch.check()
                raise ModelError(f"{self._label}: malformed stream ({exc})") from None
            for part in state.finish():
                yield part
        finally:
            watch.close()
            if sdk_stream is not None:
                with contextlib.suppress(Exception):  # cleanup must not mask the real outcome
                    await sdk_stream.close()

    @property
    def _label(self) -> str:
        return f"{self._provider}:{self._model}"

    def _model_error(self, exc: openai.OpenAIError) -> ModelError:
        """Translate an SDK error into a key-free :class:`ModelError` with a retry hint."""
        retryable = False
        retry_after: float | None = None
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retryable = status in _RETRYABLE_STATUSES or status >= 500
            detail = f"HTTP {status}: {_error_text(exc)}"
            retry_after = _retry_after(exc.response.headers.get("retry-after"))
        elif isinstance(exc, openai.APITimeoutError):
            retryable = True
            detail = "request timed out"
        elif isinstance(exc, openai.APIConnectionError):
            retryable = True
            detail = f"connection error: {exc.message}"
        elif isinstance(exc, openai.APIError):
            # An error event inside an otherwise successful stream.
            kind = exc.type or exc.code or ""
            retryable = kind in {"server_error", "rate_limit_exceeded", "overloaded_error"}
            detail = f"stream error: {_error_text(exc)}"
        else:
            detail = str(exc)
        return ModelError(
            f"{self._label}: {self._scrub(detail)}", retryable=retryable, retry_after=retry_after
        )

    def _scrub(self, text: str) -> str:
        if self._api_key and self._api_key != _LOCAL_PLACEHOLDER_KEY:
            text = text.replace(self._api_key, "***")
        return _SECRET_PATTERN.sub("***", text)


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the HTTP-date form is ignored: servers here send seconds)."""
    try:
        seconds = float(value) if value else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < 3600 else None


def _error_text(exc: openai.APIError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return exc.message

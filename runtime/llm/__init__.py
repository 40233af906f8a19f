"""LLM backends behind one small protocol (see base.py), chosen by a spec string:

    gemini:MODEL     Google's Gemini API through google-genai (needs GEMINI_API_KEY)
    openai:MODEL     Chat Completions through the openai SDK: OpenAI, or any OpenAI-compatible
                     server at OPENAI_BASE_URL (vLLM, Ollama, llama.cpp; local ones need no key)
    anthropic:MODEL  Anthropic's Messages API through the anthropic SDK (ANTHROPIC_API_KEY)
    replay:DIR       plays back DIR/exchanges.jsonl, a recording of an earlier run

`make_backend(spec, record_dir)` wraps either in a recorder when `record_dir` is given, so
every exchange lands in ``record_dir/exchanges.jsonl`` and the run can be replayed.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

from .base import (DEFAULT_TIMEOUT, ROLES, Backend, BadKey, ConnectionFailed, LLMError, MalformedReply,
                   Message, MissingKey, Reply, ReplayMismatch, RequestRejected, RetriesExhausted, TimedOut,
                   TimeLimited, UnknownBackend, check_timeout, completes_n, render, spread)
from .record import RecordingBackend, append_exchange, exchange_file, read_exchanges
from .replay import ReplayBackend

__all__ = [
    "DEFAULT_TIMEOUT", "ROLES", "Backend", "BadKey", "ConnectionFailed", "LLMError", "MalformedReply",
    "Message", "MissingKey", "Reply", "ReplayMismatch", "RequestRejected", "RetriesExhausted", "TimedOut",
    "TimeLimited", "UnknownBackend", "check_timeout", "completes_n", "render", "spread", "RecordingBackend",
    "append_exchange", "exchange_file", "read_exchanges", "ReplayBackend", "make_backend", "SPECS",
]


SPECS = "gemini:MODEL, openai:MODEL, anthropic:MODEL or replay:DIR"


def make_backend(spec: str, record_dir: Optional[str | os.PathLike] = None,
                 timeout: float = DEFAULT_TIMEOUT, options: Optional[Mapping[str, str]] = None) -> Backend:
    """The backend named by `spec` (see SPECS), each call limited to `timeout` seconds in
    all (`TimeLimited`), recording into `record_dir` when given (only calls that finished
    within the limit are recorded). `options` (`--llm-option key=value`) are request
    parameters of the openai and anthropic backends; ValueError names a bad one."""
    timeout = check_timeout(timeout)
    kind, _, arg = spec.partition(":")
    options = dict(options or {})
    if options and kind not in ("openai", "anthropic"):
        raise ValueError(f"--llm-option applies to openai:MODEL and anthropic:MODEL, not {spec!r}")
    if kind == "gemini" and arg:
        from .gemini import GeminiBackend, GeminiConfig

        config = GeminiConfig()
        backend: Backend = GeminiBackend(arg, GeminiConfig(timeout=min(config.timeout, timeout)))
    elif kind == "openai" and arg:
        from .openai_backend import OpenAIBackend, OpenAIConfig, parse_options

        config = OpenAIConfig()
        backend = OpenAIBackend(arg, OpenAIConfig(timeout=min(config.timeout, timeout),
                                                  options=parse_options(options)))
    elif kind == "anthropic" and arg:
        from .anthropic_backend import AnthropicBackend, AnthropicConfig, parse_options as anthropic_options

        config = AnthropicConfig()
        backend = AnthropicBackend(arg, AnthropicConfig(timeout=min(config.timeout, timeout),
                                                        options=anthropic_options(options)))
    elif kind == "replay" and arg:
        backend = ReplayBackend(arg)
    else:
        raise UnknownBackend(f"Unknown LLM backend {spec!r}: use {SPECS} (e.g. gemini:gemini-2.5-flash, "
                             "openai:gpt-5-mini, anthropic:claude-sonnet-4-5).")
    limited = TimeLimited(backend, timeout)
    return RecordingBackend(limited, record_dir) if record_dir is not None else limited

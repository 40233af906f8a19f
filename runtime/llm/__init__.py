"""LLM backends behind one small protocol (see base.py), chosen by a spec string:

    gemini:MODEL   Google's Gemini API through google-genai (needs GEMINI_API_KEY)
    replay:DIR     plays back DIR/exchanges.jsonl, a recording of an earlier run

`make_backend(spec, record_dir)` wraps either in a recorder when `record_dir` is given, so
every exchange lands in ``record_dir/exchanges.jsonl`` and the run can be replayed.
"""

from __future__ import annotations

import os
from typing import Optional

from .base import (DEFAULT_TIMEOUT, ROLES, Backend, BadKey, ConnectionFailed, LLMError, MalformedReply,
                   Message, MissingKey, Reply, ReplayMismatch, RequestRejected, RetriesExhausted, TimedOut,
                   TimeLimited, UnknownBackend, check_timeout, render)
from .record import RecordingBackend, append_exchange, exchange_file, read_exchanges
from .replay import ReplayBackend

__all__ = [
    "DEFAULT_TIMEOUT", "ROLES", "Backend", "BadKey", "ConnectionFailed", "LLMError", "MalformedReply",
    "Message", "MissingKey", "Reply", "ReplayMismatch", "RequestRejected", "RetriesExhausted", "TimedOut",
    "TimeLimited", "UnknownBackend", "check_timeout", "render", "RecordingBackend",
    "append_exchange", "exchange_file", "read_exchanges", "ReplayBackend", "make_backend",
]


def make_backend(spec: str, record_dir: Optional[str | os.PathLike] = None,
                 timeout: float = DEFAULT_TIMEOUT) -> Backend:
    """The backend named by `spec` ("gemini:MODEL" or "replay:DIR"), each call limited to
    `timeout` seconds in all (`TimeLimited`), recording into `record_dir` when given (only
    calls that finished within the limit are recorded)."""
    timeout = check_timeout(timeout)
    kind, _, arg = spec.partition(":")
    if kind == "gemini" and arg:
        from .gemini import GeminiBackend, GeminiConfig

        config = GeminiConfig()
        backend: Backend = GeminiBackend(arg, GeminiConfig(timeout=min(config.timeout, timeout)))
    elif kind == "replay" and arg:
        backend = ReplayBackend(arg)
    else:
        raise UnknownBackend(f"Unknown LLM backend {spec!r}: use gemini:MODEL (e.g. "
                             "gemini:gemini-2.5-flash) or replay:DIR.")
    limited = TimeLimited(backend, timeout)
    return RecordingBackend(limited, record_dir) if record_dir is not None else limited

"""The Gemini backend, through the google-genai SDK (imported lazily: it costs ~0.7 s).

The key comes from GOOGLE_API_KEY or GEMINI_API_KEY (GOOGLE_API_KEY first when both are set,
as the SDK does). Retries are the SDK's own (`HttpRetryOptions`): exponential backoff with
jitter on 408, 429, 500, 502, 503, 504 and on connection errors and timeouts. The endpoint
can be moved (for tests, a fake server on 127.0.0.1) by `base_url` or POLC_GEMINI_BASE_URL.
`timeout` bounds one HTTP attempt's reads; the limit of a whole call (every attempt, and a
trickling reply) is `base.TimeLimited`'s, which `make_backend` puts around this backend.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Optional, Sequence

from .base import (BadKey, ConnectionFailed, LLMError, MalformedReply, Message, MissingKey, Reply,
                   RequestRejected, RetriesExhausted)
from .sdk_errors import close_quietly

RETRY_STATUS = (408, 429, 500, 502, 503, 504)
KEY_VARS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
BASE_URL_VAR = "POLC_GEMINI_BASE_URL"


@dataclass(frozen=True)
class GeminiConfig:
    """Transport settings. Delays in seconds; `timeout` is per HTTP attempt."""

    timeout: float = 180.0
    attempts: int = 5  # including the first
    initial_delay: float = 2.0
    max_delay: float = 60.0
    jitter: float = 1.0
    temperature: Optional[float] = None
    base_url: Optional[str] = None  # default: POLC_GEMINI_BASE_URL, else Google's endpoint


def api_key_from_env() -> str:
    for var in KEY_VARS:
        if os.environ.get(var, "").strip():
            return os.environ[var].strip()
    raise MissingKey("No Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY), or use a "
                     "recorded session with --llm replay:DIR.")


class GeminiBackend:
    """`complete` sends one generateContent request (the SDK retries it) and returns the
    first candidate's text with the usage metadata's token counts."""

    def __init__(self, model: str, config: GeminiConfig = GeminiConfig(),
                 api_key: Optional[str] = None):
        from google import genai
        from google.genai import types

        self.model = model
        self.name = f"gemini:{model}"
        self.config = config
        self.base_url = config.base_url or os.environ.get(BASE_URL_VAR) or None
        self._types = types
        retry = types.HttpRetryOptions(attempts=config.attempts, initial_delay=config.initial_delay,
                                       max_delay=config.max_delay, jitter=config.jitter,
                                       http_status_codes=list(RETRY_STATUS))
        options = types.HttpOptions(base_url=self.base_url, timeout=int(config.timeout * 1000),
                                    retry_options=retry)
        self._client = genai.Client(api_key=api_key or api_key_from_env(), vertexai=False,
                                    http_options=options)

    def complete(self, messages: Sequence[Message]) -> Reply:
        types = self._types
        system = [m.text for m in messages if m.role == "system"]
        contents = [types.Content(role=m.role, parts=[types.Part(text=m.text)])
                    for m in messages if m.role != "system"]
        config = types.GenerateContentConfig(system_instruction="\n\n".join(system) or None,
                                             temperature=self.config.temperature)
        start = time.monotonic()
        try:
            response = self._client.models.generate_content(model=self.model, contents=contents,
                                                            config=config)
        except Exception as e:  # noqa: BLE001 - every SDK/transport failure becomes an LLMError
            raise self._explain(e) from e
        return Reply(_reply_text(response), *_token_counts(response), time.monotonic() - start)

    def abandon(self) -> None:
        """Stop a call that ran out of time (`base.TimeLimited`): close the HTTP client, so a
        call still retrying fails at once and its connections do not linger. The backend is
        not used again."""
        close_quietly(self._client)

    def _explain(self, e: Exception) -> LLMError:
        from google.genai import errors

        where = self.base_url or "generativelanguage.googleapis.com"
        n = self.config.attempts
        if isinstance(e, errors.APIError):
            detail = f"{e.code} {e.status or ''}".strip()
            message = (e.message or "").strip().rstrip(".")
            if _is_key_error(e):
                return BadKey(f"The Gemini API rejected the API key ({detail}: {message}); "
                              "check GEMINI_API_KEY.")
            if e.code in RETRY_STATUS:
                return RetriesExhausted(f"The Gemini API still answered {detail} after {n} "
                                        f"attempts with backoff; try again later.")
            return RequestRejected(f"The Gemini API refused the request ({detail}: {message}).")
        if (isinstance(e, (errors.UnknownApiResponseError, json.JSONDecodeError))
                or type(e).__name__ == "ValidationError"):
            return MalformedReply(f"The Gemini API at {where} answered with something that is not "
                                  "a generateContent response.")
        kind = type(e).__name__
        if "Timeout" in kind:
            return ConnectionFailed(f"The Gemini API at {where} did not answer within "
                                    f"{self.config.timeout:g} s, {n} attempts.")
        if "Connect" in kind or isinstance(e, OSError):
            return ConnectionFailed(f"Could not connect to the Gemini API at {where} "
                                    f"({_root_cause(e)}), {n} attempts.")
        return LLMError(f"The Gemini call failed: {kind}: {e}.")


def _is_key_error(e) -> bool:
    text = f"{e.message} {e.details}"
    return (e.code in (401, 403) and e.status in ("PERMISSION_DENIED", "UNAUTHENTICATED")
            or "API_KEY_INVALID" in text or "API key not valid" in text)


def _root_cause(e: BaseException) -> str:
    while e.__cause__ is not None or e.__context__ is not None:
        e = e.__cause__ or e.__context__
    return str(e) or type(e).__name__


def _reply_text(response) -> str:
    """The first candidate's text parts (thoughts excluded), or MalformedReply."""
    candidates = response.candidates or []
    if not candidates:
        reason = getattr(response.prompt_feedback, "block_reason", None)
        raise MalformedReply("The Gemini reply has no candidates"
                             + (f" (prompt blocked: {reason})." if reason else "."))
    content = candidates[0].content
    parts = (content.parts if content else None) or []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    if not text:
        raise MalformedReply(f"The Gemini reply has no text (finish reason "
                             f"{candidates[0].finish_reason}).")
    return text


def _token_counts(response) -> tuple[int, int]:
    usage = response.usage_metadata
    if usage is None:
        return 0, 0
    return (usage.prompt_token_count or 0,
            (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0))

"""The `anthropic:MODEL` backend: the Messages API through the official anthropic SDK
(imported lazily).

The key comes from ANTHROPIC_API_KEY and the endpoint from ANTHROPIC_BASE_URL (the SDK's
own variables; a base URL on this machine needs no key). The conversation's system message
becomes the `system` parameter; "model" turns are "assistant" turns. Retries are the SDK's:
exponential backoff with jitter on connection errors, 408, 409, 429 and 5xx (529
overloaded included), honouring Retry-After. `timeout` bounds one HTTP attempt; the limit
of a whole call is `base.TimeLimited`'s, which `make_backend` puts around this backend.

Options (`--llm-option key=value`): `max_tokens` (the reply's limit, default 16000, which
the Messages API requires). This SDK's `messages.create` takes no temperature, top_p or
top_k any more, so those are refused as unknown options.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from .base import MalformedReply, Message, Reply
from .openai_backend import parse_options as _parse
from .sdk_errors import Provider, close_quietly, endpoint, explain

KEY_VAR = "ANTHROPIC_API_KEY"
BASE_URL_VAR = "ANTHROPIC_BASE_URL"
DEFAULT_MAX_TOKENS = 16000
OPTIONS = {"max_tokens": int}


@dataclass(frozen=True)
class AnthropicConfig:
    """Transport settings (seconds; `timeout` per HTTP attempt) and request options."""

    timeout: float = 180.0
    attempts: int = 5  # including the first
    base_url: Optional[str] = None  # default: ANTHROPIC_BASE_URL, else Anthropic's endpoint
    options: Mapping[str, Any] = field(default_factory=dict)


def parse_options(pairs: Mapping[str, str]) -> dict[str, Any]:
    """`--llm-option` strings as typed Messages parameters; ValueError naming a bad one."""
    return _parse(pairs, OPTIONS)


class AnthropicBackend:
    """`complete` sends one messages.create request (the SDK retries it) and returns the
    text blocks of the reply (thinking excluded) with the usage's token counts."""

    def __init__(self, model: str, config: AnthropicConfig = AnthropicConfig(),
                 api_key: Optional[str] = None):
        import anthropic

        self.model = model
        self.name = f"anthropic:{model}"
        self.config = config
        self.options = {"max_tokens": DEFAULT_MAX_TOKENS, **config.options}
        self.base_url, key = endpoint(config.base_url, api_key, KEY_VAR, BASE_URL_VAR,
                                      f"No Anthropic API key: set {KEY_VAR}, or point {BASE_URL_VAR} at a "
                                      "local server, which needs none.")
        self.provider = Provider("the Anthropic API", self.base_url or "api.anthropic.com", KEY_VAR, model,
                                 config.attempts, config.timeout)
        self._sdk = anthropic
        self._client = anthropic.Anthropic(api_key=key, base_url=self.base_url, timeout=config.timeout,
                                           max_retries=config.attempts - 1)

    def complete(self, messages: Sequence[Message]) -> Reply:
        system = "\n\n".join(m.text for m in messages if m.role == "system")
        wire = [{"role": "assistant" if m.role == "model" else "user", "content": m.text}
                for m in messages if m.role != "system"]
        extra = {"system": system} if system else {}
        start = time.monotonic()
        try:
            response = self._client.messages.create(model=self.model, messages=wire, **extra, **self.options)
        except Exception as e:  # noqa: BLE001 - every SDK/transport failure becomes an LLMError
            raise explain(self._sdk, e, self.provider) from e
        return Reply(self._text(response), *_counts(response), seconds=time.monotonic() - start,
                     **_details(response))

    def abandon(self) -> None:
        """Stop a call that ran out of time (`base.TimeLimited`): close the HTTP client."""
        close_quietly(self._client)

    def _text(self, response) -> str:
        reason = getattr(response, "stop_reason", None)
        if reason == "max_tokens":
            raise MalformedReply(f"The reply of {self.name} was cut off at its token limit (stop reason "
                                 f"\"max_tokens\", {self.options['max_tokens']} tokens); raise it with "
                                 "--llm-option max_tokens=N.")
        if reason == "refusal":
            raise MalformedReply(f"{self.name} refused to answer (stop reason \"refusal\").")
        blocks = getattr(response, "content", None)
        if not isinstance(blocks, list):
            raise MalformedReply(f"The Anthropic API at {self.provider.where} answered without content.")
        text = "".join(getattr(b, "text", "") or "" for b in blocks if getattr(b, "type", None) == "text")
        if not text.strip():
            raise MalformedReply(f"The reply of {self.name} has no text (stop reason {reason!r}).")
        return text


def _counts(response) -> tuple[int, int]:
    """(input, output) tokens; input counts cached reads and cache writes too, as billed."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0
    cached = (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    return (usage.input_tokens or 0) + cached, usage.output_tokens or 0


def _details(response) -> dict[str, int]:
    usage = getattr(response, "usage", None)
    out: dict[str, int] = {}
    if usage is None:
        return out
    if usage.cache_read_input_tokens is not None:
        out["cached_input_tokens"] = usage.cache_read_input_tokens
    details = getattr(usage, "output_tokens_details", None)
    if details is not None and getattr(details, "thinking_tokens", None) is not None:
        out["reasoning_tokens"] = details.thinking_tokens
    return out

"""The `openai:MODEL` backend: Chat Completions through the official openai SDK (imported
lazily), so it speaks to OpenAI and to every OpenAI-compatible server (vLLM, Ollama,
llama.cpp's server, LM Studio, most hosted providers).

The key comes from OPENAI_API_KEY and the endpoint from OPENAI_BASE_URL (the SDK's own
variables); with a base URL on this machine (127.0.0.1, localhost, ::1) a missing key is
allowed, since local servers do not check one. Retries are the SDK's: exponential backoff
with jitter on connection errors, 408, 409, 429 and 5xx, honouring the server's
Retry-After (up to 120 s). `timeout` bounds one HTTP attempt; the limit of a whole call is
`base.TimeLimited`'s, which `make_backend` puts around this backend.

Options (`--llm-option key=value`): `temperature`, `top_p` (numbers), `seed`,
`max_completion_tokens` (integers) and `reasoning_effort` (a word); the server refuses
those the model does not accept (a 400, reported as `RequestRejected`).

`complete_n(messages, n)` asks for `n` choices in one request (the API's `n`; the
candidates of `polc refine --candidates K`), in one attempt: its caller asks one at a time
when it fails (`refine.converse.Caller.many`). The usage covers them all: the prompt is
counted once (on the first reply) and the output is spread over the replies by their
length. A server that ignores `n` (Ollama, llama.cpp's) returns one choice; choices cut
at the token limit or empty are dropped (their tokens stay counted) unless none is left.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from .base import MalformedReply, Message, Reply, spread
from .sdk_errors import Provider, close_quietly, endpoint, explain

KEY_VAR = "OPENAI_API_KEY"
BASE_URL_VAR = "OPENAI_BASE_URL"
ROLE = {"system": "system", "user": "user", "model": "assistant"}
OPTIONS = {"temperature": float, "top_p": float, "seed": int, "max_completion_tokens": int,
           "reasoning_effort": str}


@dataclass(frozen=True)
class OpenAIConfig:
    """Transport settings (seconds; `timeout` per HTTP attempt) and request options."""

    timeout: float = 180.0
    attempts: int = 5  # including the first
    base_url: Optional[str] = None  # default: OPENAI_BASE_URL, else OpenAI's endpoint
    options: Mapping[str, Any] = field(default_factory=dict)


def parse_options(pairs: Mapping[str, str], allowed: Mapping[str, type] = OPTIONS) -> dict[str, Any]:
    """`--llm-option` strings as typed request parameters; ValueError naming a bad one."""
    out: dict[str, Any] = {}
    for key, raw in pairs.items():
        if key not in allowed:
            raise ValueError(f"unknown LLM option {key!r}: use one of {', '.join(sorted(allowed))}")
        try:
            out[key] = allowed[key](raw)
        except ValueError:
            raise ValueError(f"the LLM option {key} must be {allowed[key].__name__}, not {raw!r}") from None
    return out


class OpenAIBackend:
    """`complete` sends one chat.completions request (the SDK retries it) and returns the
    first choice's text with the usage's token counts (output includes reasoning tokens)."""

    def __init__(self, model: str, config: OpenAIConfig = OpenAIConfig(), api_key: Optional[str] = None):
        import openai

        self.model = model
        self.name = f"openai:{model}"
        self.config = config
        self.options = dict(config.options)
        self.base_url, key = endpoint(config.base_url, api_key, KEY_VAR, BASE_URL_VAR,
                                      f"No OpenAI API key: set {KEY_VAR}, or point {BASE_URL_VAR} at a local "
                                      "server (http://127.0.0.1:PORT/v1), which needs none.")
        self.provider = Provider("the OpenAI API", self.base_url or "api.openai.com", KEY_VAR, model,
                                 config.attempts, config.timeout)
        self._sdk = openai
        self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=config.timeout,
                                     max_retries=config.attempts - 1)

    def complete(self, messages: Sequence[Message]) -> Reply:
        wire = [{"role": ROLE[m.role], "content": m.text} for m in messages]
        start = time.monotonic()
        try:
            response = self._client.chat.completions.create(model=self.model, messages=wire, **self.options)
        except Exception as e:  # noqa: BLE001 - every SDK/transport failure becomes an LLMError
            raise explain(self._sdk, e, self.provider) from e
        return Reply(self._text(response), *token_counts(response), time.monotonic() - start,
                     **usage_details(response))

    def complete_n(self, messages: Sequence[Message], n: int) -> list[Reply]:
        """Up to `n` replies from one request with `n` choices (see the module docstring)."""
        wire = [{"role": ROLE[m.role], "content": m.text} for m in messages]
        start = time.monotonic()
        try:
            # one attempt: a server that refuses n (llama.cpp's answers 400 or 500, "Only one
            # completion choice is allowed") is asked one at a time by the caller, not retried
            response = self._client.with_options(max_retries=0).chat.completions.create(
                model=self.model, messages=wire, n=n, **self.options)
        except Exception as e:  # noqa: BLE001 - every SDK/transport failure becomes an LLMError
            raise explain(self._sdk, e, self.provider) from e
        seconds = time.monotonic() - start
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise MalformedReply(f"The OpenAI API at {self.provider.where} answered without any choices.")
        texts, problems = [], []
        for choice in sorted(choices, key=lambda c: c.index or 0)[:n]:
            try:
                texts.append(self._choice_text(choice))
            except MalformedReply as e:
                problems.append(e)
        if not texts:
            raise problems[0]
        input_tokens, output_tokens = token_counts(response)
        details = usage_details(response)
        outputs = spread(output_tokens, [len(t) for t in texts])
        reasoning = spread(details["reasoning_tokens"], outputs) if "reasoning_tokens" in details else None
        return [Reply(t, input_tokens if i == 0 else 0, outputs[i], seconds if i == 0 else 0.0,
                      None if reasoning is None else reasoning[i],
                      details.get("cached_input_tokens") if i == 0 else (0 if "cached_input_tokens" in details
                                                                          else None))
                for i, t in enumerate(texts)]

    def abandon(self) -> None:
        """Stop a call that ran out of time (`base.TimeLimited`): close the HTTP client."""
        close_quietly(self._client)

    def _text(self, response) -> str:
        where = self.provider.where
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise MalformedReply(f"The OpenAI API at {where} answered without any choices.")
        return self._choice_text(choices[0])

    def _choice_text(self, choice) -> str:
        message = choice.message
        text = (message.content or "") if message is not None else ""
        reason = choice.finish_reason
        if reason == "length":
            raise MalformedReply(f"The reply of {self.name} was cut off at its token limit (finish reason "
                                 "\"length\"); raise max_completion_tokens (--llm-option "
                                 "max_completion_tokens=N) or lower reasoning_effort.")
        if reason == "content_filter":
            raise MalformedReply(f"{self.name} withheld its reply (finish reason \"content_filter\").")
        refusal = getattr(message, "refusal", None) if message is not None else None
        if not text.strip():
            raise MalformedReply(f"The reply of {self.name} has no text (finish reason {reason!r}"
                                 + (f", refusal: {refusal}" if refusal else "") + ").")
        return text


def token_counts(response) -> tuple[int, int]:
    """(input, output) tokens from `usage`; completion_tokens already includes reasoning."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0
    return usage.prompt_tokens or 0, usage.completion_tokens or 0


def usage_details(response) -> dict[str, int]:
    """The finer counts a provider reports: reasoning and cached input tokens."""
    usage = getattr(response, "usage", None)
    out: dict[str, int] = {}
    if usage is None:
        return out
    if usage.completion_tokens_details and usage.completion_tokens_details.reasoning_tokens is not None:
        out["reasoning_tokens"] = usage.completion_tokens_details.reasoning_tokens
    if usage.prompt_tokens_details and usage.prompt_tokens_details.cached_tokens is not None:
        out["cached_input_tokens"] = usage.prompt_tokens_details.cached_tokens
    return out

"""The one protocol every LLM backend speaks: messages in; text and token counts out.

A conversation is a list of `Message`s; roles are "system" (instructions, at most one,
first), "user" and "model". `Backend.complete` returns a `Reply` or raises an `LLMError`
subclass whose message is one sentence a person can act on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

ROLES = ("system", "user", "model")


@dataclass(frozen=True)
class Message:
    """One turn of a conversation. `role` is one of ROLES."""

    role: str
    text: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"message role must be one of {ROLES}, not {self.role!r}")


@dataclass(frozen=True)
class Reply:
    """What the model answered and what it cost: tokens as the provider counts them (output
    includes any thinking tokens), `seconds` of wall time for the whole call with retries."""

    text: str
    input_tokens: int
    output_tokens: int
    seconds: float


class Backend(Protocol):
    """Anything that answers a conversation. `name` is its spec, e.g. "gemini:gemini-2.5-flash"."""

    name: str

    def complete(self, messages: Sequence[Message]) -> Reply: ...


class LLMError(Exception):
    """An LLM call failed; str(error) says why in one sentence."""


class UnknownBackend(LLMError):
    """The backend spec is neither gemini:MODEL nor replay:DIR."""


class MissingKey(LLMError):
    """Neither GEMINI_API_KEY nor GOOGLE_API_KEY is set."""


class BadKey(LLMError):
    """The provider rejected the API key."""


class ConnectionFailed(LLMError):
    """The provider could not be reached (refused, unresolvable, or timed out)."""


class RetriesExhausted(LLMError):
    """The provider kept answering with a retryable error (408, 429, 5xx) until attempts ran out."""


class RequestRejected(LLMError):
    """The provider refused the request for a reason other than the key (e.g. unknown model)."""


class MalformedReply(LLMError):
    """The provider answered, but not with a reply we can read (bad JSON, no text)."""


class ReplayMismatch(LLMError):
    """A replayed conversation asked something other than what was recorded, or more."""


def render(messages: Sequence[Message]) -> str:
    """A conversation as plain text, one header line per message (for diffs and logs)."""
    return "".join(f"--- {m.role}\n{m.text}{'' if m.text.endswith(chr(10)) else chr(10)}"
                   for m in messages)

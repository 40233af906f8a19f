"""The one protocol every LLM backend speaks: messages in; text and token counts out.

A conversation is a list of `Message`s; roles are "system" (instructions, at most one,
first), "user" and "model". `Backend.complete` returns a `Reply` or raises an `LLMError`
subclass whose message is one sentence a person can act on.

Every call has one wall-clock limit over all its attempts: `TimeLimited` (which every
backend `make_backend` and `polc refine`/`polc generate` open is wrapped in) runs the
call in a daemon worker thread and, when `seconds` (DEFAULT_TIMEOUT, 600 s, unless
`--llm-timeout` says otherwise) pass without a reply, abandons it and raises `TimedOut`.
This holds however the provider misbehaves: an HTTP read timeout only bounds the gap
between two bytes, so a server trickling one byte every 20 s would otherwise hold a call
for hours, and retries multiply any per-attempt limit. The abandoned call is told to stop
(`abandon()`, when the backend has one) and, being a daemon thread, never delays exit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence

DEFAULT_TIMEOUT = 600.0  # seconds for one LLM call, every attempt and backoff included

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
    includes any thinking tokens), `seconds` of wall time for the whole call with retries.
    `reasoning_tokens` (the part of output spent thinking) and `cached_input_tokens` (the
    part of input served from the provider's cache) are None where it does not say. `model`
    is the spec of the model that wrote it when that is not the backend answering (a replay
    names the recorded model, so a replayed run is priced as the run it replays)."""

    text: str
    input_tokens: int
    output_tokens: int
    seconds: float
    reasoning_tokens: Optional[int] = None
    cached_input_tokens: Optional[int] = None
    model: Optional[str] = None


class Backend(Protocol):
    """Anything that answers a conversation. `name` is its spec, e.g. "gemini:gemini-2.5-flash".

    A backend may also have `complete_n(messages, n) -> list[Reply]`: up to `n` independent
    replies to one prompt from one request (OpenAI's `n`), the request's tokens spread over
    them so that they sum to what the provider counted. It may return fewer than `n` (a
    server that ignores `n` returns one); `completes_n` says whether a backend has it."""

    name: str

    def complete(self, messages: Sequence[Message]) -> Reply: ...


def completes_n(backend: Any) -> bool:
    """Whether `backend` (or the backend it wraps, `TimeLimited`) answers several replies in
    one request, and has not been found refusing to (`n_refused`)."""
    if getattr(backend, "n_refused", False):
        return False
    b = backend
    while isinstance(b, TimeLimited):
        b = b.inner
    return callable(getattr(b, "complete_n", None))


def spread(total: int, weights: Sequence[int]) -> list[int]:
    """`total` split in proportion to `weights` (whole numbers summing to `total`; equal
    shares when the weights are all 0): one request's tokens over its replies."""
    n = len(weights)
    if n == 0:
        return []
    w = [max(int(x), 0) for x in weights]
    if not sum(w):
        w = [1] * n
    shares = [total * x // sum(w) for x in w]
    for i in sorted(range(n), key=lambda i: -(total * w[i] % sum(w)))[:total - sum(shares)]:
        shares[i] += 1
    return shares


class LLMError(Exception):
    """An LLM call failed; str(error) says why in one sentence."""


class UnknownBackend(LLMError):
    """The backend spec is not one `make_backend` knows (gemini:, openai:, anthropic:, replay:)."""


class MissingKey(LLMError):
    """The provider's API key variable (GEMINI_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY) is not set."""


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


class TimedOut(LLMError):
    """An LLM call did not finish within its total wall-clock limit (all attempts together)."""


def check_timeout(seconds: Any) -> float:
    """`seconds` as a positive, finite limit; ValueError saying what is wrong otherwise."""
    value = float(seconds)
    if not (0 < value < float("inf")):
        raise ValueError(f"the LLM time limit must be a positive number of seconds, not {seconds}")
    return value


class TimeLimited:
    """`inner` with every `complete` ending within `seconds` of wall time (see the module
    docstring). Other attributes (`position`, `last_mismatch`, ...) are `inner`'s."""

    def __init__(self, inner: Backend, seconds: float = DEFAULT_TIMEOUT):
        self.inner = inner
        self.name = inner.name
        self.seconds = check_timeout(seconds)

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def complete(self, messages: Sequence[Message]) -> Reply:
        return self._limited(lambda: self.inner.complete(messages))

    def complete_n(self, messages: Sequence[Message], n: int) -> list[Reply]:
        """`inner.complete_n` within the same limit (see `completes_n` for whether it has one)."""
        return self._limited(lambda: self.inner.complete_n(messages, n))

    def _limited(self, call: Any) -> Any:
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["reply"] = call()
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=work, name=f"polc-llm-call ({self.name})", daemon=True).start()
        if not done.wait(self.seconds):
            abandon = getattr(self.inner, "abandon", None)
            if abandon is not None:
                abandon()
            raise TimedOut(f"The model ({self.name}) did not finish its reply within {self.seconds:g} s, the "
                           f"limit of one LLM call over all its attempts (--llm-timeout SECONDS changes it).")
        if "error" in box:
            raise box["error"]
        return box["reply"]



def render(messages: Sequence[Message]) -> str:
    """A conversation as plain text, one header line per message (for diffs and logs)."""
    return "".join(f"--- {m.role}\n{m.text}{'' if m.text.endswith(chr(10)) else chr(10)}"
                   for m in messages)

"""What the openai and anthropic backends share: their endpoint and key (`endpoint`), closing
an abandoned client, and their SDKs' failures as `LLMError`s, one sentence a person can act on.

Both SDKs are generated from the same template (Stainless), so their exceptions have the
same names and shapes: `APIStatusError` (with `status_code` and the response), its
subclasses `AuthenticationError` (401), `PermissionDeniedError` (403), `NotFoundError`
(404), `RateLimitError` (429), `InternalServerError` (5xx); `APITimeoutError` and
`APIConnectionError`; `APIResponseValidationError` for a body that is not the promised
type. The SDK module is passed in, so neither is imported here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlparse

from .base import BadKey, ConnectionFailed, LLMError, MalformedReply, MissingKey, RequestRejected, RetriesExhausted

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def is_local(url: Optional[str]) -> bool:
    """Whether `url` points at this machine."""
    return bool(url) and (urlparse(url).hostname or "") in LOCAL_HOSTS


def endpoint(base_url: Optional[str], api_key: Optional[str], key_var: str, base_url_var: str,
             missing: str) -> tuple[Optional[str], str]:
    """(base URL, key): the configured base URL, else the SDK's variable (None: the provider's
    own endpoint); the key given, else its variable. A server on this machine needs no key;
    anywhere else a missing key is `MissingKey(missing)`."""
    url = base_url or os.environ.get(base_url_var, "").strip() or None
    key = api_key or os.environ.get(key_var, "").strip()
    if not key:
        if not is_local(url):
            raise MissingKey(missing)
        key = "no-key-needed-locally"
    return url, key


def close_quietly(client: Any) -> None:
    """Close an SDK client whose call ran out of time (`base.TimeLimited`): the call is
    abandoned whatever closing says."""
    try:
        client.close()
    except Exception:  # noqa: BLE001
        pass


@dataclass(frozen=True)
class Provider:
    """How a provider is named in messages: `label` ("the OpenAI API"), the endpoint `where`,
    the variable holding the key, and the SDK's settings (attempts, per-attempt timeout)."""

    label: str
    where: str
    key_var: str
    model: str
    attempts: int
    timeout: float

    @property
    def Label(self) -> str:  # noqa: N802 - the label at the start of a sentence
        return self.label[:1].upper() + self.label[1:]


def explain(sdk, e: Exception, p: Provider) -> LLMError:
    """The `LLMError` for the SDK exception `e` raised by a call to provider `p`."""
    if isinstance(e, LLMError):
        return e
    if isinstance(e, sdk.APIStatusError):
        code = e.status_code
        detail = _detail(e)
        if code == 401 or isinstance(e, sdk.AuthenticationError):
            return BadKey(f"{p.Label} at {p.where} rejected the API key (401{detail}); check {p.key_var}.")
        if code == 403:
            return BadKey(f"{p.Label} at {p.where} refused access (403{detail}); check that the key in "
                          f"{p.key_var} may use the model {p.model!r}.")
        if code == 404:
            return RequestRejected(f"{p.Label} at {p.where} does not know the model {p.model!r} (404{detail}); "
                                   "check the model name (and the base URL).")
        if code in (408, 409, 429) or code >= 500:
            return RetriesExhausted(f"{p.Label} at {p.where} still answered {code}{detail} after {p.attempts} "
                                    "attempts with backoff (Retry-After honoured up to 120 s); try again later.")
        return RequestRejected(f"{p.Label} at {p.where} refused the request ({code}{detail}).")
    if isinstance(e, (sdk.APIResponseValidationError, json.JSONDecodeError)):
        return MalformedReply(f"{p.Label} at {p.where} answered with something that is not a reply "
                              "its SDK can read; check the base URL.")
    if isinstance(e, sdk.APITimeoutError):
        return ConnectionFailed(f"{p.Label} at {p.where} did not answer within {p.timeout:g} s, "
                                f"{p.attempts} attempts.")
    if isinstance(e, sdk.APIConnectionError):
        return ConnectionFailed(f"Could not connect to {p.label} at {p.where} ({_root_cause(e)}), "
                                f"{p.attempts} attempts.")
    return LLMError(f"The call to {p.label} failed: {type(e).__name__}: {e}.")


def _detail(e) -> str:
    """': the provider's own message', when its error body has one."""
    body = getattr(e, "body", None)
    message = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
    message = str(message or "").strip().rstrip(".")
    return f": {message[:200]}" if message else ""


def _root_cause(e: BaseException) -> str:
    while e.__cause__ is not None or e.__context__ is not None:
        e = e.__cause__ or e.__context__
    return str(e) or type(e).__name__

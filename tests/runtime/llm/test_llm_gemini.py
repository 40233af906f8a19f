"""The Gemini backend end to end, against a fake generateContent server on 127.0.0.1.

No request ever leaves this machine: every backend here is pointed at a server the test
started itself (or at a closed port on 127.0.0.1).
"""

from __future__ import annotations

import socket

import pytest
from llm_fake_server import FakeAPI

from polc.runtime.llm import (BadKey, ConnectionFailed, MalformedReply, Message, MissingKey,
                              RequestRejected, RetriesExhausted, make_backend)
from polc.runtime.llm.gemini import GeminiBackend, GeminiConfig

FAST = dict(attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0.0, timeout=5.0)
PROMPT = [Message("system", "You revise policies."), Message("user", "Hello"),
          Message("model", "Hi."), Message("user", "Revise it.")]


def ok_body(text="latent a = 1", prompt_tokens=17, out_tokens=5, thoughts=None):
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": out_tokens,
             "totalTokenCount": prompt_tokens + out_tokens}
    if thoughts is not None:
        usage["thoughtsTokenCount"] = thoughts
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage, "modelVersion": "gemini-test"}


def error_body(code, status, message, reason=None):
    details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                "domain": "googleapis.com"}] if reason else []
    return {"error": {"code": code, "message": message, "status": status, "details": details}}


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    for var in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
                "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "POLC_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-123")


def backend(url, **overrides):
    return GeminiBackend("gemini-test", GeminiConfig(base_url=url, **{**FAST, **overrides}))


def test_success_returns_text_and_token_counts():
    with FakeAPI([(200, ok_body("revised!", 17, 5, thoughts=3), 0)]) as fake:
        reply = backend(fake.url).complete(PROMPT)
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("revised!", 17, 8)
    assert reply.seconds >= 0
    [request] = fake.requests
    assert request["path"].endswith("/models/gemini-test:generateContent")
    assert request["headers"]["x-goog-api-key"] == "test-key-123"
    body = request["body"]
    assert body["systemInstruction"]["parts"] == [{"text": "You revise policies."}]
    assert [(c["role"], c["parts"][0]["text"]) for c in body["contents"]] == [
        ("user", "Hello"), ("model", "Hi."), ("user", "Revise it.")]


def test_base_url_from_environment(monkeypatch):
    with FakeAPI([(200, ok_body("via env"), 0)]) as fake:
        monkeypatch.setenv("POLC_GEMINI_BASE_URL", fake.url)
        reply = GeminiBackend("gemini-test", GeminiConfig(**FAST)).complete(PROMPT)
    assert reply.text == "via env" and len(fake.requests) == 1


def test_429_is_retried_then_succeeds():
    script = [(429, error_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded."), 0),
              (200, ok_body("after backoff"), 0)]
    with FakeAPI(script) as fake:
        reply = backend(fake.url).complete(PROMPT)
    assert reply.text == "after backoff" and len(fake.requests) == 2


def test_500s_until_attempts_run_out():
    script = [(500, error_body(500, "INTERNAL", "An internal error has occurred."), 0)] * 3
    with FakeAPI(script) as fake:
        with pytest.raises(RetriesExhausted, match=r"still answered 500 INTERNAL after 3 attempts"):
            backend(fake.url).complete(PROMPT)
    assert len(fake.requests) == 3


def test_malformed_json_is_a_clear_error():
    with FakeAPI([(200, b"{not json at all", 0)]) as fake:
        with pytest.raises(MalformedReply, match="not a generateContent response"):
            backend(fake.url).complete(PROMPT)


def test_reply_without_text_is_malformed():
    empty = {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "SAFETY"}]}
    with FakeAPI([(200, empty, 0)]) as fake:
        with pytest.raises(MalformedReply, match="no text .finish reason .*SAFETY"):
            backend(fake.url).complete(PROMPT)


def test_connection_refused():
    closed = socket.socket()  # bound, never listening: connections to it are refused
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    try:
        with pytest.raises(ConnectionFailed, match=r"Could not connect to the Gemini API at "
                                                   r"http://127\.0\.0\.1:\d+ .*3 attempts"):
            backend(url).complete(PROMPT)
    finally:
        closed.close()


def test_timeout_is_a_connection_failure():
    with FakeAPI([(200, ok_body(), 2.0)] * 2) as fake:
        with pytest.raises(ConnectionFailed, match=r"did not answer within 0.3 s, 2 attempts"):
            backend(fake.url, timeout=0.3, attempts=2).complete(PROMPT)


@pytest.mark.parametrize("status, body", [
    (400, error_body(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                     "API_KEY_INVALID")),
    (403, error_body(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers.")),
])
def test_bad_key(status, body):
    with FakeAPI([(status, body, 0)]) as fake:
        with pytest.raises(BadKey, match=rf"rejected the API key \({status} .*check GEMINI_API_KEY"):
            backend(fake.url).complete(PROMPT)
    assert len(fake.requests) == 1  # never retried


def test_unknown_model_is_rejected_without_retry():
    body = error_body(404, "NOT_FOUND", "models/gemini-test is not found for API version v1beta")
    with FakeAPI([(404, body, 0)]) as fake:
        with pytest.raises(RequestRejected, match="404 NOT_FOUND: models/gemini-test is not found"):
            backend(fake.url).complete(PROMPT)
    assert len(fake.requests) == 1


def test_missing_key(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(MissingKey, match="set GEMINI_API_KEY"):
        make_backend("gemini:gemini-2.5-flash")


def test_google_api_key_is_accepted(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_API_KEY", "other-key")
    with FakeAPI([(200, ok_body(), 0)]) as fake:
        backend(fake.url).complete(PROMPT)
    assert fake.requests[0]["headers"]["x-goog-api-key"] == "other-key"

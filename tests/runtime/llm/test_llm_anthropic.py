"""The anthropic:MODEL backend end to end: the real anthropic SDK against a fake Messages
server on 127.0.0.1 that the test starts. No request ever leaves this machine."""

from __future__ import annotations

import pytest

from llm_fake_server import FakeAPI
from polc.runtime.llm import (BadKey, ConnectionFailed, MalformedReply, Message, MissingKey, RequestRejected,
                              RetriesExhausted, TimedOut, TimeLimited, make_backend)
from polc.runtime.llm.anthropic_backend import AnthropicBackend, AnthropicConfig, parse_options

PROMPT = [Message("system", "You revise policies."), Message("user", "Hello"),
          Message("model", "Hi."), Message("user", "Revise it.")]


def ok_body(text="latent a = 1", inp=17, out=5, cache_read=None, stop="end_turn", thinking=None):
    usage = {"input_tokens": inp, "output_tokens": out}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    content = [{"type": "thinking", "thinking": "hmm", "signature": "sig"}] if thinking else []
    if text is not None:
        content.append({"type": "text", "text": text})
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "fake", "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": usage}


def error_body(kind, message):
    return {"type": "error", "error": {"type": kind, "message": message}}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


def backend(url, **overrides):
    config = dict(base_url=url, attempts=3, timeout=5.0)
    config.update(overrides)
    return AnthropicBackend("fake", AnthropicConfig(**config))


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_success_system_parameter_and_tokens():
    with FakeAPI([(200, ok_body("revised!", 17, 9, cache_read=6, thinking=True), 0)]) as fake:
        reply = backend(fake.url).complete(PROMPT)
    assert (reply.text, reply.input_tokens, reply.output_tokens, reply.cached_input_tokens) == (
        "revised!", 23, 9, 6)
    [request] = fake.requests
    assert request["path"] == "/v1/messages"
    headers = request["headers"]  # this SDK version sends the key as a bearer token
    assert "sk-ant-test" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    body = request["body"]
    assert body["system"] == "You revise policies." and body["max_tokens"] == 16000
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        ("user", "Hello"), ("assistant", "Hi."), ("user", "Revise it.")]


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_environment_base_url_options_and_missing_key(monkeypatch):
    with FakeAPI([(200, ok_body("via env"), 0)]) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        reply = make_backend("anthropic:fake", timeout=10, options={"max_tokens": "64"}).complete(PROMPT)
    assert reply.text == "via env"
    assert fake.requests[0]["body"]["max_tokens"] == 64
    with pytest.raises(ValueError, match="unknown LLM option 'temperature': use one of max_tokens"):
        parse_options({"temperature": "0"})
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    with pytest.raises(MissingKey, match="set ANTHROPIC_API_KEY"):
        make_backend("anthropic:claude-sonnet-4-5")


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_401_and_404():
    with FakeAPI([(401, error_body("authentication_error", "invalid x-api-key"), 0),
                  (404, error_body("not_found_error", "model: fake"), 0)]) as fake:
        with pytest.raises(BadKey, match=r"rejected the API key \(401: invalid x-api-key\); check ANTHROPIC_API_KEY"):
            backend(fake.url).complete(PROMPT)
        with pytest.raises(RequestRejected, match="does not know the model 'fake' .404: model: fake"):
            backend(fake.url).complete(PROMPT)
    assert len(fake.requests) == 2


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_429_honours_retry_after_and_overloaded_529_is_retried():
    script = [(429, error_body("rate_limit_error", "slow down"), 0, {"Retry-After": "1"}),
              (529, error_body("overloaded_error", "Overloaded"), 0),
              (200, ok_body("at last"), 0)]
    with FakeAPI(script) as fake:
        assert backend(fake.url).complete(PROMPT).text == "at last"
    assert len(fake.requests) == 3 and fake.times[1] - fake.times[0] >= 0.95
    with FakeAPI([(500, error_body("api_error", "Internal"), 0)] * 2) as fake:
        with pytest.raises(RetriesExhausted, match="still answered 500: Internal after 2 attempts"):
            backend(fake.url, attempts=2).complete(PROMPT)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_garbage_empty_and_truncated_replies():
    script = [(200, b"<html>proxy error</html>", 0), (200, ok_body(None), 0),
              (200, ok_body("latent a =", stop="max_tokens"), 0), (200, ok_body(None, stop="refusal"), 0)]
    with FakeAPI(script) as fake:
        b = backend(fake.url)
        with pytest.raises(MalformedReply, match="not a reply its SDK can read"):
            b.complete(PROMPT)
        with pytest.raises(MalformedReply, match="has no text .stop reason 'end_turn'"):
            b.complete(PROMPT)
        with pytest.raises(MalformedReply, match="cut off at its token limit .stop reason \"max_tokens\", 16000"):
            b.complete(PROMPT)
        with pytest.raises(MalformedReply, match="refused to answer"):
            b.complete(PROMPT)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_hang_ends_at_the_attempt_timeout_and_the_call_limit():
    with FakeAPI([(200, ok_body(), 3)] * 3) as fake:
        with pytest.raises(ConnectionFailed, match="did not answer within 0.3 s, 2 attempts"):
            backend(fake.url, timeout=0.3, attempts=2).complete(PROMPT)
        with pytest.raises(TimedOut, match="within 0.5 s"):
            TimeLimited(backend(fake.url, attempts=1), 0.5).complete(PROMPT)

"""The openai:MODEL backend end to end: the real openai SDK against a fake Chat Completions
server on 127.0.0.1 that the test starts. No request ever leaves this machine."""

from __future__ import annotations

import socket

import pytest

from llm_fake_server import FakeAPI
from polc.runtime.llm import (BadKey, ConnectionFailed, MalformedReply, Message, MissingKey, RequestRejected,
                              RetriesExhausted, TimedOut, TimeLimited, UnknownBackend, make_backend)
from polc.runtime.llm.openai_backend import OpenAIBackend, OpenAIConfig, parse_options

PROMPT = [Message("system", "You revise policies."), Message("user", "Hello"),
          Message("model", "Hi."), Message("user", "Revise it.")]


def ok_body(text="latent a = 1", prompt=17, completion=5, reasoning=None, cached=None, finish="stop"):
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish}],
            "usage": usage}


def error_body(message, kind="invalid_request_error", code=None):
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")


def backend(url, **overrides):
    config = dict(base_url=f"{url}/v1", attempts=3, timeout=5.0)
    config.update(overrides)
    return OpenAIBackend("fake", OpenAIConfig(**config))


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_success_maps_roles_and_counts_tokens():
    with FakeAPI([(200, ok_body("revised!", 17, 9, reasoning=4, cached=6), 0)]) as fake:
        reply = backend(fake.url).complete(PROMPT)
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("revised!", 17, 9)
    assert (reply.reasoning_tokens, reply.cached_input_tokens) == (4, 6)
    [request] = fake.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer sk-test-123"
    assert request["body"]["model"] == "fake"
    assert [(m["role"], m["content"]) for m in request["body"]["messages"]] == [
        ("system", "You revise policies."), ("user", "Hello"), ("assistant", "Hi."), ("user", "Revise it.")]


def test_environment_base_url_and_local_server_needs_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with FakeAPI([(200, ok_body("local"), 0)]) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        reply = make_backend("openai:fake", timeout=10).complete(PROMPT)
    assert reply.text == "local" and reply.reasoning_tokens is None


def test_missing_key_for_a_remote_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(MissingKey, match="set OPENAI_API_KEY"):
        make_backend("openai:gpt-5-mini")


def test_options_are_sent_and_bad_ones_refused():
    with FakeAPI([(200, ok_body(), 0)]) as fake:
        OpenAIBackend("fake", OpenAIConfig(base_url=f"{fake.url}/v1", options=parse_options(
            {"seed": "0", "temperature": "0.2", "reasoning_effort": "high"}))).complete(PROMPT)
    body = fake.requests[0]["body"]
    assert (body["seed"], body["temperature"], body["reasoning_effort"]) == (0, 0.2, "high")
    with pytest.raises(ValueError, match="unknown LLM option 'colour'"):
        parse_options({"colour": "red"})
    with pytest.raises(ValueError, match="seed must be int, not 'x'"):
        parse_options({"seed": "x"})
    with pytest.raises(ValueError, match="--llm-option applies to openai"):
        make_backend("gemini:gemini-2.5-flash", options={"seed": "0"})


def test_unknown_spec_lists_the_backends():
    with pytest.raises(UnknownBackend, match="openai:MODEL, anthropic:MODEL"):
        make_backend("openai:")


def test_401_is_a_bad_key_and_not_retried():
    with FakeAPI([(401, error_body("Incorrect API key provided", code="invalid_api_key"), 0)] * 3) as fake:
        with pytest.raises(BadKey, match=r"rejected the API key \(401: Incorrect API key provided\); "
                                         r"check OPENAI_API_KEY"):
            backend(fake.url).complete(PROMPT)
    assert len(fake.requests) == 1


def test_404_names_the_model():
    with FakeAPI([(404, error_body("The model `fake` does not exist", code="model_not_found"), 0)]) as fake:
        with pytest.raises(RequestRejected, match="does not know the model 'fake' .404"):
            backend(fake.url).complete(PROMPT)


def test_429_honours_retry_after_then_succeeds():
    script = [(429, error_body("Rate limit reached", "rate_limit_exceeded"), 0, {"Retry-After": "1"}),
              (200, ok_body("after waiting"), 0)]
    with FakeAPI(script) as fake:
        reply = backend(fake.url).complete(PROMPT)
    assert reply.text == "after waiting" and len(fake.requests) == 2
    assert fake.times[1] - fake.times[0] >= 0.95  # waited the server's second, not the 0.5 s default


def test_500_then_success_and_500s_until_attempts_run_out():
    with FakeAPI([(500, error_body("boom", "server_error"), 0), (200, ok_body("second try"), 0)]) as fake:
        assert backend(fake.url).complete(PROMPT).text == "second try"
    with FakeAPI([(503, error_body("overloaded", "server_error"), 0)] * 2) as fake:
        with pytest.raises(RetriesExhausted, match="still answered 503: overloaded after 2 attempts"):
            backend(fake.url, attempts=2).complete(PROMPT)
    assert len(fake.requests) == 2


def test_garbage_json_is_malformed():
    with FakeAPI([(200, b"{not json at all", 0)]) as fake:
        with pytest.raises(MalformedReply, match="not a reply its SDK can read"):
            backend(fake.url).complete(PROMPT)


def test_empty_choices_and_empty_text_are_malformed():
    with FakeAPI([(200, {**ok_body(), "choices": []}, 0), (200, ok_body(""), 0)]) as fake:
        with pytest.raises(MalformedReply, match="without any choices"):
            backend(fake.url).complete(PROMPT)
        with pytest.raises(MalformedReply, match="has no text .finish reason 'stop'"):
            backend(fake.url).complete(PROMPT)


def test_reply_cut_at_the_token_limit():
    with FakeAPI([(200, ok_body("latent a = ", finish="length"), 0)]) as fake:
        with pytest.raises(MalformedReply, match="cut off at its token limit .finish reason \"length\""):
            backend(fake.url).complete(PROMPT)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_hang_ends_at_the_attempt_timeout_and_the_call_limit():
    with FakeAPI([(200, ok_body(), 3)] * 2) as fake:
        with pytest.raises(ConnectionFailed, match="did not answer within 0.3 s, 2 attempts"):
            backend(fake.url, timeout=0.3, attempts=2).complete(PROMPT)
        fake.script[:] = [(200, ok_body(), 3)]
        with pytest.raises(TimedOut, match="within 0.5 s"):
            TimeLimited(backend(fake.url, attempts=1), 0.5).complete(PROMPT)


def test_connection_refused():
    closed = socket.socket()  # bound, never listening
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    try:
        with pytest.raises(ConnectionFailed, match="Could not connect to the OpenAI API at http://127.0.0.1"):
            backend(url, attempts=1).complete(PROMPT)
    finally:
        closed.close()


# ---- polc refine against the fake server ----

from refine_helpers import ANALYSIS, STOP, fits_once, revise, task  # noqa: E402,F401 - fixtures


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_refine_on_the_toy_task_through_an_openai_compatible_server(task, tmp_path, monkeypatch, capsys):
    import json

    from polc.cli import main

    replies = [ANALYSIS, revise(), ANALYSIS, STOP]
    script = [(200, ok_body(text, prompt=1000 + i, completion=10 + i, reasoning=i), 0)
              for i, text in enumerate(replies)]
    monkeypatch.delenv("OPENAI_API_KEY")  # a local server: no key needed
    run = tmp_path / "run"
    with FakeAPI(script) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        code = main(["refine", str(task), "-o", str(run), "--llm", "openai:fake", "--llm-option", "seed=7",
                     "--quick", "-q"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(fake.requests) == len(replies) and not fake.script
    assert all(r["body"]["model"] == "fake" and r["body"]["seed"] == 7 for r in fake.requests)
    config = json.loads((run / "run.json").read_text())
    assert (config["llm"], config["llm_kind"], config["llm_options"]) == ("openai:fake", "openai", {"seed": "7"})
    summary = json.loads((run / "summary.json").read_text())
    assert summary["llm"] == "openai:fake" and summary["status"] == "the model chose STOP"
    totals = summary["totals"]
    assert (totals["llm_calls"], totals["input_tokens"], totals["output_tokens"]) == (4, 4006, 46)
    assert [(r["llm"]["input_tokens"], r["llm"]["output_tokens"]) for r in summary["rounds"]] == [(2001, 21), (2005, 25)]
    exchanges = [json.loads(line) for line in (run / "exchanges.jsonl").read_text().splitlines()]
    assert [(e["model"], e["input_tokens"], e["output_tokens"]) for e in exchanges] == [
        ("openai:fake", 1000 + i, 10 + i) for i in range(4)]
    assert [e["reply"] for e in exchanges] == replies
    from polc.runtime.refine.entry import _Resuming, _resumed_run

    *_, choice = _resumed_run(_Resuming(resume=str(run)))
    assert (choice.spec, choice.kind, choice.options) == ("openai:fake", "openai", (("seed", "7"),))


def test_refine_refuses_bad_llm_options(task, tmp_path, capsys):
    from polc.cli import main

    for option, message in (("seed", "takes KEY=VALUE"), ("colour=red", "unknown LLM option 'colour'")):
        assert main(["refine", str(task), "-o", str(tmp_path / "r"), "--llm", "openai:fake",
                     "--llm-option", option, "-q"]) == 2
        assert message in capsys.readouterr().err
    assert main(["refine", str(task), "-o", str(tmp_path / "r"), "--llm", "gemini:x", "--llm-option", "seed=0"]) == 2
    assert "applies to --llm openai:MODEL and anthropic:MODEL" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


# ---- polc llm check ----


@pytest.fixture
def polc_with_llm_check(monkeypatch):
    """`polc.cli.main` with `polc llm check` registered (as polc.runtime.commands will)."""
    from polc.cli import main
    from polc.runtime import commands
    from polc.runtime.llm import cli as llm_cli

    register = commands.register
    if "add_llm" not in vars(commands):  # until polc.runtime.commands registers it itself
        monkeypatch.setattr(commands, "register", lambda sub: (register(sub), llm_cli.register(sub)))
    return main


def test_llm_check_reports_ok_and_each_failure(polc_with_llm_check, monkeypatch, capsys):
    main = polc_with_llm_check
    script = [(200, ok_body("ready", prompt=12, completion=3, reasoning=1), 0),
              (401, error_body("Incorrect API key provided", code="invalid_api_key"), 0),
              (404, error_body("The model `nope` does not exist", code="model_not_found"), 0)]
    with FakeAPI(script) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        assert main(["llm", "check", "--llm", "openai:fake", "--llm-option", "seed=1"]) == 0
        out = capsys.readouterr().out
        assert "openai:fake: OK in" in out and "12 input / 3 output tokens, 1 reasoning" in out
        assert "it replied: 'ready'" in out
        assert main(["llm", "check", "--llm", "openai:fake"]) == 1
        assert "rejected the API key (401" in capsys.readouterr().err
        assert main(["llm", "check", "--llm", "openai:nope"]) == 1
        assert "does not know the model 'nope'" in capsys.readouterr().err
    assert fake.requests[0]["body"]["seed"] == 1 and len(fake.requests) == 3
    assert main(["llm", "check", "--llm", "openai:fake", "--llm-option", "colour=red"]) == 2
    assert "unknown LLM option 'colour'" in capsys.readouterr().err
    assert main(["llm", "check", "--llm", "ollama:qwen3"]) == 1
    assert "Unknown LLM backend 'ollama:qwen3'" in capsys.readouterr().err

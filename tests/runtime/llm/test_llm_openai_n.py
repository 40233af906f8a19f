"""Several replies from one request (the Chat Completions `n`, for `--candidates K`): the real
openai SDK against a fake server on 127.0.0.1. The usage is spread over the replies so it
sums to what the server counted; a server that ignores `n` gives one; unusable choices are
dropped; a refusal of `n` makes the caller ask one at a time; a replay gives back the group."""

from __future__ import annotations

import pytest

from llm_fake_server import FakeAPI, chat_choices, chat_completion, chat_tokens
from polc.runtime.llm import (MalformedReply, Message, ReplayBackend, TimeLimited, completes_n, read_exchanges,
                              spread)
from polc.runtime.llm.openai_backend import OpenAIBackend, OpenAIConfig
from polc.runtime.refine.converse import Caller

PROMPT = [Message("system", "You revise policies."), Message("user", "Revise it.")]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")


def backend(url):
    return OpenAIBackend("fake", OpenAIConfig(base_url=f"{url}/v1", attempts=1, timeout=5.0))


def test_spread_sums_to_the_total_in_proportion():
    assert spread(10, [1, 1, 1]) == [4, 3, 3]
    assert spread(100, [30, 10]) == [75, 25]
    assert spread(7, [0, 0]) == [4, 3]
    assert spread(0, [5, 5]) == [0, 0] and spread(5, []) == []
    assert sum(spread(1234, [17, 400, 3])) == 1234


def test_n_choices_from_one_request_share_its_usage():
    body = chat_completion("x", 120, 90)
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 30}
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 20}
    body["choices"] = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                       for i, t in enumerate(["a" * 20, "b" * 10])]
    with FakeAPI([(200, body, 0)]) as fake:
        b = TimeLimited(backend(fake.url), 30)
        assert completes_n(b)
        replies = b.complete_n(PROMPT, 2)
    [request] = fake.requests
    assert request["body"]["n"] == 2
    assert [r.text for r in replies] == ["a" * 20, "b" * 10]
    assert [r.input_tokens for r in replies] == [120, 0]  # the prompt was sent once
    assert [r.output_tokens for r in replies] == [60, 30]  # 90 by the replies' lengths
    assert [r.reasoning_tokens for r in replies] == [20, 10]
    assert [r.cached_input_tokens for r in replies] == [20, 0]


def test_a_server_ignoring_n_gives_one_and_unusable_choices_are_dropped():
    with FakeAPI([(200, chat_completion("only one", 50, 5), 0)]) as fake:
        [reply] = backend(fake.url).complete_n(PROMPT, 3)
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("only one", 50, 5)
    body = chat_completion("x", 50, 40)
    body["choices"] = [{"index": 0, "message": {"role": "assistant", "content": "cut"}, "finish_reason": "length"},
                       {"index": 1, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}]
    with FakeAPI([(200, body, 0)]) as fake:
        [reply] = backend(fake.url).complete_n(PROMPT, 2)
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("whole", 50, 40)  # all tokens stay counted
    body["choices"] = body["choices"][:1]
    with FakeAPI([(200, body, 0)]) as fake:
        with pytest.raises(MalformedReply, match="cut off at its token limit"):
            backend(fake.url).complete_n(PROMPT, 2)


def test_the_caller_records_each_choice_and_a_replay_gives_the_group_back(tmp_path):
    with FakeAPI([chat_choices(["one", "two", "three"])]) as fake:
        call = Caller(TimeLimited(backend(fake.url), 30), tmp_path, 5)
        texts = call.many(PROMPT, 3, ["candidate 2 of 4", "candidate 3 of 4", "candidate 4 of 4"])
    assert texts == ["one", "two", "three"] and len(fake.requests) == 1
    records = read_exchanges(tmp_path / "exchanges.jsonl")
    assert [(r["index"], r["purpose"], r["choice"], r["choices"]) for r in records] == [
        (5, "candidate 2 of 4", 0, 3), (6, "candidate 3 of 4", 1, 3), (7, "candidate 4 of 4", 2, 3)]
    prompt_tokens = sum(chat_tokens(m.text) for m in PROMPT)  # what the fake counted, once
    assert [r["input_tokens"] for r in records] == [prompt_tokens, 0, 0]
    assert sum(r["output_tokens"] for r in records) == sum(chat_tokens(t) for t in texts)
    c = call.counts.to_json()
    assert (c["calls"], c["requests"]) == (3, 1)
    assert c["input_tokens"] == prompt_tokens
    replay = TimeLimited(ReplayBackend(tmp_path), 30)
    again = Caller(replay, tmp_path / "again", 0)
    assert again.many(PROMPT, 3, ["a", "b", "c"]) == texts
    assert again.counts.to_json() == {**c, "seconds": again.counts.to_json()["seconds"]}


@pytest.mark.parametrize("status, message", [(400, "n is not supported"),
                                             (500, "Only one completion choice is allowed")])  # llama.cpp's
def test_a_refusal_of_n_means_one_at_a_time(tmp_path, status, message):
    refusal = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    notices = []
    with FakeAPI([(status, refusal, 0), (200, chat_completion("single", 10, 2), 0)]) as fake:
        b = OpenAIBackend("fake", OpenAIConfig(base_url=f"{fake.url}/v1", attempts=3, timeout=5.0))
        call = Caller(TimeLimited(b, 30), tmp_path, 0, notices.append)
        assert call.many(PROMPT, 2, ["a", "b"]) == []
        assert call.many(PROMPT, 2, ["a", "b"]) == []  # not asked again
        assert call(PROMPT, "a") == "single"
    # the request with n was tried once (no retries of a refusal), then one at a time
    assert len(fake.requests) == 2 and fake.requests[0]["body"]["n"] == 2 and "n" not in fake.requests[1]["body"]
    assert not completes_n(call.backend)
    assert "did not give 2 replies in one request" in notices[0] and message in notices[0]
    assert call.counts.calls == 1 and len(read_exchanges(tmp_path / "exchanges.jsonl")) == 1


def test_a_replay_that_differs_stops_rather_than_asking_one_at_a_time(tmp_path):
    from polc.runtime.llm import ReplayMismatch

    with FakeAPI([chat_choices(["one", "two"])]) as fake:
        Caller(TimeLimited(backend(fake.url), 30), tmp_path, 0).many(PROMPT, 2, ["a", "b"])
    call = Caller(TimeLimited(ReplayBackend(tmp_path), 30), tmp_path / "again", 0)
    with pytest.raises(ReplayMismatch, match="Request 1 differs"):
        call.many([Message("user", "something else")], 2, ["a", "b"])
    assert completes_n(call.backend)  # the mismatch is not taken for a refusal of n

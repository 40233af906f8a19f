"""Recording exchanges and playing them back: deterministic, strict, robust to a torn line."""

from __future__ import annotations

import dataclasses
import json

import pytest

from polc.runtime.llm import (LLMError, Message, RecordingBackend, Reply, ReplayBackend,
                              ReplayMismatch, UnknownBackend, exchange_file, make_backend,
                              read_exchanges)


class Scripted:
    """A stand-in model: answers from a list, counting characters as tokens."""

    name = "scripted:test"

    def __init__(self, answers):
        self.answers = list(answers)

    def complete(self, messages):
        prompt = sum(len(m.text) for m in messages)
        answer = self.answers.pop(0)
        return Reply(answer, prompt, len(answer), 0.25)


def conversation(i):
    return [Message("system", "You write Pol programs."), Message("user", f"Round {i}: revise.\nDetails.")]


def record_session(run_dir, n=3):
    backend = RecordingBackend(Scripted([f"reply {i}" for i in range(n)]), run_dir)
    return [backend.complete(conversation(i)) for i in range(n)]


def test_recording_writes_one_complete_line_per_exchange(tmp_path):
    record_session(tmp_path)
    lines = exchange_file(tmp_path).read_text().splitlines()
    assert len(lines) == 3
    first = json.loads(lines[0])
    assert first["format"] == "polc-llm-exchange/1" and first["index"] == 0
    assert first["model"] == "scripted:test" and first["reply"] == "reply 0"
    assert first["messages"][1] == {"role": "user", "text": "Round 0: revise.\nDetails."}
    assert (first["input_tokens"], first["output_tokens"], first["seconds"]) == (48, 7, 0.25)


def test_replay_plays_back_the_recording_deterministically(tmp_path):
    # A replayed reply names the model that made it (the recording's), so its cost can be priced.
    recorded = [dataclasses.replace(r, model="scripted:test") for r in record_session(tmp_path)]
    for _ in range(2):
        backend = make_backend(f"replay:{tmp_path}")
        assert [backend.complete(conversation(i)) for i in range(3)] == recorded


def test_replay_can_be_recorded_again(tmp_path):
    record_session(tmp_path / "first")
    backend = make_backend(f"replay:{tmp_path / 'first'}", record_dir=tmp_path / "second")
    for i in range(3):
        backend.complete(conversation(i))
    strip = lambda r: {k: v for k, v in r.items() if k not in ("model", "time")}  # noqa: E731
    assert ([strip(r) for r in read_exchanges(tmp_path / "second")]
            == [strip(r) for r in read_exchanges(tmp_path / "first")])


def test_a_different_prompt_is_reported_with_a_diff_and_not_answered(tmp_path):
    record_session(tmp_path)
    backend = ReplayBackend(tmp_path)
    backend.complete(conversation(0))
    changed = [Message("system", "You write Pol programs."), Message("user", "Round 1: rewrite.\nDetails.")]
    with pytest.raises(ReplayMismatch) as info:
        backend.complete(changed)
    text = str(info.value)
    assert text.startswith("Request 2 differs from the prompt recorded in ")
    assert "-Round 1: revise." in text and "+Round 1: rewrite." in text
    assert " Details." in text  # context line
    assert backend.position == 1  # still expecting request 2
    assert backend.complete(conversation(1)).text == "reply 1"


def test_asking_for_more_than_was_recorded(tmp_path):
    record_session(tmp_path, n=1)
    backend = ReplayBackend(tmp_path)
    backend.complete(conversation(0))
    with pytest.raises(ReplayMismatch, match="has 1 exchanges, and request 2 asks for one more"):
        backend.complete(conversation(1))


def test_resuming_part_way(tmp_path):
    record_session(tmp_path)
    assert ReplayBackend(tmp_path, start=2).complete(conversation(2)).text == "reply 2"


def test_a_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path):
    record_session(tmp_path, n=2)
    file = exchange_file(tmp_path)
    whole = file.read_bytes()
    file.write_bytes(whole + b'{"format": "polc-llm-exchange/1", "index": 2, "mod')  # kill -9 mid-write
    assert [r["reply"] for r in read_exchanges(tmp_path)] == ["reply 0", "reply 1"]
    resumed = RecordingBackend(Scripted(["reply 2"]), tmp_path)
    assert resumed.count == 2
    resumed.complete(conversation(2))
    assert file.read_bytes().startswith(whole)
    assert [r["index"] for r in read_exchanges(tmp_path)] == [0, 1, 2]


def test_damage_before_the_last_line_is_an_error(tmp_path):
    record_session(tmp_path, n=3)
    file = exchange_file(tmp_path)
    lines = file.read_bytes().split(b"\n")
    lines[1] = lines[1][:20]
    file.write_bytes(b"\n".join(lines))
    with pytest.raises(LLMError, match="damaged at line 2"):
        read_exchanges(tmp_path)


def test_missing_recording(tmp_path):
    with pytest.raises(LLMError, match="no recorded exchange file at"):
        make_backend(f"replay:{tmp_path / 'nothing'}")


@pytest.mark.parametrize("spec", ["gpt:4", "gemini:", "replay", ""])
def test_unknown_backend_spec(spec):
    with pytest.raises(UnknownBackend, match="use gemini:MODEL"):
        make_backend(spec)


def test_message_roles_are_checked():
    with pytest.raises(ValueError, match="role must be one of"):
        Message("assistant", "hi")


@pytest.mark.parametrize("edit, problem", [
    (lambda r: r.update(messages="hello"), '"messages" is not a list of'),
    (lambda r: r["messages"][0].update(role="assistant"), '"messages" is not a list of'),
    (lambda r: r.update(reply=None), '"reply" is not a string'),
    (lambda r: r.pop("input_tokens"), '"input_tokens" is not a count of tokens'),
    (lambda r: r.update(output_tokens="12"), '"output_tokens" is not a count of tokens'),
    (lambda r: r.update(seconds=float("nan")), '"seconds" is not a number of seconds'),
])
def test_a_record_that_cannot_be_played_back_is_a_clear_error(tmp_path, edit, problem):
    record_session(tmp_path, n=2)
    file = exchange_file(tmp_path)
    lines = file.read_text().splitlines()
    first = json.loads(lines[0])
    edit(first)
    file.write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    with pytest.raises(LLMError, match=rf"Line 1 of .* is not a usable polc-llm-exchange/1 record: {problem}"):
        make_backend(f"replay:{tmp_path}")


def test_a_deeply_nested_line_is_damage_not_a_crash(tmp_path):
    record_session(tmp_path, n=2)
    file = exchange_file(tmp_path)
    lines = file.read_text().splitlines()
    file.write_text("[" * 100_000 + "]" * 100_000 + "\n" + lines[1] + "\n")
    with pytest.raises(LLMError, match="damaged at line 1"):
        read_exchanges(tmp_path)


def test_reasoning_and_cached_token_counts_are_recorded_and_replayed(tmp_path):
    class Thinking(Scripted):
        def complete(self, messages):
            reply = super().complete(messages)
            return Reply(reply.text, reply.input_tokens, reply.output_tokens, reply.seconds, 5, 32)

    recorded = RecordingBackend(Thinking(["an answer"]), tmp_path).complete(conversation(0))
    (line,) = exchange_file(tmp_path).read_text().splitlines()
    assert (json.loads(line)["reasoning_tokens"], json.loads(line)["cached_input_tokens"]) == (5, 32)
    replayed = make_backend(f"replay:{tmp_path}").complete(conversation(0))
    assert replayed == dataclasses.replace(recorded, model="scripted:test")
    record_session(tmp_path / "plain", 1)  # a provider that does not count them writes neither key
    assert "reasoning_tokens" not in exchange_file(tmp_path / "plain").read_text()

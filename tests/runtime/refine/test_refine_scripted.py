"""Which model answers a run, the scripted (position-matched) replay that reports every prompt
difference, and the bundled Car Racing session end to end with --quick."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polc.runtime.llm import LLMError, Message, ReplayBackend, ReplayMismatch, append_exchange
from polc.runtime.refine.converse import Caller
from polc.runtime.refine.scripted import (DEFAULT_MODEL, ManualBackend, ScriptedBackend, WaitingForReply,
                                          choose)
from refine_helpers import BUNDLED_CAR_RACING

ROOT = Path(__file__).resolve().parents[3]


def record(path: Path, prompts_and_replies) -> None:
    for i, (prompt, reply) in enumerate(prompts_and_replies):
        append_exchange(path, {"index": i, "model": "manual:x", "messages": [{"role": "user", "text": prompt}],
                               "reply": reply, "input_tokens": 10 + i, "output_tokens": 3, "seconds": 0.0})


def test_scripted_replay_answers_by_position_and_reports_differences(tmp_path):
    record(tmp_path, [("fit loss 0.123\nrest", "A"), ("second", "B")])
    backend = ScriptedBackend(tmp_path)
    reply = backend.complete([Message("user", "fit loss 0.123\nrest")])
    assert (reply.text, reply.input_tokens, backend.last_mismatch) == ("A", 10, None)
    reply = backend.complete([Message("user", "another prompt")])
    assert reply.text == "B" and "-second" in backend.last_mismatch and "+another prompt" in backend.last_mismatch
    with pytest.raises(ReplayMismatch, match="has 2 replies, and request 3 asks for one more"):
        backend.complete([Message("user", "third")])


def test_a_strict_replay_refuses_a_different_prompt(tmp_path):
    record(tmp_path, [("fit loss 0.123", "A")])
    with pytest.raises(ReplayMismatch, match="differs from the prompt recorded"):
        ReplayBackend(tmp_path).complete([Message("user", "fit loss 0.124")])


def test_the_caller_saves_each_difference_and_says_so(tmp_path):
    record(tmp_path / "rec", [("recorded", "A")])
    notices = []
    call = Caller(ScriptedBackend(tmp_path / "rec"), tmp_path, 7, notices.append)
    assert call([Message("user", "sent")], "analysis code") == "A"
    diff = tmp_path / "prompt-mismatch-007.diff"
    assert "-recorded" in diff.read_text() and "+sent" in diff.read_text()
    assert notices == [f"request 8 (analysis code) differs from the scripted recording; answered by position "
                       f"anyway (diff: {diff})"]
    assert call.counts.mismatches == 1 and json.loads((tmp_path / "exchanges.jsonl").read_text())["index"] == 7


def test_a_manual_session_saves_the_prompt_and_waits(tmp_path):
    backend = ManualBackend(tmp_path, start=3)
    with pytest.raises(WaitingForReply, match="Request 4 is waiting for a reply"):
        backend.complete([Message("user", "what now?")])
    assert "what now?" in (tmp_path / "prompts" / "003.md").read_text()
    (tmp_path / "replies").mkdir()
    (tmp_path / "replies" / "003.md").write_text("MOVE: STOP")
    assert backend.complete([Message("user", "what now?")]).text == "MOVE: STOP"


@pytest.fixture
def no_key(monkeypatch):
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def test_without_a_key_the_bundled_session_is_chosen(no_key, tmp_path):
    choice = choose(None, ROOT / "examples" / "car_racing")
    assert choice.scripted and choice.source.endswith("examples/car_racing/session")
    with pytest.raises(LLMError, match="No LLM: set GEMINI_API_KEY"):
        choose(None, tmp_path)


def test_a_key_selects_gemini_and_llm_wins(no_key, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-not-used")
    assert choose(None, ROOT / "examples" / "car_racing").spec == f"gemini:{DEFAULT_MODEL}"
    assert choose("replay:runs/x", ".").kind == "replay"
    with pytest.raises(LLMError, match="Unknown LLM backend 'gpt:4'"):
        choose("gpt:4", ".")


def test_the_scripted_session_refuses_another_feedback_mode(no_key, tmp_path, capsys):
    from polc.cli import main

    code = main(["refine", str(ROOT / "examples" / "car_racing"), "--feedback", "table", "-o", str(tmp_path / "r")])
    assert code == 2
    assert "was recorded with --feedback analysis; --feedback table needs a real model" in capsys.readouterr().err


@pytest.mark.slow
@BUNDLED_CAR_RACING
def test_the_bundled_session_end_to_end_quick(bundled_car_racing_quick):
    """The README's main command, with --quick: real analyses, checks, fits, rollouts, evaluation."""
    run, proc, summary = bundled_car_racing_quick
    rounds = summary["rounds"]
    assert [m["round"] for m in rounds] == [0, 1, 2] and rounds[-1]["final"]
    assert [m["move"]["kind"] for m in rounds[:2]] == ["REVISE", "REVISE"]
    assert rounds[1]["llm"]["repairs"] == 1 and rounds[1]["tests"] == 1
    assert all(len(m["eval"]["returns"]) == 3 for m in rounds)
    assert all(m["eval"]["metric"] == "return" and m["eval"]["scores"] == m["eval"]["returns"] for m in rounds)
    assert "return (mean ± std)" in proc.stdout
    # quick settings change the prompts: every difference is reported (replay_bundled_session), none silently
    assert summary["totals"]["prompt_mismatches"] > 0
    assert len((run / "exchanges.jsonl").read_text().splitlines()) == 6

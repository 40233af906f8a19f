"""A model reply's size is capped (issue 34, item 8): an over-long reply is recorded cut, sent
back as unusable with the reason, and the retry repeats only its beginning; a normal
conversation is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polc.cli import main
from polc.runtime.llm import Message
from polc.runtime.refine import replies
from polc.runtime.refine.converse import Caller, ask
from polc.runtime.refine.work import Settings
from refine_helpers import STOP, FakeModel

CAR_RACING = str(Path(__file__).resolve().parents[3] / "examples" / "car_racing")
HUGE = "MOVE: STOP\n" + "the trace, pasted back: 0.123 0.456\n" * 300_000  # about 10.8 MB


def _ask(tmp_path, answers, limit=replies.DEFAULT_MAX_REPLY_CHARS):
    model = FakeModel(answers)
    call = Caller(model, tmp_path, 0, max_reply_chars=limit)
    move, messages = ask(call, [Message("user", "Choose a move.")], replies.parse_move, "move",
                         "Reply with one MOVE line.", retries=1)
    return model, call, move, messages


def test_a_huge_reply_is_cut_refused_with_the_reason_and_not_repeated(tmp_path):
    model, call, move, messages = _ask(tmp_path, [HUGE, STOP])
    assert move.kind == "STOP" and call.counts.reply_retries == 1
    retry = model.prompts[1]
    assert sum(len(m.text) for m in retry) < 4000  # not 10 MB again
    assert retry[1].text.startswith("MOVE: STOP\nthe trace") and "is not repeated]" in retry[1].text
    assert "longer than the limit of 100000 characters on a reply, so polc did not read it" in retry[2].text
    first = json.loads((tmp_path / "exchanges.jsonl").read_text().splitlines()[0])
    assert first["reply_chars"] == len(HUGE)
    assert first["reply"] == HUGE[:100_000] + replies.CUT_MARK.format(limit=100_000)
    assert (tmp_path / "exchanges.jsonl").stat().st_size < 300_000
    assert (tmp_path / "conversation.md").stat().st_size < 300_000


def test_a_cut_reply_replays_the_same(tmp_path):
    once = replies.cut_reply(HUGE, 5000)
    assert replies.cut_reply(once, 5000) == once  # a replayed record is cut to the same text
    with pytest.raises(replies.ReplyError, match="longer than the limit of 5000 characters"):
        replies.verify_size(once, 5000)


def test_a_reply_under_the_limit_goes_back_whole(tmp_path):
    model, call, move, _ = _ask(tmp_path, ["no move here", STOP], limit=1000)
    assert move.kind == "STOP" and model.prompts[1][1].text == "no move here"
    assert "reply_chars" not in (tmp_path / "exchanges.jsonl").read_text()


def test_the_limit_is_a_setting_with_a_floor(capsys):
    assert Settings().max_reply_chars == 100_000 and Settings(max_reply_chars=5000).max_reply_chars == 5000
    assert main(["refine", CAR_RACING, "--max-reply-chars", "10"]) == 2
    assert "polc: --max-reply-chars must be at least 1000, not 10." in capsys.readouterr().err


def test_an_over_long_candidate_revision_is_not_a_candidate(tmp_path):
    from types import SimpleNamespace

    from polc.runtime.refine.candidates.revise import Population
    from refine_helpers import revise

    model = FakeModel([revise() + "x" * 5000])
    ctx = SimpleNamespace(ui=SimpleNamespace(phase=lambda k, what: None), settings=None,
                          run=SimpleNamespace(round_dir=lambda k: tmp_path))
    p = Population(ctx, 0, Caller(model, tmp_path, 0, max_reply_chars=1000), None, [],
                   [Message("user", "Choose a move.")])
    move, conversation, problem = p._ask(2, 2)
    assert move is None and problem.startswith("unusable reply: it is longer than the limit of 1000 characters")
    assert len(conversation[-1].text) < 1200

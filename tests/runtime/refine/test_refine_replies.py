"""Reading model replies: code fences with and without tags, prose around them, several
blocks, bare code, the move keyword, and garbage (a ReplyError that goes back to the model)."""

from __future__ import annotations

import pytest

from polc.runtime.refine.replies import (Block, ReplyError, blocks, parse_analysis, parse_move,
                                         parse_program, prose, summary)

PROGRAM = """policy p "x"
obs speed : real in [0, 1.5]
weight k : real >= 0 = 1
action gas : real in [0, 1] = clip(k * speed, 0, 1)
"""
CODE = "import numpy as np\n\n\ndef analyze(df):\n    print(len(df))\n"


def fence(tag: str, body: str, mark: str = "```") -> str:
    return f"{mark}{tag}\n{body.rstrip()}\n{mark}\n"


def test_blocks_with_and_without_tags_and_tildes():
    text = ("Intro.\n" + fence("python", CODE) + "middle\n" + fence("", PROGRAM) + fence("Pol", PROGRAM, "~~~")
            + fence("text", "just output"))
    found = blocks(text)
    assert [b.kind for b in found] == ["python", "pol", "pol", "other"]
    assert found[0].text == CODE.rstrip("\n")
    assert prose(text) == "Intro.\n\nmiddle"


def test_an_unclosed_last_fence_runs_to_the_end():
    assert blocks("Here:\n```pol\n" + PROGRAM) == [Block("pol", PROGRAM.rstrip("\n"))]


def test_a_longer_fence_may_contain_a_shorter_one():
    body = "text with\n```\ninner\n```\nend"
    assert blocks("````markdown\n" + body + "\n````\n") == [Block("markdown", body)]


def test_analysis_code_among_prose():
    text = "I will count the steps.\n\n" + fence("python", CODE) + "\nThat should tell us the length."
    assert parse_analysis(text) == CODE


def test_analysis_helpers_in_separate_blocks_are_joined():
    helper = "def arr(df, col):\n    return df[col]\n"
    text = fence("python", helper) + "and the entry point:\n" + fence("py", CODE)
    code = parse_analysis(text)
    assert code.startswith("def arr") and "def analyze(df)" in code


def test_a_draft_and_a_final_analysis_keep_the_last():
    final = CODE.replace("len(df)", "df.shape")
    assert parse_analysis(fence("python", CODE) + "Better:\n" + fence("python", final)) == final


def test_bare_analysis_code_without_a_fence():
    assert parse_analysis(CODE) == CODE


def test_analysis_without_analyze_is_refused():
    with pytest.raises(ReplyError, match=r"does not define the entry function `analyze\(df\)`"):
        parse_analysis(fence("python", "print(1)"))


@pytest.mark.parametrize("garbage", ["", "I am not sure what to do.", "```\n\n```", "<html>500</html>",
                                     fence("json", '{"a": 1}')])
def test_garbage_gives_a_reason_for_the_model(garbage):
    with pytest.raises(ReplyError, match="no ```python block"):
        parse_analysis(garbage)
    with pytest.raises(ReplyError, match="no ```pol block"):
        parse_program(garbage)


def test_program_untagged_fence_and_bare_text():
    assert parse_program("Here it is:\n" + fence("", PROGRAM)) == PROGRAM
    assert parse_program("Sure, here is the program.\n\n" + PROGRAM) == PROGRAM


def test_program_fragment_is_refused():
    with pytest.raises(ReplyError, match="not a complete program"):
        parse_program(fence("pol", "latent x = speed * 2"))


def test_program_picks_the_complete_block_and_the_last_version():
    snippet = fence("pol", "latent slip = relu(speed)")
    second = PROGRAM.replace("= 1\n", "= 2\n")
    assert parse_program("The key line:\n" + snippet + "The whole program:\n" + fence("pol", PROGRAM)) == PROGRAM
    assert parse_program(fence("pol", PROGRAM) + "On reflection:\n" + fence("pol", second)) == second


@pytest.mark.parametrize("line", ["MOVE: REVISE", "**MOVE:** REVISE", "Move - revise", "MOVE = `REVISE`",
                                  "REVISE", "## REVISE"])
def test_move_keyword_spellings(line):
    move = parse_move(f"{line}\n\nThe lookahead is too short.\n" + fence("pol", PROGRAM))
    assert move.kind == "REVISE" and move.pol == PROGRAM
    assert "lookahead" in move.prose and not move.notes


def test_test_move_carries_code_and_stop_needs_nothing():
    move = parse_move("MOVE: TEST\nI need the spin ratio.\n" + fence("python", CODE))
    assert (move.kind, move.code) == ("TEST", CODE)
    stop = parse_move("Everything holds.\n\nMOVE: STOP\n")
    assert stop.kind == "STOP" and stop.pol is None and stop.code is None


def test_a_move_word_inside_prose_or_code_is_not_a_move():
    text = "We should not stop yet; I revise the test of slip.\n" + fence("pol", PROGRAM)
    move = parse_move(text)  # no MOVE line: the lone pol block decides
    assert move.kind == "REVISE" and move.notes


def test_move_inferred_from_a_lone_python_block():
    assert parse_move(fence("python", CODE)).kind == "TEST"


def test_two_moves_are_refused():
    with pytest.raises(ReplyError, match="more than one move"):
        parse_move("MOVE: TEST\n...\nMOVE: STOP")


def test_a_move_that_is_not_allowed_is_refused():
    with pytest.raises(ReplyError, match="MOVE: TEST is not available here"):
        parse_move("MOVE: TEST\n" + fence("python", CODE), allowed=("REVISE", "STOP"))


def test_no_move_at_all_is_refused_with_the_spelling():
    with pytest.raises(ReplyError, match="names no move; write one line `MOVE: REVISE`"):
        parse_move("I think things look fine overall.")


def test_revise_without_a_program_is_refused():
    with pytest.raises(ReplyError, match="no ```pol block"):
        parse_move("MOVE: REVISE\nI would lower the gain.")


def test_summary_is_one_line_cut_at_a_sentence_or_word():
    words = "First finding here. " * 10 + "A very long tail " * 40
    s = summary("MOVE: REVISE\n\n" + words, limit=100)
    assert "\n" not in s and "MOVE" not in s and len(s) <= 100 and s.endswith(".")
    s = summary("word " * 200, limit=50)
    assert s.endswith(" ...") and not s.startswith(" ")

"""The task's success rate beside the metric wherever the loop shows the metric (issue 37,
item 6): metrics.json's `eval`, the per-round table, the console line and the HTML report.
The door's metric saturates at the geometric floor, so only its success flag tells rounds apart."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from polc.runtime.envs.metric import RETURN
from polc.runtime.refine import scores
from polc.runtime.refine.report import Progress, table_text


def door_round(k: int, mean: float, successes: list[bool]) -> dict:
    ev = SimpleNamespace(seeds=list(range(10000, 10000 + len(successes))), returns=[1.0] * len(successes),
                         mean=mean, std=0.0, values=[mean] * len(successes),
                         successes=np.asarray(successes), success_rate=float(np.mean(successes)), solved_at=None)
    return {"round": k, "policy_name": "door", "structure_sha256": "abcdef0", "resets": 2, "seconds": 60.0,
            "llm": {"calls": 2, "input_tokens": 1000, "output_tokens": 100}, "move": {"kind": "REVISE"},
            "eval": scores.eval_json(ev, RETURN)}


def test_eval_json_keeps_the_success_flags_and_rate():
    ev = door_round(0, 0.0223, [True] * 9 + [False])["eval"]
    assert ev["success_rate"] == 0.9 and ev["successes"] == [True] * 9 + [False]
    assert scores.success_cell(ev) == "0.90 (9 of 10)"


def test_the_table_shows_the_success_rate_beside_the_metric():
    lines = table_text([door_round(0, 0.0223, [False] * 10), door_round(1, 0.0223, [True] * 10)]).splitlines()
    assert lines[0].split()[:4] == ["round", "structure", "return", "(mean"]
    assert "success rate" in lines[0] and lines[0].index("return") < lines[0].index("success rate")
    assert "0.00 (0 of 10)" in lines[2] and "1.00 (10 of 10)" in lines[3]


def test_a_task_scored_by_solved_share_shows_it_and_one_with_neither_shows_no_column():
    ev = SimpleNamespace(seeds=[1, 2], returns=[950.0, 850.0], mean=900.0, std=50.0, values=[950.0, 850.0],
                         successes=None, solved_at=900.0, solved_share=0.5)
    m = dict(door_round(0, 0, [True]), eval=scores.eval_json(ev, RETURN))
    assert "solved (score >= 900)" in table_text([m]).splitlines()[0]
    assert scores.success_text(m["eval"]) == ", solved (score >= 900) 0.50 (1 of 2)"
    plain = dict(m, eval={k: v for k, v in m["eval"].items() if k not in ("solved_at", "solved_share")})
    assert "solved" not in table_text([plain]) and "success" not in table_text([plain])


def test_the_console_line_says_the_success_rate(capsys):
    ui = Progress(quiet=False)
    ui.round_done(door_round(1, 0.0223, [True] * 10), None)
    out = capsys.readouterr().err
    assert "over 10 unseen seeds, success 1.00 (10 of 10)," in out.replace("\n", " ")


def test_quiet_scores_withholds_the_unseen_score_and_success_from_the_console(capsys):
    """`--quiet-scores` (issue 37, item 10): a blind manual session sees nothing the model may not."""
    history = [door_round(0, 0.5444, [False] * 10), door_round(1, 0.0223, [True] * 10)]
    ui = Progress(quiet=False, withhold_scores=True)
    ui.round_done(history[1], None)
    err = capsys.readouterr().err.replace("\n", " ")
    assert "round 1 done: unseen-seed score withheld (--quiet-scores), 2 LLM call(s)" in err
    assert "0.0223" not in err and "success" not in err
    table = table_text(history, RETURN, withhold_scores=True)
    assert table.splitlines()[0].split()[:4] == ["round", "structure", "LLM", "calls"]
    assert "0.5444" not in table and "success" not in table and "10 of 10" not in table
    assert table.splitlines()[-1].split() == ["total", "4", "2,000", "200", "4", "2:00"]


def test_polc_refine_takes_quiet_scores():
    import argparse

    from polc.runtime.refine.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["refine", "examples/door", "--quiet-scores"]).quiet_scores is True
    assert parser.parse_args(["refine", "examples/door"]).quiet_scores is False


def test_the_html_report_shows_the_success_rate_in_its_table_and_each_rounds_numbers():
    from polc.runtime.report.run import _numbers, _table

    history = [door_round(0, 0.5444, [False] * 10), door_round(1, 0.0223, [True] * 10)]
    run = SimpleNamespace(rounds=[SimpleNamespace(metrics=m) for m in history], metric=RETURN)
    table = _table(run)
    assert "success rate" in table and "1.00 (10 of 10)" in table and "0.00 (0 of 10)" in table
    assert ", success 1.00 (10 of 10)" in _numbers(SimpleNamespace(metrics=history[1]), RETURN)


def test_the_prompts_per_seed_scores_carry_the_envs_success_flags():
    door = SimpleNamespace(is_return=False, name="min handle-to-target distance", unit="m",
                           direction="lower is better")
    text = scores.per_seed_text([1, 2], [761.6, 1505.0], [0.5423, 0.0223], door, [False, True])
    assert text == ("min handle-to-target distance 0.5423 m on seed 1, 0.0223 m on seed 2 (lower is better; "
                    "returns 761.6, 1505.0; the environment reports success on seed 2 only)")
    assert scores.per_seed_text([1, 2], [1.0, 2.0], [0.1, 0.1], door, [True, True]).endswith(
        "; the environment reports success on every seed)")
    assert scores.per_seed_text([1], [900.0], None, RETURN, [False]) == \
        "return 900.0 on seed 1 (the environment reports success on no seed)"
    assert "success" not in scores.per_seed_text([1], [900.0], None, RETURN)

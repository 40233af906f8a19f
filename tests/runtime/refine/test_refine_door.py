"""The refine loop scored by an environment's own metric (the door's min handle-to-target
distance, lower is better) instead of the return, and the door's bundled scripted session:
its task header, its hand-written revisions (each passes `polc check --env door`), and the
session end to end with --quick."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from refine_helpers import ROOT, replay_bundled_session

from polc.runtime.envs.metric import RETURN, Metric
from polc.runtime.trace.evaluate import EvalResult
from polc.runtime.llm import read_exchanges
from polc.runtime.refine import context, replies, scores
from polc.runtime.refine.record import Round
from polc.runtime.task import load_task
from polc.runtime.refine.report import table_text
from polc.runtime.refine.work import check

DOOR = ROOT / "examples" / "door"
# the door's metric as runtime/envs/door.py declares it (without importing metaworld here)
DISTANCE = Metric("min handle-to-target distance", "min_handle_to_target", False, "|handle - goal|, m",
                  per_step=lambda c: np.zeros(1), reduce="min", unit="m")


def round_metrics(k: int, mean: float, std: float, move: str = "REVISE") -> dict:
    return {"round": k, "policy_name": "door_open", "structure_sha256": "ab" * 32, "final": False,
            "llm": {"calls": 2, "input_tokens": 1000, "output_tokens": 100}, "resets": 2, "seconds": 30.0,
            "move": {"kind": move}, "eval": {"mean": mean, "std": std, "seeds": [10000, 10001]}}


# ---- metric-aware formatting -------------------------------------------------------------


def test_a_return_reads_as_it_always_did():
    assert scores.score_text(612.34, 80.06, RETURN) == "return 612.3 ± 80.1"
    assert scores.column(RETURN) == "return (mean ± std)"
    assert context.returns_text([1, 2], [938.06, 255.0]) == "return 938.1 on seed 1, 255.0 on seed 2"
    assert context.returns_text([1, 2], [938.06, 255.0], [938.06, 255.0], RETURN) == \
        "return 938.1 on seed 1, 255.0 on seed 2"


def test_another_metric_carries_its_name_unit_and_direction():
    assert scores.score_text(0.11334, 0.18456, DISTANCE) == \
        "min handle-to-target distance 0.1133 ± 0.1846 m (lower is better)"
    assert scores.column(DISTANCE) == "min handle-to-target distance, m (mean ± std, lower is better)"
    shown = context.returns_text([1, 2], [3319.04, 1101.8], [0.02234, 0.5475], DISTANCE)
    assert shown == ("min handle-to-target distance 0.0223 m on seed 1, 0.5475 m on seed 2 "
                     "(lower is better; returns 3319.0, 1101.8)")


def test_the_history_shows_each_traced_episodes_metric():
    m = dict(round_metrics(0, 0.54, 0.01), rollout_seeds=[1, 2], rollout_returns=[1509.8, 744.1],
             rollout_scores=[0.5337, 0.5432])
    text = context.history([Round.from_json(m)], "analysis", DISTANCE, "door configuration")
    assert ("min handle-to-target distance 0.5337 m on seed 1, 0.5432 m on seed 2 (lower is better; returns "
            "1509.8, 744.1) on the training door configuration(s); your move: REVISE") in text
    assert "return 1509.8 on seed 1" in context.history([Round.from_json(m)], "analysis")  # a return-scored run
    assert "1509.8" not in context.history([Round.from_json(m)], "none", DISTANCE)  # no execution feedback at all


def test_the_best_round_respects_the_direction():
    history = [round_metrics(0, 0.54, 0.01), round_metrics(1, 0.11, 0.18), round_metrics(2, 0.30, 0.1)]
    assert scores.best(history, DISTANCE)["round"] == 1
    assert scores.best(history, RETURN)["round"] == 0
    assert scores.best([{"round": 0}], DISTANCE) is None


def test_eval_json_keeps_mean_and_std_as_the_metrics_and_adds_the_scores():
    result = EvalResult("door", np.array([10000, 10001]), np.array([3351.94, 1102.2]), np.array([500, 500]),
                        np.array([0.02234, 0.54751]), DISTANCE)
    ev = scores.eval_json(result, DISTANCE)
    assert ev == {"seeds": [10000, 10001], "returns": [3351.94, 1102.2], "mean": 0.2849, "std": 0.2626,
                  "metric": "min_handle_to_target", "higher_is_better": False, "scores": [0.0223, 0.5475]}
    ret = EvalResult("car_racing", np.array([1, 2]), np.array([900.123, 700.0]), np.array([900, 1000]))
    assert scores.eval_json(ret, RETURN) == {"seeds": [1, 2], "returns": [900.12, 700.0], "mean": 800.06,
                                             "std": 100.06, "metric": "return", "higher_is_better": True,
                                             "scores": [900.12, 700.0]}


def test_the_table_is_headed_by_the_metric():
    history = [round_metrics(0, 0.5414, 0.0057), round_metrics(1, 0.0223, 0.0, "STOP")]
    lines = table_text(history, DISTANCE).splitlines()
    assert "min handle-to-target distance, m (mean ± std, lower is better)" in lines[0]
    assert "0.5414 ± 0.0057" in lines[2] and "0.0223 ± 0.0000" in lines[3]
    assert "return" not in table_text(history, DISTANCE)
    assert "return (mean ± std)" in table_text(history)


def test_the_analysis_request_shows_an_array_column_of_this_trace():
    class Col:
        def __init__(self, shape):
            self.shape = shape

    assert context.array_example({"step": Col(()), "obs.hand": Col((3,))}) == \
        '`np.stack(df["obs.hand"].to_numpy()).reshape(-1, 3)`'
    assert context.array_example({"obs.tiles": Col((12, 4))}) == \
        '`np.stack(df["obs.tiles"].to_numpy()).reshape(-1, 12, 4)`'


# ---- the door task and its session ------------------------------------------------------------


def test_the_door_task_header():
    task = load_task(str(DOOR))
    assert (task.env, task.instance, task.demo.name, task.initial.name) == \
        ("door", "door configuration", "demo.parquet", "initial.pol")
    assert task.latents == ("xy_dist", "z_dist", "aligned")
    assert "Lower is better" in task.text and not task.text.startswith("---")
    assert load_task(str(ROOT / "examples" / "car_racing")).instance == "track"  # its header (the default is "seed")


def test_every_revision_of_the_door_session_passes_polc_check():
    records = read_exchanges(DOOR / "session" / "exchanges.jsonl")
    session = json.loads((DOOR / "session" / "session.json").read_text())
    assert session["feedback"] == "analysis" and len(records) == 4
    for k, record in enumerate(records):
        assert record["reply"] == (DOOR / "session" / "replies" / f"{k:03d}.md").read_text()
    moves = [replies.parse_move(r["reply"], ("REVISE", "TEST", "STOP")) for r in records
             if r["purpose"] == "move"]
    assert [m.kind for m in moves] == ["REVISE", "STOP"]
    revised = [m.pol for m in moves if m.kind == "REVISE"]
    for text in revised:
        result = check(text, "next.pol", "door")
        assert result.program is not None and result.errors == 0, result.report
    assert [check(t, "next.pol", "door").program.typed.name for t in revised] == ["door_push"]
    for r in records:
        if r["purpose"] == "analysis code":
            assert "def analyze(df)" in replies.parse_analysis(r["reply"])


@pytest.mark.slow
def test_the_door_session_end_to_end_quick(tmp_path):
    """`polc refine examples/door --quick` with no key: the scripted replies drive real fits,
    rollouts, sandboxed analyses and evaluations, scored by the door's distance."""
    run = tmp_path / "run"
    proc, summary = replay_bundled_session("door", run, "--quick")
    assert summary["env"] == "door"
    assert summary["metric"]["key"] == "min_handle_to_target" and summary["metric"]["direction"] == "lower is better"
    rounds = summary["rounds"]
    assert [m["round"] for m in rounds] == [0, 1] and rounds[-1]["end"] == "the model chose STOP"
    assert [m["move"]["kind"] for m in rounds] == ["REVISE", "STOP"] and rounds[1]["tests"] == 0
    for m in rounds:
        on_disk = json.loads((run / f"round_{m['round']:02d}" / "metrics.json").read_text())
        ev = on_disk["eval"]
        assert {"seeds", "returns", "mean", "std", "metric", "higher_is_better", "scores"} <= set(ev)
        assert ev["metric"] == "min_handle_to_target" and ev["higher_is_better"] is False
        assert len(ev["scores"]) == len(ev["returns"]) == len(ev["seeds"]) == 3
        assert ev["mean"] == pytest.approx(np.mean(ev["scores"]), abs=1e-4)
        assert all(0 <= s < 0.6 for s in ev["scores"])  # metres: a shut door reads about 0.55
        assert len(on_disk["rollout_scores"]) == len(on_disk["rollout_returns"]) == 1
        assert all(a["ok"] for a in on_disk.get("analyses", []))
    for k in (0,):  # the revision the run made passes polc check --env door
        assert check((run / f"round_{k:02d}" / "next.pol").read_text(), "next.pol", "door").program is not None
    assert summary["best_round"] == min(rounds, key=lambda m: m["eval"]["mean"])["round"]
    assert "min handle-to-target distance, m (mean ± std, lower is better)" in proc.stdout
    assert "(lower is better)" in proc.stderr and "min handle-to-target distance" in proc.stderr
    prompt = (run / "exchanges.jsonl").read_text()
    assert "training door configuration(s)" in prompt and 'df[\\"obs.hand\\"]' in prompt
    assert len(prompt.splitlines()) == 4


def test_summary_and_figure_of_a_distance_scored_run(tmp_path):
    from polc.runtime.refine.report import figure_returns, write_summary
    from polc.runtime.refine.rundir import RunDir

    run = RunDir.create(tmp_path / "run", {"task": "examples/door", "env": "door", "llm": "scripted:x",
                                           "settings": {}})
    history = [round_metrics(0, 0.5414, 0.0057), round_metrics(1, 0.0223, 0.0, "STOP")]
    for m, values in zip(history, ([0.5466, 0.5362], [0.0223, 0.0223])):
        m["eval"].update(scores=values, returns=[750.0, 790.0], metric="min_handle_to_target",
                         higher_is_better=False)
    summary = write_summary(run, history, "the model chose STOP", None, DISTANCE)
    assert summary["best_round"] == 1 and summary["metric"]["direction"] == "lower is better"
    assert "min handle-to-target distance, m" in summary["returns"] and "lower is better" in summary["table"][0]
    assert json.loads((run.path / "summary.json").read_text())["metric"]["key"] == "min_handle_to_target"
    png = figure_returns(history, str(run.path / "returns.png"), "door: distance per round", DISTANCE)
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

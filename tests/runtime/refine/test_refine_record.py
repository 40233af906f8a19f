"""The typed round record (`refine.record.Round`) and the library entry point
(`refine.entry.start` / `resume`): metrics.json keeps its keys, values and order, and a run
written before the record existed (tests/data/refine_run_v1, made by polc at e14a8b5)
resumes and reports unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from refine_helpers import ANALYSIS, STOP

from polc.runtime.envs import toy
from polc.runtime.refine.record import Round

OLD_RUN = Path(__file__).resolve().parents[2] / "data" / "refine_run_v1"


def test_a_round_record_reads_and_writes_metrics_json_unchanged():
    text = (OLD_RUN / "run" / "round_00" / "metrics.json").read_text()
    m = Round.from_json(json.loads(text))
    assert (m.round, m.final, m.move_kind, m.next_policy, m.tests) == (0, False, "REVISE", "reach2", 0)
    assert json.dumps(m.to_json(), indent=1, ensure_ascii=False) + "\n" == text  # same keys, values, order


def test_unknown_keys_are_kept_and_a_stop_ends_last():
    m = Round.from_json({"round": 3, "final": False, "phases": {}, "from_a_newer_polc": [1],
                         "move": {"kind": "STOP"}, "end": "the model chose STOP", "llm": {"calls": 1}, "seconds": 2.0})
    assert list(m.to_json()) == ["round", "final", "phases", "move", "llm", "seconds", "end", "from_a_newer_polc"]
    assert Round(1, True, end="the last revision was fitted and evaluated", llm={"calls": 0}).to_json() == \
        {"round": 1, "final": True, "phases": {}, "end": "the last revision was fitted and evaluated",
         "llm": {"calls": 0}}
    with pytest.raises(ValueError, match="integer round"):
        Round.from_json({"final": False})


@pytest.mark.slow  # a round of the toy task: a fit, a rollout, an analysis in the sandbox
def test_a_run_written_before_the_record_resumes_and_reports(tmp_path, monkeypatch):
    from polc.cli import main
    from polc.runtime.refine.entry import Overrides, resume

    toy.register()
    shutil.copytree(OLD_RUN, tmp_path / "fx")
    monkeypatch.chdir(tmp_path / "fx")  # run.json names the task and the session relative to here
    before = Path("run/round_00/metrics.json").read_bytes()
    Path("session/replies/002.md").write_text(ANALYSIS)
    Path("session/replies/003.md").write_text(STOP)
    outcome = resume("run", Overrides(quiet=True))
    assert outcome.code == 0, outcome.stderr
    assert [(m.round, m.move_kind) for m in outcome.history] == [(0, "REVISE"), (1, "STOP")]
    assert outcome.status == "the model chose STOP" and outcome.run == Path("run")
    assert Path("run/round_00/metrics.json").read_bytes() == before
    summary = json.loads(Path("run/summary.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1] and summary["status"] == "the model chose STOP"
    assert any(line.startswith("final policy: run/round_01/policy.pol") for line in outcome.stdout)
    assert main(["report", "run", "-o", "report.html"]) == 0 and "reach2" in Path("report.html").read_text()


def test_the_ray_address_comes_from_the_settings_not_the_environment(monkeypatch):
    """$POLC_RAY_ADDRESS is read where the command's flags are (cli.py), into Settings.ray_address:
    a population scored with settings that name no cluster stays in this process."""
    import polc
    from polc.runtime.cluster.flags import ENV
    from polc.runtime.refine.candidates import Candidate, evaluate_candidates
    from polc.runtime.refine.work import FitFailed, Settings

    def unfittable(program, demo, settings):
        raise FitFailed("the loss is not finite")

    monkeypatch.setenv(ENV, "ray://127.0.0.1:9")  # nothing listens there
    program = polc.loads(toy.reach_policy(kp=0.3, kd=0.1, std=0.3), "reach.pol")
    population = [Candidate(1, "", program), Candidate(2, "", program)]
    scores = evaluate_candidates(population, None, None, [0], Settings(), unfittable)
    assert [(s.index, s.verdict) for s in scores] == [(1, "unfittable: the loss is not finite"),
                                                      (2, "unfittable: the loss is not finite")]
    assert Settings(ray_address="auto").to_json() == Settings().to_json()  # never saved in run.json
    assert "ray_address" not in Settings().to_json()


def test_start_says_why_a_task_folder_cannot_be_used_in_its_outcome(tmp_path):
    """The library returns what `polc refine` prints and exits with; it prints nothing itself."""
    from polc.runtime.refine.entry import Request, start

    outcome = start(Request(str(tmp_path / "nothing"), output=str(tmp_path / "run")))
    assert (outcome.code, outcome.stdout, outcome.history) == (1, [], [])
    assert outcome.stderr == [f"polc: {tmp_path / 'nothing'} has no task.md (the task description the model reads)."]
    assert not (tmp_path / "run").exists()

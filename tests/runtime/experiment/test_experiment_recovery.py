"""`polc experiment --recovery`: an IL row fitted with and without recovery laps, the better
on training seeds kept and named in its note (the toy point-mass task: its PD expert records
the laps in milliseconds; the fit step alone, no refinement and no RL)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from refine_helpers import make_task

from polc.runtime.experiment.plan import QUICK, Budget, Structure, Task
from polc.runtime.experiment.run import Experiment, _kept, _recovery_demos
from polc.runtime.io.table import read_table

INITIAL = Structure("initial", "Initial structure", "initial.pol")


@pytest.mark.slow  # two fits and their closed-loop scores on the toy task
def test_an_il_fit_with_recovery_laps_keeps_the_better_and_says_which(tmp_path):
    folder = make_task(tmp_path / "task")
    toy = Task("toy", "toy_reach", str(folder), (INITIAL,), rl=False, figure="-")
    budget = replace(QUICK, max_steps=None, recovery="push=0.5")
    exp = Experiment(toy, budget, str(tmp_path / "out"), progress=False, skip_rl=True, folder=str(folder))
    result = exp._fit(INITIAL, {})
    rec = result["fit"]["recovery"]
    laps = read_table(str(tmp_path / "out" / "recovery.parquet"))
    assert laps.metadata["seeds"] == read_table(str(folder / "demo.parquet")).metadata["seeds"]
    assert laps.metadata["perturb"] == {"sigma": {"push": 0.5}, "noise_seed": 0}
    assert rec["demos"] == ["recovery.parquet"] and rec["laps"] == 3 and len(rec["seeds"]) == budget.il_check
    assert not set(rec["seeds"]) & set(laps.metadata["seeds"])  # training seeds outside the demonstration's
    assert rec[rec["kept"]] == max(rec["clean"], rec["with_recovery"])  # the toy's return: higher is better
    params = json.loads((tmp_path / "out" / result["params"]).read_text())
    assert params["fit"]["recovery"] == rec
    note = _kept(result, {}, False)
    which = "with" if rec["kept"] == "with_recovery" else "without"
    assert f"fitted {which} the recovery laps recovery.parquet (--perturb push=0.5): " in note
    assert _recovery_demos(result, {}, False) == (3 if rec["kept"] == "with_recovery" else 0)


def test_the_budget_saves_recovery_only_when_given():
    assert "recovery" not in Budget().to_json()  # experiment.json of a run without it is as before
    assert Budget(recovery="steer=0.3").to_json()["recovery"] == "steer=0.3"


def test_a_recovery_naming_no_action_is_a_usage_error(capsys):
    from polc.cli import main

    assert main(["experiment", "door", "--recovery", "steer=0.3", "-o", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err
    assert "--recovery steer=0.3: --perturb takes SIGMA or NAME=SIGMA,...; 'steer' is not an action" in err

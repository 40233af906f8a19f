"""The stock-task examples (examples/pendulum, mountain_car, lunar_lander,
double_pendulum): each structure and its MLP baseline check against the gymnasium
env, a short demo from the example's expert, a fit and a 3-seed eval run through
polc. The 100-seed numbers are in each README, with the commands that produced them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toy_cli import polc

ROOT = Path(__file__).resolve().parents[3] / "examples"
TASKS = ["pendulum", "mountain_car", "lunar_lander", "double_pendulum"]


@pytest.mark.parametrize("task", TASKS)
def test_the_example_structures_check_against_their_env(task, capsys):
    d = ROOT / task
    for pol in ("initial.pol", "mlp.pol"):
        code, _, err = polc(capsys, "check", "--env", str(d / "env.toml"), str(d / pol))
        assert code == 0 and "0 warnings" in err


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_demo_fit_and_eval_of_each_example(task, tmp_path, capsys):
    d = ROOT / task
    demo, params = str(tmp_path / "demo.parquet"), str(tmp_path / "fit.params")
    code, _, err = polc(capsys, "demos", str(d / "env.toml"), "--expert", f"{d / 'expert.py'}:act", "-o", demo, "-q")
    assert code == 0 and "1 episode(s)" in err
    code, _, _ = polc(capsys, "fit", str(d / "initial.pol"), "--demos", demo, "-o", params, "--epochs", "30",
                      "--restarts", "1", "--check-episodes", "0", "-q")
    assert code == 0 and json.loads(Path(params).read_text())["fit"]["rows_train"] > 0
    code, out, _ = polc(capsys, "eval", str(d / "initial.pol"), "--params", params, "--env", str(d / "env.toml"),
                        "--seeds", "3", "--json")
    assert code == 0 and len(json.loads(out)["per_seed"]) == 3

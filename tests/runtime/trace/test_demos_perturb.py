"""`polc demos --perturb`: DART recovery data on the toy point mass. The
environment is stepped with the expert's action plus noise, the table records
the expert's own (corrective) action beside the executed one, and `polc fit`
imitates the recorded actions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polc.runtime.envs import toy
from polc.runtime.io.table import read_table
from polc.runtime.trace.demos import parse_perturb
from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)


def _pd(pos, vel, target):
    return np.clip(toy.KP * (target - pos) - toy.KD * vel, -1.0, 1.0)


@pytest.fixture
def perturbed(tmp_path, capsys):
    path = str(tmp_path / "dart.parquet")
    code, _, err = polc(capsys, "demos", "toy_reach", "--episodes", "4", "--perturb", "0.5", "-o", path, "-q")
    assert code == 0 and "perturbed expert return" in err
    return read_table(path)


def test_the_table_records_the_experts_action_and_the_executed_one(perturbed):
    t = perturbed
    assert t.metadata["perturb"] == {"sigma": {"push": 0.5}, "noise_seed": 0}
    assert "--perturb 0.5" in t.metadata["command"]
    recorded, executed = t.column("action.push"), t.column("executed.push")
    # recorded: what the expert does in the state it saw (the PD law on the observation)
    expert = _pd(t.column("obs.pos"), t.column("obs.vel"), t.column("obs.target"))
    np.testing.assert_allclose(recorded, expert, atol=1e-5)
    # executed: the expert's action plus noise of about the asked std, inside the action's range
    noise = executed - recorded
    assert np.all(executed >= -1.0) and np.all(executed <= 1.0)
    inside = np.abs(executed) < 1.0  # clipping shrinks the noise at the bounds
    assert 0.35 < float(np.std(noise[inside])) < 0.65
    # the environment moved by the executed action, not the recorded one
    ep, pos, vel = t.column("episode"), t.column("obs.pos"), t.column("obs.vel")
    same = ep[1:] == ep[:-1]
    v_next = vel[:-1] + toy.DT * (toy.GAIN * executed[:-1] - toy.DRAG * vel[:-1])
    np.testing.assert_allclose(vel[1:][same], v_next[same], atol=1e-4)
    assert np.abs(noise).max() > 0.1 and pos.std() > 0


def test_perturbed_demonstrations_are_deterministic_by_seed_and_noise_seed(tmp_path, capsys, perturbed):
    again, other = str(tmp_path / "again.parquet"), str(tmp_path / "other.parquet")
    assert polc(capsys, "demos", "toy_reach", "--episodes", "4", "--perturb", "0.5", "-o", again, "-q")[0] == 0
    assert polc(capsys, "demos", "toy_reach", "--episodes", "4", "--perturb", "push=0.5", "--noise-seed", "1",
                "-o", other, "-q")[0] == 0
    np.testing.assert_array_equal(read_table(again).column("executed.push"), perturbed.column("executed.push"))
    assert not np.array_equal(read_table(other).column("executed.push")[:50],
                              perturbed.column("executed.push")[:50])


def test_a_clean_demonstration_has_no_executed_columns(tmp_path, capsys):
    path = str(tmp_path / "clean.parquet")
    assert polc(capsys, "demos", "toy_reach", "--episodes", "1", "-o", path, "-q")[0] == 0
    t = read_table(path)
    assert not t.names("executed") and "perturb" not in t.metadata


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_fit_imitates_the_recorded_actions_of_a_perturbed_demonstration(tmp_path, pol, capsys, perturbed):
    params = str(tmp_path / "fit.params")
    code, _, _ = polc(capsys, "fit", pol, "--demos", perturbed.path, "-o", params, "--epochs", "300",
                      "--restarts", "1", "--lr", "0.05", "--prior-scale", "inf", "--check-episodes", "0", "-q")
    w = json.loads(Path(params).read_text())["weights"]
    # the expert's gains (fitting the executed actions would give a noise std near 0.5 instead)
    assert code == 0 and w["kp"] == pytest.approx(toy.KP, rel=0.1) and w["kd"] == pytest.approx(toy.KD, rel=0.15)
    assert w["s"] < 0.05


@pytest.mark.parametrize("text, message", [
    ("big", "'big' is not a number"),
    ("-0.1", "must be finite and >= 0"),
    ("pull=0.1", "'pull' is not an action of the environment (its actions: push)"),
    ("push=0.1,push=0.2", "gives the action 'push' twice"),
])
def test_bad_perturb_values_are_usage_errors(tmp_path, capsys, text, message):
    code, _, err = polc(capsys, "demos", "toy_reach", "--perturb", text, "-o", str(tmp_path / "x.parquet"))
    assert code == 2 and message in err
    assert not (tmp_path / "x.parquet").exists()


def test_parse_perturb_names_only_some_actions():
    p = parse_perturb("steer=0.3, gas=0", ["steer", "gas", "brake"])
    assert dict(p.sigma) == {"steer": 0.3, "gas": 0.0}


def test_car_racing_perturbs_only_the_named_actions(tmp_path, capsys):
    path = str(tmp_path / "car.parquet")
    code, _, err = polc(capsys, "demos", "car_racing", "--perturb", "steer=0.3", "-o", path, "-q")
    assert code == 0 and "perturbed expert return" in err
    t = read_table(path)
    assert t.metadata["perturb"]["sigma"] == {"steer": 0.3}
    steer, executed = t.column("action.steer"), t.column("executed.steer")
    assert np.all(np.abs(executed) <= 1.0) and 0.2 < float(np.std(executed - steer)) < 0.4
    for name in ("gas", "brake"):  # not named: executed as the expert chose
        np.testing.assert_array_equal(t.column(f"executed.{name}"), t.column(f"action.{name}"))


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_fit_takes_a_clean_and_a_recovery_demonstration_together(tmp_path, pol, capsys, perturbed):
    """`polc fit --demos clean.parquet dart.parquet`: every row of both, episodes kept apart."""
    clean, params = str(tmp_path / "clean.parquet"), str(tmp_path / "fit.params")
    assert polc(capsys, "demos", "toy_reach", "--episodes", "1", "--seed", "7", "-o", clean, "-q")[0] == 0
    code, _, err = polc(capsys, "fit", pol, "--demos", clean, perturbed.path, "-o", params, "--epochs", "3",
                        "--restarts", "1", "--check-episodes", "0", "-q")
    fit = json.loads(Path(params).read_text())["fit"]
    assert code == 0, err
    assert fit["rows_train"] + fit["rows_val"] == read_table(clean).num_rows + perturbed.num_rows
    assert fit["demos"] == [clean, perturbed.path]


def test_concat_demos_renumbers_episodes_and_used_seeds_unites_the_tables():
    from polc.runtime.il.recovery import concat_demos, used_seeds
    from polc.runtime.il.train import Demos

    a = Demos({"x": np.zeros((3, 2))}, {"u": np.zeros(3)}, np.array([5, 5, 9]))
    b = Demos({"x": np.ones((2, 2))}, {"u": np.ones(2)}, np.array([0, 0]))
    both = concat_demos([a, b])
    assert both.episode.tolist() == [0, 0, 1, 2, 2] and both.obs["x"].shape == (5, 2)
    assert both.actions["u"].tolist() == [0, 0, 0, 1, 1]
    assert used_seeds([{"seeds": [0, 1]}, {"seeds": [1, 3]}, {}]) == [0, 1, 3]

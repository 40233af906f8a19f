"""`polc rl` through `polc` itself on the toy environment: a run, its outputs, the
params loading in `polc eval` and `polc rollout` unchanged, --resume, and the
errors (a policy without noise, a directory holding a run, clashing settings)."""

from __future__ import annotations

import json

import pytest

from polc.runtime.envs import toy
from polc.runtime.io.table import read_table
from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)


def rl(capsys, pol, out, *extra):
    return polc(capsys, "rl", pol, "--env", "toy_reach", "-o", out, "--n-envs", "1", "--episodes-per-update", "4",
                "-q", *extra)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_rl_writes_params_log_curve_that_eval_and_rollout_load(tmp_path, pol, capsys):
    out = str(tmp_path / "run")
    code, _, err = rl(capsys, pol, out, "--resets", "10", "--lr", "0.05")
    assert code == 0 and "2 updates, 8 resets" in err
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    assert log["resets"] == 8 and log["config"]["lr"] == 0.05 and log["config"]["gamma"] == 0.98
    assert [r["resets"] for r in log["log"]] == [4, 8] and log["start_params"]["file"] is None
    assert (tmp_path / "run" / "curve.png").read_bytes()[:4] == b"\x89PNG"
    params = json.loads((tmp_path / "run" / "rl.params").read_text())
    assert params["fit"]["method"] == "rl" and params["fit"]["resets"] == 8

    code, out_text, _ = polc(capsys, "eval", pol, "--params", f"{out}/rl.params", "--env", "toy_reach", "--seeds",
                             "3", "--n-envs", "1", "--json", "-q")
    assert code == 0 and json.loads(out_text)["episodes"] == 3
    trace = str(tmp_path / "trace.parquet")
    code, _, _ = polc(capsys, "rollout", pol, "--params", f"{out}/rl.params", "--env", "toy_reach", "--episodes",
                      "1", "--n-envs", "1", "-o", trace, "-q")
    assert code == 0
    kp = read_table(trace).column("weight.kp")
    assert float(kp[0]) == pytest.approx(params["weights"]["kp"], rel=1e-6)
    # the built-in diagnostics read an RL policy's trace like any other
    code, report, _ = polc(capsys, "analyze", trace, "--policy", pol)
    assert code == 0 and "Diagnostics of policy" in report and "weights from the trace's weight columns" in report


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_resume_extends_the_budget_and_refuses_other_settings(tmp_path, pol, capsys):
    out = str(tmp_path / "run")
    assert rl(capsys, pol, out, "--resets", "4")[0] == 0
    code, _, err = rl(capsys, pol, out, "--resets", "8")
    assert code == 1 and "already holds an RL run" in err and "--resume" in err
    code, _, err = rl(capsys, pol, out, "--resets", "8", "--resume", "--lr", "0.1")
    assert code == 2 and "--lr 0.1 (the run used 0.007)" in err
    code, _, err = rl(capsys, pol, out, "--resets", "8", "--resume")
    assert code == 0 and "2 updates, 8 resets" in err


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_resume_without_a_run_starts_one(tmp_path, pol, capsys):
    code, _, err = rl(capsys, pol, str(tmp_path / "new"), "--resets", "4", "--resume")
    assert code == 0 and "no run to resume" in err and "1 update, 4 resets" in err


def test_a_policy_without_noise_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "plain.pol"
    path.write_text(toy.reach_policy().replace(" ~ normal(std = s)", ""))
    code, _, err = rl(capsys, str(path), str(tmp_path / "run"), "--resets", "4")
    assert code == 1
    assert 'action "push" has no noise' in err and "~ normal(std = s_push)" in err
    assert not (tmp_path / "run").exists()


def test_bad_settings_are_usage_errors(tmp_path, pol, capsys):
    code, _, err = rl(capsys, pol, str(tmp_path / "run"), "--resets", "4", "--minibatches", "3")
    assert code == 2 and "minibatches (3) must divide episodes_per_update (4)" in err
    code, _, err = rl(capsys, pol, str(tmp_path / "run"), "--resets", "4", "--clip", "1.5")
    assert code == 2 and "clip must lie in (0, 1)" in err


@pytest.mark.parametrize("command", ["rl", "eval", "rollout", "fit", "refine", "generate"])
def test_help_says_env_takes_a_name_a_gym_id_or_an_env_toml(command, capsys):
    """`--env` (or eval's and rollout's ENV) resolves through one registry that takes all three."""
    from polc.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "environment: a name (car_racing), gym:ID (any gymnasium id), or the path of an env.toml" in text

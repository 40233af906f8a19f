"""The runtime commands through `polc` itself, on the toy environment: the
whole demos -> fit -> rollout -> eval -> plot path, exit codes, messages
without tracebacks, and a rollout stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polc.runtime.envs import toy
from polc.runtime.io.table import read_table
from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_demos_fit_rollout_eval_plot(tmp_path, pol, capsys):
    demos, params, trace = (str(tmp_path / n) for n in ("demos.parquet", "fit.params", "trace.parquet"))
    code, _, err = polc(capsys, "demos", "toy_reach", "--episodes", "6", "--seed", "3", "-o", demos, "-q")
    assert code == 0 and "wrote" in err and "6 episode(s), 300 steps" in err
    table = read_table(demos)
    assert table.metadata["seeds"] == [3, 4, 5, 6, 7, 8] and table.metadata["env"]["id"] == toy.ENV_ID
    assert "polc demos toy_reach --episodes 6 --seed 3" in table.metadata["command"]

    code, _, err = polc(capsys, "fit", pol, "--demos", demos, "-o", params, "--epochs", "300", "--restarts", "1",
                        "--lr", "0.05", "-q")
    assert code == 0 and "gaussian_nll validation" in err
    fitted = json.loads(Path(params).read_text())
    assert fitted["weights"]["kp"] == pytest.approx(toy.KP, rel=0.1)  # the expert's gains
    assert fitted["fit"]["demos"] == demos

    code, _, err = polc(capsys, "rollout", pol, "--params", params, "--env", "toy_reach", "--episodes", "3",
                        "--n-envs", "1", "-o", trace, "-q")
    assert code == 0 and "3 episode(s), 150 steps" in err
    t = read_table(trace)
    assert t.metadata["kind"] == "trace" and t.metadata["seeds"] == [0, 1, 2] and t.metadata["seed_kind"] == "training"
    assert t.metadata["policy"]["source"] == Path(pol).read_text() and len(t.metadata["policy"]["sha256"]) == 64
    assert t.metadata["params"]["file"] == params and len(t.metadata["params"]["sha256"]) == 64
    assert t.metadata["env"] == {"name": "toy_reach", "id": toy.ENV_ID, "version": "1", "max_steps": 50}
    assert t.metadata["polc_version"] and t.complete
    assert {"latent.err", "latent.far", "weight.kp", "mean.push", "action.push"} <= set(t.columns)
    assert float(t.column("weight.kp")[0]) == pytest.approx(fitted["weights"]["kp"])

    code, out, _ = polc(capsys, "eval", pol, "--params", params, "--env", "toy_reach", "--seeds", "3", "--json",
                        "--n-envs", "1")
    result = json.loads(out)
    assert code == 0 and [r["seed"] for r in result["per_seed"]] == [10_000, 10_001, 10_002]

    code, out, _ = polc(capsys, "eval", pol, "--params", params, "--env", "toy_reach", "--seeds", "2", "-q")
    assert code == 0 and "10001" in out and "toy_reach: return" in out

    code, _, err = polc(capsys, "plot", trace, "latent.err", "action.push")
    assert code == 0 and os.path.exists(str(tmp_path / "trace.latent.err-action.push.png"))


def test_eval_of_the_expert(capsys):
    code, out, _ = polc(capsys, "eval", "--expert", "--env", "toy_reach", "--seeds", "2", "--json")
    result = json.loads(out)
    assert code == 0 and result["policy"] == "expert" and [r["seed"] for r in result["per_seed"]] == [10_000, 10_001]


def test_rollout_without_params_runs_the_declared_weights(tmp_path, pol, capsys):
    trace = str(tmp_path / "t.parquet")
    code, _, _ = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "1", "--seed", "5", "-o", trace,
                      "-q")
    t = read_table(trace)
    assert code == 0 and t.metadata["params"]["file"] is None and t.metadata["seeds"] == [5]
    assert float(t.column("weight.kp")[0]) == pytest.approx(0.3)


@pytest.mark.parametrize("argv, code, message", [
    (["demos", "nowhere", "-o", "x.parquet"], 2, 'unknown environment "nowhere"; known: car_racing'),
    (["demos", "toy_reach", "--seed", "999", "--episodes", "2", "-o", "x.parquet"], 2,
     "demonstration seeds must lie in 0..999"),
    (["eval", "{pol}", "--env", "toy_reach", "--seed-start", "5"], 2, "overlap the demonstration seeds"),
    (["eval", "{pol}", "--env", "toy_reach", "--params", "missing.params"], 2, "cannot read 'missing.params'"),
    (["plot", "missing.parquet", "x"], 2, "cannot read 'missing.parquet': no such file"),
    (["eval", "--env", "toy_reach"], 2, "eval takes a .pol FILE, or --expert"),
    (["eval", "{pol}", "--expert", "--env", "toy_reach"], 2, "eval takes a .pol FILE, or --expert"),
])
def test_usage_errors(tmp_path, pol, capsys, monkeypatch, argv, code, message):
    monkeypatch.chdir(tmp_path)
    got, _, err = polc(capsys, *[a.replace("{pol}", pol) for a in argv])
    assert got == code and message in err


def test_corrupt_table_is_a_clear_error(tmp_path, pol, capsys):
    bad = tmp_path / "demos.parquet"
    bad.write_bytes(b"PAR1 this is not really parquet")
    code, _, err = polc(capsys, "fit", pol, "--demos", str(bad), "-o", str(tmp_path / "f.params"))
    assert code == 2 and "is not a readable Parquet table" in err
    code, _, err = polc(capsys, "plot", str(bad), "reward")
    assert code == 2 and "is not a readable Parquet table" in err


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_params_of_another_structure_are_refused(tmp_path, pol, capsys):
    params = tmp_path / "p.params"
    other = tmp_path / "other.pol"
    other.write_text(toy.reach_policy().replace("kp * err", "kp * err * err"))
    demos = str(tmp_path / "d.parquet")
    assert polc(capsys, "demos", "toy_reach", "--episodes", "1", "-o", demos, "-q")[0] == 0
    assert polc(capsys, "fit", str(other), "--demos", demos, "-o", str(params), "--epochs", "2", "-q")[0] == 0
    code, _, err = polc(capsys, "eval", pol, "--params", str(params), "--env", "toy_reach", "--seeds", "1")
    assert code == 1 and 'action "push" changed' in err and "Refit with `polc fit`" in err


def test_demonstration_without_the_policys_observations_fails_clearly(tmp_path, capsys):
    demos = str(tmp_path / "d.parquet")
    assert polc(capsys, "demos", "toy_reach", "--episodes", "1", "-o", demos, "-q")[0] == 0
    pol = tmp_path / "p.pol"
    pol.write_text(toy.reach_policy().replace("obs vel :", "obs speed :").replace("kd * vel", "kd * speed"))
    code, _, err = polc(capsys, "fit", str(pol), "--demos", demos, "-o", str(tmp_path / "f.params"), "-q")
    assert code == 1 and 'no column "obs.speed"' in err and not (tmp_path / "f.params").exists()


@pytest.mark.slow
def test_sigterm_keeps_finished_episodes_and_no_file_under_the_final_name(tmp_path, pol):
    trace = tmp_path / "trace.parquet"
    script = ("import sys; from polc.runtime.envs import toy; toy.register(); from polc.cli import main; "
              f"sys.exit(main(['rollout', {pol!r}, '--env', 'toy_reach', '--episodes', '100000', '--n-envs', '1', "
              f"'-o', {str(trace)!r}, '-q']))")
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the temporary file holds a few finished episodes
        tmp = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        if tmp and tmp[0].stat().st_size > 20_000:
            break
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err
    assert "finished episode(s) are in" in err and "trace.partial.parquet" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reach.pol", "trace.partial.parquet"]
    partial = read_table(str(tmp_path / "trace.partial.parquet"))
    assert partial.complete is False and len(partial.episodes) >= 3
    assert list(partial.episodes) == list(range(len(partial.episodes)))
    assert all(len(partial.column("step")[partial.column("episode") == e]) == 50 for e in partial.episodes)


def test_registering_the_commands_imports_nothing_heavy():
    # Every `polc` run (`polc check` included) builds the parser, which registers these commands.
    code = ("import sys, polc.cli; polc.cli.build_parser(); "
            "print(sorted(m for m in ('jax', 'numpy', 'pyarrow', 'gymnasium') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

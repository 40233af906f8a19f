"""`polc analyze` through `polc` itself, on traces of the toy environment: the report as
text and JSON, the policy recorded in the trace, user analysis code in the sandbox, and
bad inputs that exit 1 with one sentence instead of a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polc.cli import main
from polc.runtime.envs import registry, toy


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A policy, its demonstration, and a trace of it (written by `polc rollout`)."""
    registry._REGISTRY.setdefault(toy.NAME, toy.SPEC)
    d = tmp_path_factory.mktemp("analyze")
    pol, other = d / "reach.pol", d / "other.pol"
    pol.write_text(toy.reach_policy(kp=0.3, kd=0.1, std=0.3))
    other.write_text(toy.reach_policy(name="other").replace("latent far", "latent distant").replace(
        '"more than half a unit away"', '"far"'))
    demo, trace = str(d / "demo.parquet"), str(d / "trace.parquet")
    assert main(["demos", "toy_reach", "--episodes", "3", "-o", demo, "-q"]) == 0
    assert main(["rollout", str(pol), "--env", "toy_reach", "--episodes", "2", "--n-envs", "1", "-o", trace, "-q"]) == 0
    return {"pol": str(pol), "other": str(other), "demo": demo, "trace": trace, "dir": d}


def polc(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_the_report_as_text(files, capsys):
    code, out, _ = polc(capsys, "analyze", files["trace"], "--policy", files["pol"], "--demo", files["demo"])
    assert code == 0
    assert out.startswith(f"Diagnostics of policy reach on {files['trace']}: 2 episodes, 100 steps; weights from the "
                          f"trace's weight columns; demonstration {files['demo']} (150 steps).")
    assert "statistics over 100 steps:" in out and "Passed:" in out and len(out) < 4000


def test_the_policy_recorded_in_the_trace_is_the_default(files, capsys):
    code, out, _ = polc(capsys, "analyze", files["trace"])
    assert code == 0 and out.startswith("Diagnostics of policy reach on ")


def test_json_and_all_list_every_finding(files, capsys):
    code, out, _ = polc(capsys, "analyze", files["trace"], "--policy", files["pol"], "--json")
    report = json.loads(out)
    assert code == 0 and set(report) == {"header", "counts", "findings", "data"}
    assert sum(report["counts"].values()) == len(report["findings"])
    assert {f["check"] for f in report["findings"]} >= {"weights", "reconstruction", "latents"}
    assert report["data"]["latent_stats"]["err"]["nonfinite"] == 0
    code, text, _ = polc(capsys, "analyze", files["trace"], "--policy", files["pol"], "--all")
    assert code == 0 and all(f["message"] in text for f in report["findings"] if f["check"] != "latents")


def test_actions_executed_are_checked_against_the_means(files, capsys):
    """`polc rollout` without --sample records actions = means; the check says so when they agree."""
    code, out, _ = polc(capsys, "analyze", files["trace"], "--policy", files["pol"], "--json")
    messages = [f["message"] for f in json.loads(out)["findings"] if f["check"] == "reconstruction"]
    assert any(m.startswith("mean.push matches its recomputation from the logged observations and weights")
               for m in messages) and not any("action.push differs" in m for m in messages)


def one_sentence(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("polc: ") and lines[0].endswith("."), err
    return lines[0]


def test_bad_inputs_exit_1_with_one_sentence(files, capsys):
    corrupt = files["dir"] / "corrupt.parquet"
    corrupt.write_bytes(Path(files["trace"]).read_bytes()[:500])
    code, _, err = polc(capsys, "analyze", corrupt, "--policy", files["pol"])
    assert code == 1 and "is not a readable Parquet table" in one_sentence(err)

    code, _, err = polc(capsys, "analyze", files["trace"], "--policy", files["other"])
    assert code == 1 and one_sentence(err) == (
        f"polc: The trace {files['trace']} does not belong to policy other: it has no column latent.distant "
        f"(was it made by another version of the policy?).")

    code, _, err = polc(capsys, "analyze", files["demo"], "--policy", files["pol"])
    assert code == 1 and "it is a demonstration table, not a rollout trace of policy reach" in one_sentence(err)

    code, _, err = polc(capsys, "analyze", files["dir"] / "missing.parquet", "--policy", files["pol"])
    assert code == 1 and one_sentence(err).endswith("missing.parquet': no such file.")

    params = files["dir"] / "p.params"
    params.write_text('{"weights": {}}')
    code, _, err = polc(capsys, "analyze", files["trace"], "--policy", files["pol"], "--params", params)
    assert code == 1 and "is not a polc params file" in one_sentence(err)
    params.write_text('{"polc_params": 1, "weights": {"kp": 0.5}}')
    code, _, err = polc(capsys, "analyze", files["trace"], "--policy", files["pol"], "--params", params)
    assert code == 1 and one_sentence(err) == f"polc: The params in {params} do not fit policy reach: weights kd, s are missing."

    with pytest.raises(SystemExit) as e:  # --json and --all together: bad usage
        main(["analyze", files["trace"], "--json", "--all"])
    assert e.value.code == 2 and "not allowed with argument --json" in capsys.readouterr().err


def run_code(files, capsys, code_text: str) -> tuple[int, str, str]:
    path = files["dir"] / "my_checks.py"
    path.write_text(code_text)
    code, out, err = polc(capsys, "analyze", files["trace"], "--code", path)
    if "sandbox" in err and "refusing to run" in err:
        pytest.skip("no sandbox on this machine")
    return code, out, err


def test_user_code_runs_in_the_sandbox(files, capsys):
    code, out, err = run_code(files, capsys, "def analyze(df):\n"
                                             "    print('rows', len(df), 'episodes', df['episode'].nunique())\n")
    assert code == 0 and out == "rows 100 episodes 2\n" and err == ""


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_on_a_terminal_the_output_is_framed_as_the_analysis_s(files, capsys, monkeypatch):
    """A line the analysis prints as polc's own reads as the analysis's on a terminal."""
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, out, err = run_code(files, capsys, "def analyze(df):\n    print('polc: the sandbox is broken')\n")
    assert code == 0 and err == ""
    assert out == ("--- output of my_checks.py (the analysis's words, not polc's) ---\n"
                   "polc: the sandbox is broken\n"
                   "--- end of the output of my_checks.py ---\n")


def test_failing_user_code_exits_1_with_its_sentence(files, capsys):
    code, out, err = run_code(files, capsys, "def analyze(df):\n    return df['latent.nope']\n")
    assert code == 1 and "KeyError: 'latent.nope'" in out
    assert one_sentence(err) == "polc: The analysis raised KeyError at line 2: 'latent.nope'."


def test_user_code_on_a_corrupt_trace(files, capsys):
    corrupt = files["dir"] / "garbage.parquet"
    corrupt.write_text("not parquet")
    (files["dir"] / "ok.py").write_text("def analyze(df):\n    print(len(df))\n")
    code, _, err = polc(capsys, "analyze", corrupt, "--code", files["dir"] / "ok.py")
    assert code == 1 and "is not a readable Parquet table" in one_sentence(err)

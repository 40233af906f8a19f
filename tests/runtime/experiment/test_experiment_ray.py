"""`polc experiment --ray` (issue 17): the experiment's steps as a dependency graph of Ray
tasks on a local instance (2 CPUs, 127.0.0.1 only). The graph runs steps after the steps
they need, retries a step whose worker dies (bounded), goes on past a failed step and then
names it; the quick experiment on Ray gives the local table, and after a failed step the
same command (--resume) continues without recomputing what finished."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

# Before Ray is imported: no usage reports.
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

import pytest

ray = pytest.importorskip("ray")

from quick_budget import use_quick_budget  # noqa: E402
from ray_helpers import RAY_MARKS  # noqa: E402

from polc.cli import main as polc  # noqa: E402
from polc.runtime.cluster.graph import GraphError, Node, run_graph  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]

pytestmark = RAY_MARKS


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_steps_run_after_the_steps_they_need_and_finished_ones_are_not_sent(cluster):
    def make(name):
        return lambda deps: {"name": name, "deps": sorted(deps), "sum": 1 + sum(d["sum"] for d in deps.values()),
                             "pid": os.getpid()}

    nodes = [Node("fit", (), make("fit")), Node("eval", ("fit",), make("eval")),
             Node("rl-low", ("fit",), make("rl-low")), Node("rl-high", ("fit", "rl-low"), make("rl-high")),
             Node("expert", (), make("expert"))]
    saved, started = [], []
    results = run_graph(nodes, done={"expert": {"sum": 100}}, on_done=lambda n, r: saved.append(n),
                        on_start=lambda n, running, left: started.append((n, running)))
    assert results["expert"] == {"sum": 100}  # finished before: used, never sent
    assert "expert" not in saved and sorted(saved) == ["eval", "fit", "rl-high", "rl-low"]
    assert saved[0] == "fit" and saved.index("rl-low") < saved.index("rl-high")
    assert results["rl-high"]["deps"] == ["fit", "rl-low"] and results["rl-high"]["sum"] == 4
    assert all(running <= 2 for _, running in started)  # no more at once than the cluster's CPUs
    assert {r["pid"] for n, r in results.items() if n != "expert"} - {os.getpid()}  # they ran in workers


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_step_whose_worker_dies_once_is_rerun_on_another(cluster, tmp_path):
    marker = tmp_path / "died"

    def dies_the_first_time(deps):
        if not marker.exists():
            marker.write_text("x")
            os._exit(1)  # the worker process dies, as if killed or out of memory
        return {"ok": True}

    results = run_graph([Node("flaky", (), dies_the_first_time)], retries=2)
    assert results["flaky"] == {"ok": True} and marker.exists()


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_step_that_keeps_failing_is_named_after_every_step_not_needing_it_finished(cluster):
    def always_dies(deps):
        os._exit(1)

    def broken(deps):
        raise ValueError("the demonstration has no rows")

    saved = []
    nodes = [Node("rl-mlp", (), always_dies), Node("eval-rl-mlp", ("rl-mlp",), lambda d: {}),
             Node("fit-initial", (), broken), Node("expert", (), lambda d: {"ok": 1}),
             Node("eval-initial", ("fit-initial",), lambda d: {})]
    with pytest.raises(GraphError) as e:
        run_graph(nodes, retries=1, on_done=lambda n, r: saved.append(n))
    assert saved == ["expert"]
    assert list(e.value.failed) == ["rl-mlp", "fit-initial"] or list(e.value.failed) == ["fit-initial", "rl-mlp"]
    assert e.value.failed["fit-initial"] == "ValueError: the demonstration has no rows"  # not retried
    assert e.value.failed["rl-mlp"].startswith("its worker died 2 times")
    assert sorted(e.value.skipped) == ["eval-initial", "eval-rl-mlp"]
    assert "'rl-mlp': its worker died 2 times" in str(e.value) and "failed: " in str(e.value)


@pytest.mark.slow
def test_a_steps_evaluation_spread_over_tasks_is_the_one_process_evaluation(cluster, tmp_path, monkeypatch):
    import dataclasses

    import jax
    import numpy as np

    from polc.runtime.experiment import QUICK, TASKS, Experiment, distributed
    from polc.runtime.trace.evaluate import evaluate, evaluate_expert
    from polc.runtime.trace.rollout import RolloutConfig

    budget = dataclasses.replace(QUICK, seeds=4, max_steps=60)
    exp = Experiment(TASKS["car_racing"], budget, str(tmp_path / "out"), say=lambda s: None)
    exp._claim()
    mlp = next(s for s in exp.task.structures if s.key == "mlp")
    exp._structure_file(mlp, {})
    policy = exp._policy(mlp)
    params = policy.init(jax.random.PRNGKey(0))
    call = distributed.StepCall("car_racing", budget, str(tmp_path / "out"), str(exp.folder.resolve()), None, False,
                                "eval-mlp-il")
    monkeypatch.setattr(distributed, "SHARE", 1)  # 4 seeds in 2 shares (one per CPU), 2 tasks
    config = RolloutConfig(n_envs=4, sample=True)
    spread = distributed.spread_evaluation(call, mlp, params, config)
    local = evaluate(policy, params, exp.spec, exp.seeds, config)
    assert list(spread.seeds) == list(exp.seeds)
    np.testing.assert_array_equal(spread.returns, local.returns)
    np.testing.assert_array_equal(spread.lengths, local.lengths)
    expert = distributed.spread_evaluation(call, None, None, None)
    np.testing.assert_array_equal(expert.returns, evaluate_expert(exp.spec, exp.seeds).returns)


def test_a_step_needing_an_unplanned_step_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="neither planned nor finished: fit"):
        run_graph([Node("eval", ("fit",), lambda d: {})])


def test_resume_without_an_experiment_to_continue_is_a_usage_error(tmp_path, capsys):
    assert polc(["experiment", "car_racing", "--quick", "--resume", "-o", str(tmp_path / "none")]) == 2
    assert "--resume: there is no experiment in" in capsys.readouterr().err


def _rows(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["rows"]


def _table_rows(out: Path) -> list[str]:
    return [line for line in (out / "table.md").read_text().splitlines() if line.startswith("|")]


def _mtimes(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (out / "steps").iterdir()}


@pytest.mark.slow
def test_quick_experiment_on_ray_fails_naming_the_step_resumes_and_gives_the_local_table(
        cluster, quick_car_racing, tmp_path, capsys, monkeypatch):
    # A copy of the task whose MLP structure does not compile: fit-mlp fails (it is not a
    # worker's fault, so it is not retried), every step not needing it finishes.
    task = tmp_path / "examples" / "car_racing"
    shutil.copytree(ROOT / "examples" / "car_racing", task)
    good = (task / "mlp.pol").read_text()
    (task / "mlp.pol").write_text(good.replace("policy", "pollicy", 1))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "ray"
    argv = ["experiment", "car_racing", "--quick", "-q", "-o", str(out), "--ray", "auto"]
    use_quick_budget(monkeypatch)  # the tests' quick budget, the local run's (conftest)
    assert polc(argv) == 1
    err = capsys.readouterr().err
    assert "step 'fit-mlp' failed:" in err
    assert "needing it not run: eval-mlp-il, rl-mlp-low-seed0" in err and "--resume" in err
    finished = _mtimes(out)
    assert "fit-initial.json" in finished and "eval-refined-rl-high-seed0.json" in finished
    assert not any(name.startswith(("fit-mlp", "eval-mlp", "rl-mlp", "es-mlp")) for name in finished)

    (task / "mlp.pol").write_text(good)  # the cause fixed: --resume runs only what did not finish
    assert polc(argv + ["--resume"]) == 0
    err = capsys.readouterr().err
    assert "10 of 32 steps to run, at most 2 at a time (22 finished before)" in err
    assert "[fit-initial]" not in err and "[fit-mlp]" in err
    after = _mtimes(out)
    assert {n: after[n] for n in finished} == finished  # nothing finished was recomputed
    assert len(after) == 32

    local = quick_car_racing  # the same command without Ray, on the same task files (conftest)
    assert _table_rows(out) == _table_rows(local)
    assert _rows(out) == _rows(local)


def test_an_experiment_without_ray_never_imports_it(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from polc.cli import main\n"
        "from polc.runtime.experiment import QUICK, TASKS, Experiment\n"
        f"assert main(['experiment', 'car_racing', '--quick', '--resume', '-o', {str(tmp_path / 'none')!r}]) == 2\n"
        f"exp = Experiment(TASKS['car_racing'], QUICK, {str(tmp_path / 'exp')!r}, say=lambda s: None)\n"
        "steps = exp.plan()\n"
        "print(len(steps), sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n")
    env = {k: v for k, v in os.environ.items() if k != "POLC_RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "32 []"


def test_the_plan_is_a_graph_whose_rl_runs_continue_their_low_budget():
    from polc.runtime.experiment import QUICK, TASKS, Experiment

    exp = Experiment(TASKS["car_racing"], QUICK, "/nonexistent/out", say=lambda s: None)
    steps = {s.name: s for s in exp.plan()}
    assert steps["fit-mlp"].deps == () and steps["fit-refined"].deps == ("refine",)
    assert steps["rl-initial-high-seed0"].deps == ("fit-initial", "rl-initial-low-seed0")
    assert steps["es-initial-high-seed0"].deps == ("fit-initial", "es-initial-low-seed0")
    assert steps["eval-mlp-es-low-seed0"].deps == ("es-mlp-low-seed0",)
    assert steps["eval-refined-rl-low-seed0"].deps == ("rl-refined-low-seed0",)
    order = list(steps)
    assert all(order.index(d) < order.index(n) for n, s in steps.items() for d in s.deps)  # the local order runs

"""`--ray`: eval, rollout and an RL update on a local Ray instance (2 CPUs, started once for
this module, on 127.0.0.1 only) give the local results; a worker killed mid-evaluation has its
episodes rerun on another; a bad address is a clear error; without --ray nothing imports Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Before Ray is imported: its local instance binds the loopback address, and it reports no usage.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from ray_helpers import RAY_MARKS  # noqa: E402

from polc.cli import main as polc  # noqa: E402
from polc.runtime.envs import toy  # noqa: E402

pytestmark = RAY_MARKS


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory):
    toy.register()
    path = tmp_path_factory.mktemp("ray") / "reach.pol"
    path.write_text(toy.reach_policy(std=0.3), encoding="utf-8")
    return str(path)


def _json_eval(capsys, *extra) -> dict:
    capsys.readouterr()
    assert polc(["eval", *extra, "--json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_eval_with_ray_equals_the_local_evaluation(cluster, policy_file, capsys):
    args = [policy_file, "--env", "toy_reach", "--seeds", "6", "--sample"]
    local = _json_eval(capsys, *args)
    remote = _json_eval(capsys, *args, "--ray", "auto")
    assert remote == local
    assert len(remote["per_seed"]) == 6


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_rollout_with_ray_writes_the_local_trace(cluster, policy_file, tmp_path):
    import pyarrow.parquet as pq

    a, b = tmp_path / "local.parquet", tmp_path / "ray.parquet"
    base = ["rollout", policy_file, "--env", "toy_reach", "--episodes", "5", "--sample", "-q"]
    assert polc(base + ["-o", str(a)]) == 0
    assert polc(base + ["-o", str(b), "--ray", "auto", "--ray-workers", "2"]) == 0
    ta, tb = pq.read_table(a), pq.read_table(b)
    assert ta.schema.names == tb.schema.names and ta.num_rows == tb.num_rows > 0
    assert ta.equals(tb)  # every column, every row (the file metadata differs only by timing, if at all)
    assert sorted(set(tb.column("episode").to_pylist())) == list(range(5))


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_one_rl_update_with_ray_reaches_the_local_params(cluster, policy_file, tmp_path):
    import polc as polc_lib
    from polc.runtime.io.params import load_params

    runs = {}
    for name, extra in (("local", []), ("ray", ["--ray", "auto"])):
        out = tmp_path / name
        assert polc(["rl", policy_file, "--env", "toy_reach", "--resets", "4", "--episodes-per-update", "4",
                     "-q", "-o", str(out), *extra]) == 0
        runs[name] = out
    policy = polc_lib.load(policy_file).compile()
    got = [load_params(str(runs[k] / "rl.params"), policy) for k in ("local", "ray")]
    for k in got[0]:
        np.testing.assert_array_equal(np.asarray(got[0][k]), np.asarray(got[1][k]))
    logs = [json.loads((runs[k] / "log.json").read_text())["log"] for k in ("local", "ray")]
    assert [r["return_mean"] for r in logs[0]] == [r["return_mean"] for r in logs[1]]
    assert logs[1][0]["resets"] == 4


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_worker_killed_mid_evaluation_has_its_episodes_rerun(cluster, policy_file):
    import jax
    import polc as polc_lib
    from polc.runtime.cluster.pool import WorkerPool
    from polc.runtime.cluster.remote import ray_evaluate
    from polc.runtime.trace.evaluate import evaluate
    from polc.runtime.trace.rollout import RolloutConfig

    spec = toy.register()
    policy = polc_lib.load(policy_file).compile()
    params = policy.init(jax.random.PRNGKey(0))
    seeds = list(range(10_000, 10_008))
    config = RolloutConfig(n_envs=8, sample=True, trace=False)
    killed = []

    def kill_the_first(actor, share):
        if not killed:  # the actor has just been handed its share of the episodes
            killed.append(share)
            ray.kill(actor)

    with WorkerPool(spec, policy, 2) as pool:
        pool.on_dispatch = kill_the_first
        result = ray_evaluate(pool, params, seeds, config)
        assert pool.replaced == 1 and killed
    local = evaluate(policy, params, spec, seeds, config)
    assert list(result.seeds) == seeds
    np.testing.assert_array_equal(result.returns, local.returns)
    np.testing.assert_array_equal(result.lengths, local.lengths)


def test_an_address_nobody_answers_at_is_a_clear_error_naming_it():
    from polc.runtime.cluster.connect import ClusterError, host_port, verify_reachable

    with pytest.raises(ClusterError, match=r"cannot reach the Ray cluster at '127\.0\.0\.1:1'"):
        verify_reachable("127.0.0.1:1", timeout=2.0)
    with pytest.raises(ClusterError, match=r"'head' is not a Ray address: give auto, HOST:PORT"):
        host_port("head")
    assert host_port("ray://127.0.0.1:10001") == ("127.0.0.1", 10001)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_without_ray_no_command_imports_ray(policy_file, tmp_path):
    code = (
        "import sys\n"
        "from polc.cli import main\n"
        "from polc.runtime.envs import toy\n"
        "toy.register()\n"
        f"assert main(['check', {policy_file!r}]) == 0\n"
        f"assert main(['eval', {policy_file!r}, '--env', 'toy_reach', '--seeds', '2', '-q']) == 0\n"
        f"assert main(['rollout', {policy_file!r}, '--env', 'toy_reach', '--episodes', '2', '-q', "
        f"'-o', {str(tmp_path / 't.parquet')!r}]) == 0\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n")
    env = {k: v for k, v in os.environ.items() if k != "POLC_RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"

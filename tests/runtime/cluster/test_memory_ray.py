"""A policy with memory on a local Ray instance (2 CPUs, 127.0.0.1 only): the workers carry and
reset each environment's state as one process does, so `polc rollout --ray` writes the local trace
(state columns included). The workers' RL collection, in-process and cheap, is in
tests/runtime/acting/test_memory_runtime.py (`RolloutWorker` shares against one `Collector`)."""

from __future__ import annotations

import os

# Before Ray is imported: its local instance binds the loopback address, and it reports no usage.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ray = pytest.importorskip("ray")

from ray_helpers import RAY_MARKS  # noqa: E402
from test_memory_runtime import MEMORY  # noqa: E402
from polc.cli import main as polc  # noqa: E402
from polc.runtime.envs import toy  # noqa: E402

pytestmark = RAY_MARKS


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory):
    toy.register()
    path = tmp_path_factory.mktemp("ray") / "memory.pol"
    path.write_text(MEMORY, encoding="utf-8")
    return str(path)


@pytest.mark.slow  # a local and a Ray rollout: several seconds (the cluster's workers compile the policy)
def test_a_ray_rollout_of_a_program_with_memory_writes_the_local_trace(cluster, policy_file, tmp_path):
    import pyarrow.parquet as pq

    a, b = tmp_path / "local.parquet", tmp_path / "ray.parquet"
    base = ["rollout", policy_file, "--env", "toy_reach", "--episodes", "5", "--sample", "-q"]
    assert polc(base + ["-o", str(a)]) == 0
    assert polc(base + ["-o", str(b), "--ray", "auto", "--ray-workers", "2"]) == 0
    ta, tb = pq.read_table(a), pq.read_table(b)
    assert "state.acc" in tb.schema.names and ta.equals(tb)
    steps, n = np.asarray(tb.column("step")), np.asarray(tb.column("state.n"))
    assert np.array_equal(n, steps)  # every episode's counter starts at 0 on whichever worker ran it

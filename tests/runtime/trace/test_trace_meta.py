"""The one builder of a trace's metadata (`polc.runtime.trace.meta`), used by `polc rollout` and by
every refinement round (tests/runtime/refine/test_refine_loop.py reads a round's; tests/runtime/test_runtime_commands.py a
rollout's)."""

from __future__ import annotations

import numpy as np
import pytest

import polc
from polc.runtime.envs import toy
from polc.runtime.io.params import params_sha256, structure_sha256
from polc.runtime.trace.meta import TraceMeta, seed_kind

PROGRAM = polc.loads(toy.reach_policy(kp=0.3, kd=0.1, std=0.3), "reach.pol").typed
PARAMS = {"kp": np.float32(0.3), "kd": np.float32(0.1), "s": np.float32(0.3)}


def test_a_sampled_rollouts_metadata():
    meta = TraceMeta.of(PROGRAM, "reach.pol", PARAMS, None, toy.SPEC, [0, 1], sampled=True, noise_seed=7).to_json()
    assert meta["kind"] == "trace" and meta["polc_version"] == polc.__version__
    assert meta["policy"] == {"name": PROGRAM.name, "file": "reach.pol", "sha256": meta["policy"]["sha256"],
                              "structure_sha256": structure_sha256(PROGRAM), "source": PROGRAM.source}
    assert meta["params"] == {"file": None, "sha256": params_sha256(PARAMS)}
    assert meta["env"] == {"name": "toy_reach", "id": toy.ENV_ID, "version": "1", "max_steps": 50}
    assert (meta["seeds"], meta["seed_kind"], meta["actions"], meta["noise_seed"]) == ([0, 1], "training", "sampled", 7)
    assert "refine" not in meta  # only a refinement round's trace says which round made it


def test_mean_actions_have_no_noise_seed_and_other_weights_change_only_their_hash():
    meta = TraceMeta.of(PROGRAM, "policy.pol", PARAMS, "params.json", toy.SPEC, [0], noise_seed=7, refine_round=2)
    other = meta.with_params({**PARAMS, "kp": np.float32(0.5)})
    a, b = meta.to_json(), other.to_json()
    assert (a["actions"], a["noise_seed"], a["refine"]) == ("mean", None, {"round": 2})
    assert a["params"]["sha256"] != b["params"]["sha256"] and b["params"]["file"] == "params.json"
    assert {k: v for k, v in a.items() if k != "params"} == {k: v for k, v in b.items() if k != "params"}


@pytest.mark.parametrize("seeds, kind", [
    ([0, 1], "training"), ([10_000], "evaluation"), ([5_000], "other"), ([999, 1_000], "mixed"),
])
def test_seed_kind(seeds, kind):
    assert seed_kind(toy.SPEC, seeds) == kind

"""The packed in-process vector env (`polc.runtime.trace.vector.PackedEnvs`) against the
path it replaced: gymnasium's SyncVectorEnv, whose observation dict the rollout then
packed (`TraceLayout.pack_obs`). Same seeds, same params: the episodes, traces and RL
collections must be identical BIT FOR BIT (returns, rewards, observations, draws,
log-densities), on the toy env (the generic, dict-reading packing) and on Car Racing
(whose packed row is copied whole)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import polc
from polc.runtime import envs
from polc.runtime.envs import toy
from polc.runtime.rl.collect import Collector
from polc.runtime.trace import vector
from polc.runtime.trace.rollout import RolloutConfig, rollout

CAR = envs.get("car_racing")
RUNAWAY = toy.reach_policy(std=0.3).replace(  # uneven episode lengths: idle slots and masked resets
    "action push : real in [-1, 1] = kp * err - kd * vel",
    'obs target : real in [-1, 1] "target"\n'
    "action push : real in [-1, 1] = if target > 0 then 1 else kp * err - kd * vel")


def gym_path(monkeypatch):
    """Make every in-process vector env the old one: SyncVectorEnv plus pack_obs."""
    def old(spec, n, asynchronous, obs):
        return vector.GymPacked(vector.make_vector_env(spec, n, asynchronous), n, obs)

    monkeypatch.setattr(vector, "make_packed_env", old)


def same(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def traced(policy, spec, seeds, **config):
    episodes = []
    params = policy.init(jax.random.PRNGKey(0))
    result = rollout(policy, params, spec, seeds, RolloutConfig(**config), episodes.append)
    return result, episodes


def collected(policy, spec, seeds, n_envs):
    with Collector(policy, spec, n_envs, asynchronous=False, min_std=0.1) as c:
        return c.run(policy.init(jax.random.PRNGKey(0)), jax.random.PRNGKey(3), seeds)


@pytest.mark.parametrize("sample", [False, True])
def test_traced_rollouts_are_bit_identical_to_the_gymnasium_path(monkeypatch, sample):
    policy = polc.loads(RUNAWAY, "reach.pol", analyze=False).compile()
    seeds = list(range(100, 107))
    new, new_eps = traced(policy, toy.SPEC, seeds, n_envs=3, sample=sample)
    gym_path(monkeypatch)
    old, old_eps = traced(policy, toy.SPEC, seeds, n_envs=3, sample=sample)
    assert len(set(new.lengths.tolist())) > 1  # slots finished at different steps
    for x, y in zip(new, old):
        same(x, y)
    assert [e.index for e in new_eps] == [e.index for e in old_eps]
    for e, f in zip(new_eps, old_eps):
        assert list(e.columns) == list(f.columns)
        for k in e.columns:
            same(e.columns[k], f.columns[k])


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_rl_collection_is_bit_identical_to_the_gymnasium_path_on_the_toy(monkeypatch):
    policy = polc.loads(RUNAWAY, "reach.pol", analyze=False).compile()
    seeds = list(range(200, 209))
    new = collected(policy, toy.SPEC, seeds, 4)
    gym_path(monkeypatch)
    old = collected(policy, toy.SPEC, seeds, 4)
    assert new.idle_resets > 0 and new.resets == old.resets and new.idle_resets == old.idle_resets
    for x, y in zip(new[:-2], old[:-2]):
        same(x, y)


@pytest.mark.slow  # 20 s alone: Car Racing episodes both ways (the toy tests above stay fast)
def test_car_racing_rollouts_and_collection_are_bit_identical_to_the_gymnasium_path(monkeypatch):
    policy = polc.load("examples/car_racing/initial.pol").compile()
    seeds = [10_000, 10_001, 10_002]
    made = []
    real = vector.PackedEnvs.__init__

    def spy(self, *args):
        real(self, *args)
        made.append(self)

    monkeypatch.setattr(vector.PackedEnvs, "__init__", spy)
    new_roll = traced(policy, CAR, seeds[:1], n_envs=1, trace=False)[0]
    new = collected(policy, CAR, seeds, 2)
    assert made and all(all(p._fast) for p in made)  # Car Racing's rows were copied whole
    gym_path(monkeypatch)
    old_roll = traced(policy, CAR, seeds[:1], n_envs=1, trace=False)[0]
    old = collected(policy, CAR, seeds, 2)
    for x, y in zip(new_roll, old_roll):
        same(x, y)
    for x, y in zip(new[:-2], old[:-2]):
        same(x, y)
    assert (new.resets, new.idle_resets) == (old.resets, old.idle_resets)


def test_stepping_a_finished_env_without_a_reset_is_refused():
    policy = polc.loads(RUNAWAY, "reach.pol", analyze=False).compile()
    from polc.runtime.trace.rollout import TraceLayout

    layout = TraceLayout(policy.program, toy.SPEC.schema)
    envs_ = vector.PackedEnvs(toy.SPEC, 1, layout.obs_fields)
    envs_.reset([0])
    push = np.ones((1, 1), np.float32)
    for _ in range(toy.MAX_STEPS + 1):
        _, _, term, trunc = envs_.step(push, layout.action_fields[False])
        if term[0] or trunc[0]:
            break
    with pytest.raises(RuntimeError, match="without a reset"):
        envs_.step(push, layout.action_fields[False])
    envs_.close()


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
@pytest.mark.parametrize("grouped", [True, False])
def test_traced_weight_columns_are_the_weights_the_step_computed_bit_for_bit(grouped):
    """The weights are constrained once per run, not in every traced step: each row holds
    the values the jitted, vmapped step computed when they were part of its output."""
    from polc.backend.lower import lower

    policy = lower(polc.load("examples/car_racing/initial.pol").typed, grouped=grouped)
    params = policy.init(jax.random.PRNGKey(0))
    in_step = jax.jit(jax.vmap(lambda p, x: policy.constrain(p), in_axes=(None, 0)))(params, np.zeros(3))
    episodes = []
    rollout(policy, params, CAR, [10_000], RolloutConfig(trace=True), episodes.append)
    columns = episodes[0].columns
    for w in policy.program.weights:
        col = columns["weight." + w.name]
        assert col.dtype == np.float32 and col.shape == (episodes[0].length,) + tuple(w.type.shape)
        assert all(row.tobytes() == np.asarray(in_step[w.name][0], np.float32).tobytes() for row in col)
    names = list(columns)
    assert names.index("latent." + policy.program.latents[-1].name) < names.index(
        "weight." + policy.program.weights[0].name) < names.index("mean." + policy.program.actions[0].name)


def test_resets_equal_episodes_and_idle_envs_are_not_stepped(monkeypatch):
    """An env whose slot has no episode left is neither reset (to rerun its seed) nor
    stepped: 7 episodes on 3 envs are 7 resets and the steps of 7 episodes."""
    policy = polc.loads(RUNAWAY, "reach.pol", analyze=False).compile()
    counts = {"resets": 0, "steps": 0}
    reset, step = vector.PackedEnvs.reset, vector.PackedEnvs.step

    def counting_reset(self, seeds, mask=None):
        counts["resets"] += self.n if mask is None else int(np.count_nonzero(mask))
        return reset(self, seeds, mask)

    def counting_step(self, actions, fields, active=None):
        counts["steps"] += self.n if active is None else int(np.count_nonzero(active))
        return step(self, actions, fields, active)

    monkeypatch.setattr(vector.PackedEnvs, "reset", counting_reset)
    monkeypatch.setattr(vector.PackedEnvs, "step", counting_step)
    result, _ = traced(policy, toy.SPEC, list(range(100, 107)), n_envs=3)
    assert len(set(result.lengths.tolist())) > 1  # slots went idle at different steps
    assert counts == {"resets": 7, "steps": int(result.lengths.sum())}

"""Rollouts and the tracer, on the toy point mass: trace columns come from the
program's names, the packed trace reconstructs what the policy computes, and
episodes depend on their seed only (not on how many environments ran)."""

from __future__ import annotations

import importlib

import jax
import numpy as np
import pytest

import polc
from polc.messages import PolError
from polc.runtime.envs import toy
from polc.runtime.trace.rollout import Rollout, RolloutConfig, TraceLayout, rollout

SPEC = toy.SPEC
# Pushes right whenever the target is right of the start, so those episodes run off the
# line early (terminated) while the others last the full 50 steps: uneven episode lengths.
RUNAWAY = toy.reach_policy().replace(
    "action push : real in [-1, 1] = kp * err - kd * vel",
    'obs target : real in [-1, 1] "target"\n'
    "action push : real in [-1, 1] = if target > 0 then 1 else kp * err - kd * vel")


def compiled(src: str = toy.reach_policy()):
    return polc.loads(src, "reach.pol", analyze=False).compile()


def run(policy, seeds, **config):
    episodes = []
    params = policy.init(jax.random.PRNGKey(0))
    result = rollout(policy, params, SPEC, seeds, RolloutConfig(**config), episodes.append)
    return result, episodes


def test_trace_columns_come_from_the_program_and_the_environment():
    layout = TraceLayout(compiled().program, SPEC.schema)
    names = [c.name for c in layout.columns()]
    assert names == ["episode", "step", "seed", "obs.pos", "obs.vel", "obs.target", "obs.gap", "obs.grid",
                     "latent.err", "latent.far", "weight.kp", "weight.kd", "weight.s", "mean.push", "action.push",
                     "reward", "terminated", "truncated"]
    cols = {c.name: c for c in layout.columns()}
    assert cols["latent.far"].dtype == "bool" and cols["obs.grid"].shape == (2, 2)
    assert cols["weight.kp"].doc == "push per unit of distance to the target" and cols["weight.kp"].lo == 0.0
    assert cols["action.push"].lo == -1.0 and cols["obs.pos"].doc == "position"


def test_trace_reconstructs_every_value_the_policy_computes():
    policy = compiled()
    params = policy.init(jax.random.PRNGKey(0))
    _, episodes = run(policy, [3, 4])
    for ep in episodes:
        c = ep.columns
        obs = {"gap": c["obs.gap"], "vel": c["obs.vel"]}
        actions, latents = jax.vmap(policy.apply, in_axes=(None, 0))(params, obs)
        np.testing.assert_allclose(c["latent.err"], latents["err"], rtol=1e-6)
        assert np.array_equal(c["latent.far"], np.asarray(latents["far"]))
        np.testing.assert_allclose(c["mean.push"], actions["push"], rtol=1e-6)
        np.testing.assert_array_equal(c["action.push"], c["mean.push"])  # mean actions by default
        for name, value in policy.constrain(params).items():
            assert np.all(c[f"weight.{name}"] == np.float32(value))
        np.testing.assert_allclose(c["obs.gap"][:, 0], c["obs.target"] - c["obs.pos"], atol=1e-6)
        assert list(c["step"]) == list(range(ep.length)) and np.all(c["seed"] == ep.seed)
        assert ep.ret == pytest.approx(float(np.sum(c["reward"], dtype=np.float64)), rel=1e-6)


def test_episodes_depend_on_their_seed_only_not_on_vectorisation():
    policy = compiled(RUNAWAY)
    seeds = [0, 1, 2, 3, 4, 5, 6]
    one, eps1 = run(policy, seeds, n_envs=1)
    three, eps3 = run(policy, seeds, n_envs=3, asynchronous=False)
    assert len(set(one.lengths)) > 1, "the test needs episodes of different lengths"
    assert [e.index for e in eps3] == list(range(len(seeds)))  # handed over in order
    assert np.array_equal(one.returns, three.returns) and np.array_equal(one.lengths, three.lengths)
    for a, b in zip(eps1, eps3):
        assert a.columns.keys() == b.columns.keys()
        for k in a.columns:
            assert np.array_equal(a.columns[k], b.columns[k]), k


def test_terminated_episode_ends_early_with_its_flags():
    result, episodes = run(compiled(RUNAWAY), [0, 1, 2, 3])
    short = [e for e in episodes if e.length < toy.MAX_STEPS]
    assert short, "some target lies right of the start"
    for ep in short:
        assert ep.columns["terminated"][-1] and not ep.columns["terminated"][:-1].any()
        assert ep.columns["reward"][-1] == -10.0
    full = [e for e in episodes if e.length == toy.MAX_STEPS]
    assert full and all(e.columns["truncated"][-1] for e in full)


def test_sampled_actions_follow_the_declared_noise_and_the_noise_seed():
    policy = compiled(toy.reach_policy(std=0.1))
    params = policy.init(jax.random.PRNGKey(0))
    a, b = [], []
    with Rollout(policy, SPEC, RolloutConfig(sample=True)) as runner:  # one compile for both runs
        runner.run(params, range(8), a.append)
        runner.run(params, range(8), b.append)
    _, c = run(policy, range(8), sample=True, noise_seed=1)
    noise = np.concatenate([e.columns["action.push"] - e.columns["mean.push"] for e in a])
    inside = np.abs(np.concatenate([e.columns["mean.push"] for e in a])) < 0.7  # away from the clip
    assert noise[inside].std() == pytest.approx(0.1, rel=0.15)
    assert all(np.array_equal(x.columns["action.push"], y.columns["action.push"]) for x, y in zip(a, b))
    assert not np.array_equal(a[0].columns["action.push"], c[0].columns["action.push"])


def test_untraced_rollout_returns_the_same_episodes():
    policy = compiled(RUNAWAY)
    traced, _ = run(policy, [5, 6, 7])
    plain, episodes = run(policy, [5, 6, 7], trace=False)
    assert np.array_equal(traced.returns, plain.returns) and all(e.columns is None for e in episodes)


def test_rollouts_of_one_policy_reuse_its_compiled_step():
    policy = compiled(RUNAWAY)
    params = policy.init(jax.random.PRNGKey(0))
    with Rollout(policy, SPEC, RolloutConfig(n_envs=2)) as a:
        first = a.run(params, [5, 6, 7])
    with Rollout(policy, SPEC, RolloutConfig(n_envs=2)) as b:  # a later evaluation of the same policy
        again = b.run(params, [5, 6, 7])
    assert b.step_fn is a.step_fn and a.step_fn._cache_size() == 1  # traced and compiled once
    assert np.array_equal(first.returns, again.returns) and np.array_equal(first.lengths, again.lengths)
    assert Rollout(policy, SPEC, RolloutConfig(n_envs=2, trace=False)).step_fn is not a.step_fn
    assert Rollout(policy, SPEC, RolloutConfig(n_envs=2, sample=True)).step_fn is not a.step_fn
    assert Rollout(compiled(RUNAWAY), SPEC, RolloutConfig(n_envs=2)).step_fn is not a.step_fn


def test_compiled_steps_kept_are_bounded():
    module = importlib.import_module("polc.runtime.trace.rollout")  # the package's `rollout` is the function

    for noise_seed in range(module._COMPILED_KEPT + 3):
        Rollout(compiled(), SPEC, RolloutConfig(noise_seed=noise_seed, sample=True))
    assert len(module._compiled) == module._COMPILED_KEPT


def test_program_that_does_not_fit_the_environment_is_a_located_error():
    bad = toy.reach_policy().replace("obs vel : real in [-3, 3]", "obs speed : real in [-3, 3]").replace(
        "kd * vel", "kd * speed")
    policy = compiled(bad)
    with pytest.raises(PolError) as e:
        rollout(policy, policy.init(jax.random.PRNGKey(0)), SPEC, [0])
    assert 'The environment "toy_reach" has no observation "speed"' in e.value.diagnostics[0].message


@pytest.mark.slow
def test_async_vector_env_gives_the_same_episodes():
    policy = compiled(RUNAWAY)
    seeds = [0, 1, 2, 3, 4]
    sync, _ = run(policy, seeds, n_envs=1)
    procs, _ = run(policy, seeds, n_envs=2, asynchronous=True)
    assert np.array_equal(sync.returns, procs.returns) and np.array_equal(sync.lengths, procs.lengths)

"""The acting module (`polc.runtime.acting`): the one place a compiled policy's step
becomes means, draws and log-densities. Direct calls on the toy reach policy: the draws
and densities are those of the compiled policy's own `sample` / `log_prob` bit for bit,
the std transforms chain as documented, and a policy state is carried and reset per
environment (checked with a hand-made `Acting` that counts its steps, since no program has
memory yet)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polc
from polc.runtime import acting as A
from polc.runtime.envs import toy

OBS = {"gap": np.asarray([0.4, -0.2], np.float32), "vel": np.float32(0.3)}


@pytest.fixture(scope="module")
def policy():
    return polc.loads(toy.reach_policy(std=0.02), "reach.pol", analyze=False).compile()


@pytest.fixture(scope="module")
def params(policy):
    return policy.init(jax.random.PRNGKey(0))


def same(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_without_a_key_the_actions_are_the_means_and_the_state_is_empty(policy, params):
    step = A.act(A.acting(policy), params, OBS, {})
    mean, latents = policy.apply(params, OBS)
    same(step.actions["push"], mean["push"])
    same(step.latents["err"], latents["err"])
    assert step.state == {} and A.acting(policy).init_state() == {}


def test_a_clipped_draw_is_the_compiled_policys_sample_bit_for_bit(policy, params):
    key = jax.random.PRNGKey(7)
    step = jax.jit(lambda p, o, k: A.act(A.acting(policy), p, o, {}, k))(params, OBS, key)
    sampled, _ = policy.sample(params, OBS, key)
    same(A.clip_actions(policy.program, step.actions)["push"], sampled["push"])
    assert step.actions["push"] != step.mean["push"]


def test_log_prob_is_the_compiled_policys_bit_for_bit(policy, params):
    draws = {"push": np.float32(0.05)}
    logp, state = jax.jit(lambda p, o, a: A.log_prob(A.acting(policy), p, o, a, {}))(params, OBS, draws)
    same(logp, policy.log_prob(params, OBS, draws))
    assert state == {}


def test_std_transforms_floor_then_scale(policy, params):
    base = A.acting(policy)
    floored = A.with_std_scale(A.with_min_std(base, 0.1), 0.5)
    _, std, _, _ = floored.distribution(params, OBS, {})
    _, raw, _, _ = base.distribution(params, OBS, {})
    assert float(raw["push"]) == pytest.approx(0.02)
    assert float(std["push"]) == pytest.approx(0.05)  # max(0.02, 0.1) * 0.5
    _, kept, _, _ = A.with_min_std(base, 0.0).distribution(params, OBS, {})
    same(kept["push"], raw["push"])
    mean = float(A.act(floored, params, OBS, {}).mean["push"])
    lp, _ = A.log_prob(floored, params, OBS, {"push": np.float32(mean)}, {})
    assert float(lp) == pytest.approx(-math.log(0.05) - 0.5 * math.log(2 * math.pi), rel=1e-5)


def test_episodes_log_prob_is_the_per_step_log_prob(policy, params):
    rng = np.random.default_rng(0)
    obs = {"gap": rng.uniform(-1, 1, (2, 3, 2)).astype(np.float32), "vel": rng.uniform(-1, 1, (2, 3)).astype(np.float32)}
    draws = {"push": rng.uniform(-1, 1, (2, 3)).astype(np.float32)}
    out = np.asarray(A.episodes_log_prob(A.acting(policy), params, obs, draws))
    assert out.shape == (2, 3)
    for e, t in ((0, 0), (1, 2)):
        one = {"gap": obs["gap"][e, t], "vel": obs["vel"][e, t]}
        assert out[e, t] == pytest.approx(float(policy.log_prob(params, one, {"push": draws["push"][e, t]})), rel=1e-6)


def test_batched_distribution_runs_independent_rows(policy, params):
    obs = {"gap": np.zeros((4, 2), np.float32), "vel": np.arange(4, dtype=np.float32) / 4}
    mean, std, latents = A.batched_distribution(A.acting(policy))(params, obs)
    assert mean["push"].shape == (4,) and std["push"].shape == (4,) and latents["far"].shape == (4,)


def counting(policy) -> A.Acting:
    """An `Acting` with memory: the state counts the steps since the episode began."""
    base = A.acting(policy)

    def distribution(params, obs, state):
        mean, std, latents, _ = base.distribution(params, obs, {})
        return mean, std, {**latents, "n": state["n"]}, {"n": state["n"] + 1}

    return base._replace(init_state=lambda: {"n": jnp.zeros((), jnp.int32)}, distribution=distribution)


def test_a_state_is_carried_per_environment_and_reset_where_an_episode_starts(policy, params):
    a = counting(policy)
    step = jax.jit(jax.vmap(lambda s, o, fresh: A.act(a, params, o, s, fresh=fresh), in_axes=(0, 0, 0)))
    obs = {"gap": np.zeros((3, 2), np.float32), "vel": np.zeros(3, np.float32)}
    state = A.initial_states(a, 3)
    assert state["n"].shape == (3,)
    seen = []
    for fresh in ([True, True, True], [False, False, False], [False, True, False], [False, False, False]):
        out = step(state, obs, np.asarray(fresh))
        seen.append(np.asarray(out.latents["n"]).tolist())
        state = out.state
    assert seen == [[0, 0, 0], [1, 1, 1], [2, 0, 2], [3, 1, 3]]


def test_the_gaussian_pieces_agree_with_each_other():
    loc, scale = np.asarray([0.0, 1.0], np.float32), np.asarray([0.5, 2.0], np.float32)
    density, entropy, kl, draws = jax.jit(lambda loc, scale: (
        A.normal_log_density(loc, loc, scale), A.normal_entropy(scale), A.normal_kl(loc, scale, loc + 1, scale),
        A.normal_sample(jax.random.PRNGKey(0), jnp.zeros(4000), jnp.full(4000, 2.0))))(loc, scale)
    np.testing.assert_allclose(density, -np.log(scale) - 0.5 * np.log(2 * np.pi), rtol=1e-6)
    np.testing.assert_allclose(entropy, 0.5 * np.log(2 * np.pi * np.e * np.square(scale)), rtol=1e-6)
    np.testing.assert_allclose(kl, 0.5 / np.square(scale), rtol=1e-6)  # equal scales: (dloc)^2 / (2 scale^2)
    assert float(np.std(draws)) == pytest.approx(2.0, rel=0.06)


def counting_means(policy, acting=A.acting) -> A.Acting:
    """An `Acting` with memory whose mean action is (steps since the episode began) / 100."""
    base = acting(policy)

    def distribution(params, obs, state):
        _, std, latents, _ = base.distribution(params, obs, {})
        n = state["n"]
        return ({"push": n.astype(jnp.float32) / 100}, {"push": jnp.full_like(std["push"], 1e-6)}, latents,
                {"n": n + 1})

    return base._replace(init_state=lambda: {"n": jnp.zeros((), jnp.int32)}, distribution=distribution)


def test_rollouts_and_rl_collection_carry_the_state_and_reset_it_per_episode(monkeypatch):
    """Through the real batched steps: 5 episodes in 2 slots, so slots start new episodes
    mid-run; each step's action must be its index in ITS episode."""
    from polc.runtime.rl.collect import Collector
    from polc.runtime.trace.rollout import RolloutConfig, rollout

    policy = polc.loads(toy.reach_policy(), "reach.pol", analyze=False).compile()  # a fresh object: its own caches
    monkeypatch.setattr(A, "acting", counting_means)
    params, seeds = policy.init(jax.random.PRNGKey(0)), [1, 2, 3, 4, 5]
    episodes = []
    rollout(policy, params, toy.SPEC, seeds, RolloutConfig(n_envs=2), episodes.append)
    assert len(episodes) == 5
    for ep in episodes:
        np.testing.assert_allclose(ep.columns["action.push"], np.arange(ep.length) / 100, atol=1e-6)
    with Collector(policy, toy.SPEC, 2, asynchronous=False) as c:
        got = c.run(params, jax.random.PRNGKey(1), seeds)
    for k in range(5):
        n = int(got.lengths[k])
        np.testing.assert_allclose(got.draws[k, :n, 0], np.arange(n) / 100, atol=1e-4)

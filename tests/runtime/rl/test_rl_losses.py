"""The RL objective on hand-computed numbers: reward-to-go, the group-relative
normalisation at each step index, ratio clipping per step and per window."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polc
from polc.runtime.envs import toy
from polc.runtime.rl.losses import (Transitions, advantages, batch_logp, group_normalise, reward_to_go, rl_loss,
                                    window_objective)


def test_reward_to_go_discounts_and_stops_at_the_episode_end():
    rewards = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 99.0]])
    mask = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # episode 1 ended after 2 steps: its 99 is padding
    g = reward_to_go(rewards, mask, gamma=0.5)
    np.testing.assert_allclose(g, [[1 + 0.5 * (2 + 0.5 * 3), 2 + 0.5 * 3, 3], [1.5, 1.0, 0.0]])


def test_group_normalisation_is_per_step_index_among_running_episodes():
    g = np.array([[1.0, 4.0], [3.0, 5.0], [5.0, 7.0], [10.0, 0.0]])
    mask = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    groups = np.array([0, 0, 0, 1])
    a = group_normalise(g, mask, groups)
    # Step 0, group 0: values 1, 3, 5; mean 3, population std sqrt(8/3).
    s0 = math.sqrt(8 / 3)
    np.testing.assert_allclose(a[:3, 0], [-2 / s0, 0.0, 2 / s0], rtol=1e-6)
    # Step 1, group 0: episode 2 has ended, so only 4 and 5 count: mean 4.5, std 0.5.
    np.testing.assert_allclose(a[:3, 1], [-1.0, 1.0, 0.0], rtol=1e-6)
    # Group 1 has one episode: nothing to compare with, advantage 0.
    np.testing.assert_allclose(a[3], [0.0, 0.0])


def test_advantages_compare_episodes_of_one_group_not_across_groups():
    rewards = np.array([[1.0], [3.0], [100.0], [300.0]])
    a = advantages(rewards, np.ones((4, 1)), np.array([0, 0, 1, 1]), gamma=0.98)
    assert a.dtype == np.float32
    np.testing.assert_allclose(a[:, 0], [-1, 1, -1, 1], rtol=1e-6)


def objective(ratios, adv, mask=None, clip=0.2, window=1):
    ratios = jnp.asarray(ratios, jnp.float32)
    mask = jnp.ones_like(ratios) if mask is None else jnp.asarray(mask, jnp.float32)
    j, stats = window_objective(jnp.log(ratios), jnp.zeros_like(ratios), jnp.asarray(adv, jnp.float32), mask,
                                clip, window)
    return float(j), stats


@pytest.mark.parametrize("ratio, adv, expected", [
    (1.5, 1.0, 1.2),     # a good action already made more likely: the gain is capped at 1 + clip
    (0.5, 1.0, 0.5),     # a good action made less likely: no cap, the full loss counts
    (1.5, -1.0, -1.5),   # a bad action made more likely: no cap
    (0.5, -1.0, -0.8),   # a bad action made less likely: capped at 1 - clip
    (1.1, 2.0, 2.2),     # inside the clip range: ratio * advantage
])
def test_per_step_ratio_is_clipped_pessimistically(ratio, adv, expected):
    j, stats = objective([[ratio]], [[adv]])
    assert j == pytest.approx(expected, rel=1e-6)
    assert float(stats.clip_fraction) == (1.0 if abs(ratio - 1) > 0.2 else 0.0)


def test_objective_is_the_mean_over_real_steps():
    j, _ = objective([[1.1, 0.5, 3.0]], [[2.0, 1.0, 5.0]], mask=[[1, 1, 0]])
    assert j == pytest.approx((2.2 + 0.5) / 2, rel=1e-6)


def test_a_window_clips_the_geometric_mean_of_its_step_ratios():
    # Window of 2: ratios 1.5 and 1.0 -> s = sqrt(1.5) = 1.2247 > 1.2, mean advantage (1 + 3) / 2 = 2.
    j, stats = objective([[1.5, 1.0]], [[1.0, 3.0]], window=2)
    assert j == pytest.approx(1.2 * 2.0, rel=1e-6)
    assert float(stats.clip_fraction) == 1.0 and float(stats.ratio) == pytest.approx(math.sqrt(1.5), rel=1e-6)
    # The same steps one by one: 1.2 * 1 (clipped) + 1.0 * 3, averaged.
    j1, _ = objective([[1.5, 1.0]], [[1.0, 3.0]], window=1)
    assert j1 == pytest.approx((1.2 + 3.0) / 2, rel=1e-6)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_partial_windows_count_their_real_steps_only():
    # T = 3, window 2: windows [0, 1] and [2, pad]; episode 1 ends after step 0.
    ratios = [[1.1, 1.1, 0.9], [1.05, 7.0, 7.0]]
    adv = [[1.0, 1.0, -2.0], [4.0, 9.0, 9.0]]
    mask = [[1, 1, 1], [1, 0, 0]]
    j, _ = objective(ratios, adv, mask, window=2)
    w00 = 2 * (1.1 * 1.0)                    # s = 1.1, mean advantage 1, 2 steps
    w01 = 1 * max(0.9 * -2.0, 0.9 * -2.0)    # s = 0.9 (inside the range), 1 step
    w10 = 1 * (1.05 * 4.0)                   # only the real step: s = 1.05, advantage 4
    assert j == pytest.approx((w00 + w01 + w10) / 4, rel=1e-6)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_gradient_vanishes_once_a_window_is_clipped():
    def j(logp):
        return window_objective(logp, jnp.zeros(2)[None], jnp.ones((1, 2)), jnp.ones((1, 2)), 0.2, 2)[0]

    clipped = jax.grad(j)(jnp.log(jnp.array([[1.5, 1.5]])))
    inside = jax.grad(j)(jnp.log(jnp.array([[1.1, 1.1]])))
    np.testing.assert_allclose(clipped, 0.0)
    # Inside the range, d s / d logp_t = s / W for each step (GSPO's length-normalised ratio).
    np.testing.assert_allclose(inside, [[1.1 / 2, 1.1 / 2]], rtol=1e-5)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_loss_on_a_policy_is_minus_the_objective_and_starts_at_ratio_one():
    policy = polc.loads(toy.reach_policy(std=0.5), "reach.pol", analyze=False).compile()
    params = policy.init(jax.random.PRNGKey(0))
    rng = np.random.default_rng(0)
    obs = {"gap": rng.uniform(-1, 1, (3, 4, 2)).astype(np.float32), "vel": rng.uniform(-1, 1, (3, 4)).astype(np.float32)}
    actions = {"push": rng.uniform(-1, 1, (3, 4)).astype(np.float32)}
    logp = batch_logp(policy)(params, obs, actions)
    adv = rng.normal(size=(3, 4)).astype(np.float32)
    batch = Transitions(obs, actions, logp, adv, np.ones((3, 4), np.float32))
    loss, stats = rl_loss(policy, clip=0.2, window=2)(params, batch)
    assert float(loss) == pytest.approx(-float(np.mean(adv)), abs=1e-5)  # every ratio is 1
    assert float(stats.clip_fraction) == 0.0 and float(stats.approx_kl) == pytest.approx(0.0, abs=1e-6)
    # The log-density is the declared Gaussian's: -0.5 z^2 - log(std) - 0.5 log(2 pi).
    w = policy.constrain(params)
    mean = float(np.clip(w["kp"] * obs["gap"][0, 0, 0] - w["kd"] * obs["vel"][0, 0], -1, 1))
    z = (actions["push"][0, 0] - mean) / float(w["s"])
    assert float(logp[0, 0]) == pytest.approx(-0.5 * z * z - math.log(float(w["s"])) - 0.5 * math.log(2 * math.pi),
                                              rel=1e-5)

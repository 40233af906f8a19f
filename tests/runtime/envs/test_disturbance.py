"""The constant-disturbance wrapper (issue 38, integral action): one disturbance per episode fixed
by the seed, added to the action, appended to the observation (a hidden field of
examples/pendulum_disturbed/env.toml), starts near upright even when a vector env passes its
leftover options ({}), and the steady-state metric. No rollouts."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from polc.runtime.envs.disturbance import ConstantDisturbance, last_half_abs_angle, make_pendulum_disturbed
from polc.runtime.envs.gym_env import resolve

ROOT = Path(__file__).resolve().parents[3]
TASK = ROOT / "examples" / "pendulum_disturbed"


def test_the_disturbance_is_drawn_per_episode_from_the_seed_and_observed_last():
    env = make_pendulum_disturbed(max_disturbance=1.0)
    obs, info = env.reset(seed=3)
    again, _ = make_pendulum_disturbed(max_disturbance=1.0).reset(seed=3)
    d = info["disturbance"]
    assert obs.shape == (4,) and env.observation_space.shape == (4,)
    assert np.array_equal(obs, again) and obs[3] == np.float32(d[0]) and abs(d[0]) <= 1.0
    other = [env.reset(seed=s)[1]["disturbance"][0] for s in range(4, 12)]
    assert len(set(other)) == 8  # a new one at every episode


@pytest.mark.parametrize("options", [None, {}])
def test_an_episode_starts_near_upright_with_or_without_options(options):
    """A vector env resets its sub-envs with options={} (what is left once it took reset_mask out);
    the start's bounds must still apply (they once did not: the pole started anywhere)."""
    env = make_pendulum_disturbed(start_angle=0.1, start_speed=0.2)
    for seed in range(20):
        env.reset(seed=seed, options=options)
        th, thdot = env.unwrapped.state
        assert abs(th) <= 0.1 and abs(thdot) <= 0.2


def test_a_step_applies_action_plus_disturbance_clipped_to_the_motor():
    env = make_pendulum_disturbed(max_disturbance=1.0)
    obs, info = env.reset(seed=5)
    d = float(info["disturbance"][0])
    plain = PendulumEnv()
    plain.reset(seed=0)
    for u in (0.3, -1.9, 2.0):
        plain.state = np.array(env.unwrapped.state)
        want, reward_want, *_ = plain.step(np.clip(np.array([u + d]), -2, 2).astype(np.float32))
        got, reward, *_ = env.step(np.array([u], np.float32))
        np.testing.assert_allclose(got[:3], want, rtol=1e-6)
        assert got[3] == np.float32(d) and reward == pytest.approx(reward_want)


def test_the_wrapper_refuses_what_it_cannot_wrap():
    with pytest.raises(ValueError, match="max_disturbance must be a finite number >= 0, not -1"):
        ConstantDisturbance(PendulumEnv(), -1)
    with pytest.raises(ValueError, match="flat Box observation and action spaces"):
        ConstantDisturbance(gym.make("CartPole-v1").unwrapped, 1.0)


def test_the_steady_state_metric_is_the_mean_abs_angle_of_the_last_half():
    theta = np.array([1.0, -1.0, 0.2, -0.4])
    per_step = last_half_abs_angle({"obs.cos_th": np.cos(theta), "obs.sin_th": np.sin(theta)})
    assert per_step[:2].tolist() == [0.0, 0.0] and per_step.sum() == pytest.approx(0.3)


def test_the_example_task_hides_the_disturbance_and_scores_the_steady_state():
    spec = resolve(str(TASK / "env.toml"))
    assert [f.name for f in spec.schema.policy_obs()] == ["cos_th", "sin_th", "th_dot"]
    assert spec.schema.obs_field("disturbance").hidden and spec.max_steps == 200
    assert spec.metric.name == "steady-state |angle|" and not spec.metric.higher_is_better

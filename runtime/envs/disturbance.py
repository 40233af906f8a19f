"""An unknown constant disturbance on a stock task (issue 38: integral action).

`ConstantDisturbance(env, max_disturbance)` draws one disturbance per episode, `d ~ U[-m, m]` per
action component from the environment's own random generator right after its reset (so the seed
fixes it), and steps the environment with `action + d`: a bias in the actuator, as a misaligned
motor or a payload puts there. The environment clips the sum to its action bounds as it clips any
action. The wrapper appends `d` to the flat observation, so a schema file can name it and mark it
`hidden = true` (docs/environments.md, "Privileged observations"): an expert and the trace read
it, a policy does not, and must estimate its effect (an integrator) or live with the
steady-state error it leaves.

`gym:polc.runtime.envs.disturbance:PendulumDisturbed-v0` (examples/pendulum_disturbed/) is
Pendulum-v1 started near upright (|theta| <= 0.1 rad, |theta'| <= 0.2 rad/s) with a constant torque
disturbance of at most 1 N m (half the motor's 2 N m): a balancing task where a proportional-
derivative controller settles at the angle where gravity, the disturbance and its own torque
balance. Observation Box(4): cos(theta), sin(theta), theta', d; 200 steps.

`last_half_abs_angle` is its steady-state metric: the mean |theta| over the second half of an
episode (a schema file's `[metric] function`).
"""

from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np

PENDULUM_ID = "PendulumDisturbed-v0"  # gymnasium's MODULE:ID form finds it after importing this module
PENDULUM_STEPS = 200


class ConstantDisturbance(gym.Wrapper):
    """Steps `env` with `action + d`, `d ~ U[-max_disturbance, max_disturbance]` drawn at every
    reset, and appends `d` to the observation. `reset_options` go to every reset, under the options
    the caller gives (Pendulum-v1's `x_init` / `y_init`: the start's angle and speed bounds)."""

    def __init__(self, env: gym.Env, max_disturbance: float = 1.0, reset_options: Optional[dict] = None):
        super().__init__(env)
        obs, act = env.observation_space, env.action_space
        if not (isinstance(obs, gym.spaces.Box) and len(obs.shape) == 1 and isinstance(act, gym.spaces.Box)
                and len(act.shape) == 1):
            raise ValueError(f"ConstantDisturbance wraps an env with flat Box observation and action spaces, not "
                             f"{obs} and {act}")
        m = float(max_disturbance)
        if not np.isfinite(m) or m < 0:
            raise ValueError(f"max_disturbance must be a finite number >= 0, not {max_disturbance!r}")
        self.max_disturbance = m
        self.reset_options = dict(reset_options or {})
        n = act.shape[0]
        self.observation_space = gym.spaces.Box(np.concatenate([obs.low, np.full(n, -m)]).astype(np.float32),
                                                np.concatenate([obs.high, np.full(n, m)]).astype(np.float32))
        self.disturbance = np.zeros(n, np.float64)

    def _observe(self, obs: Any) -> np.ndarray:
        return np.concatenate([np.asarray(obs, np.float32).reshape(-1), self.disturbance.astype(np.float32)])

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        # merged: a vector env passes {} where gymnasium took its own keys (reset_mask) out
        options = {**self.reset_options, **(options or {})} or None
        obs, info = self.env.reset(seed=seed, options=options)
        m = self.max_disturbance
        self.disturbance = self.env.unwrapped.np_random.uniform(-m, m, size=self.disturbance.shape)
        return self._observe(obs), {**info, "disturbance": self.disturbance.copy()}

    def step(self, action: Any):
        act = np.asarray(action, np.float64).reshape(-1) + self.disturbance
        act = np.clip(act, self.env.action_space.low, self.env.action_space.high).astype(self.env.action_space.dtype)
        obs, reward, terminated, truncated, info = self.env.step(act)
        return self._observe(obs), reward, terminated, truncated, info


def make_pendulum_disturbed(max_disturbance: float = 1.0, start_angle: float = 0.1, start_speed: float = 0.2,
                            render_mode: Optional[str] = None) -> gym.Env:
    """Pendulum-v1 near upright with a constant torque disturbance (the module docstring)."""
    from gymnasium.envs.classic_control.pendulum import PendulumEnv

    inner = PendulumEnv(render_mode=render_mode)
    return ConstantDisturbance(inner, max_disturbance, {"x_init": float(start_angle), "y_init": float(start_speed)})


def last_half_abs_angle(columns: dict) -> np.ndarray:
    """Per step: |theta| / (the second half's length) in the second half of the episode, 0 before;
    summed, the mean |theta| (rad) over the last half: the steady-state error."""
    theta = np.abs(np.arctan2(np.asarray(columns["obs.sin_th"], np.float64), np.asarray(columns["obs.cos_th"],
                                                                                            np.float64)))
    t = theta.shape[0]
    half = t // 2
    out = np.zeros(t, np.float64)
    out[half:] = theta[half:] / max(t - half, 1)
    return out


if PENDULUM_ID not in gym.registry:
    gym.register(id=PENDULUM_ID, entry_point="polc.runtime.envs.disturbance:make_pendulum_disturbed",
                 max_episode_steps=PENDULUM_STEPS)

__all__ = ["ConstantDisturbance", "PENDULUM_ID", "last_half_abs_angle", "make_pendulum_disturbed"]

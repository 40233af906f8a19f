"""A linear (LQR) demonstrator for gymnasium's InvertedDoublePendulum-v5, written
for polc's example (`--expert expert.py:act`).

The gain comes from the MuJoCo model itself: one env step (frame_skip = 5 physics
steps with the control held) is linearised about the upright rest state by central
differences, and `scipy.linalg.solve_discrete_are` gives the LQR gain for the
state (cart x, pole angle q1, relative angle q2, and their velocities). The
action is the normalised control u = -K s, clipped to [-1, 1]."""

from __future__ import annotations

import math

import gymnasium as gym
import mujoco
import numpy as np
from scipy.linalg import solve_discrete_are

Q = np.diag([1.0, 10.0, 10.0, 0.1, 1.0, 1.0])  # state cost: x, q1, q2, v, w1, w2
R = np.array([[1.0]])  # control cost (normalised control)


def _env_step(m, d, x: np.ndarray, u: float, frame_skip: int) -> np.ndarray:
    nq = m.nq
    mujoco.mj_resetData(m, d)
    d.qpos[:], d.qvel[:], d.ctrl[:] = x[:nq], x[nq:], u
    for _ in range(frame_skip):
        mujoco.mj_step(m, d)
    return np.concatenate([d.qpos, d.qvel])


def _gain(eps: float = 1e-5) -> np.ndarray:
    """LQR gain of the env step linearised by central differences about rest upright
    (the model integrates with RK4, which mujoco's own mjd_transitionFD does not take)."""
    env = gym.make("InvertedDoublePendulum-v5").unwrapped
    m, d, skip = env.model, mujoco.MjData(env.model), env.frame_skip
    nx = m.nq + m.nv
    x0 = np.zeros(nx)
    a = np.column_stack([(_env_step(m, d, x0 + eps * e, 0.0, skip) - _env_step(m, d, x0 - eps * e, 0.0, skip))
                         / (2 * eps) for e in np.eye(nx)])
    b = ((_env_step(m, d, x0, eps, skip) - _env_step(m, d, x0, -eps, skip)) / (2 * eps)).reshape(nx, 1)
    env.close()
    p = solve_discrete_are(a, b, Q, R)
    return np.linalg.solve(R + b.T @ p @ b, b.T @ p @ a)[0]


K = _gain()


def state(obs: dict) -> np.ndarray:
    q1 = math.atan2(float(obs["sin_q1"]), float(obs["cos_q1"]))
    q2 = math.atan2(float(obs["sin_q2"]), float(obs["cos_q2"]))
    return np.array([float(obs["x"]), q1, q2, float(obs["v"]), float(obs["w1"]), float(obs["w2"])])


def act(obs: dict) -> dict:
    return {"force": float(np.clip(-K @ state(obs), -1.0, 1.0))}


if __name__ == "__main__":
    print("K =", np.array2string(K, precision=4))

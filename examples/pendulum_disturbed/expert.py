"""A privileged balance controller for the disturbed pendulum
(`polc demos examples/pendulum_disturbed/env.toml --expert examples/pendulum_disturbed/expert.py:act`).

Pendulum-v1 near upright: theta'' = 15 sin(theta) + 3 (u + d), theta = 0 upright, with an unknown
constant disturbance d (runtime/envs/disturbance.py). The expert reads d (hidden from the policy:
env.toml marks it `hidden = true`) and cancels it, u = -(KP theta + KD theta') - d, so the pole
settles at theta = 0. A PD controller without d settles where (15 - 3 KP) theta = -3 d, at
theta = d / (KP - 5) for small angles: 0.2 rad with KP = 10 and |d| = 1. An integrator finds -d
from the error it leaves (pid.pol).
"""

from __future__ import annotations

import math

import numpy as np

KP, KD = 10.0, 2.0
U_MAX = 2.0


def act(obs: dict) -> dict:
    theta = math.atan2(float(obs["sin_th"]), float(obs["cos_th"]))
    u = -(KP * theta + KD * float(obs["th_dot"])) - float(obs["disturbance"])
    return {"torque": float(np.clip(u, -U_MAX, U_MAX))}

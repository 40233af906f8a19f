"""A hand-tuned PID reference for the disturbed pendulum, in Python: what pid.pol computes,
measured before the compiler runs policies with memory
(`polc eval --expert examples/pendulum_disturbed/pid_reference.py:pid --env examples/pendulum_disturbed/env.toml`).

It reads only what a policy reads (cos_th, sin_th, th_dot; never the hidden disturbance). Its
integral keeps growing while the pole leans and saturates at +-I_MAX N m (anti-windup);
`reset()` (called by polc at every episode's start) empties it.
"""

from __future__ import annotations

import math

import numpy as np

KP, KD, KI = 10.0, 2.0, 0.5  # pid.pol's declared weights
I_MAX = 1.5
U_MAX = 2.0


class PID:
    def __init__(self) -> None:
        self.integ = 0.0

    def reset(self) -> None:
        self.integ = 0.0

    def __call__(self, obs: dict) -> dict:
        theta = math.atan2(float(obs["sin_th"]), float(obs["cos_th"]))
        u = -(KP * theta + KD * float(obs["th_dot"]) + self.integ)
        self.integ = float(np.clip(self.integ + KI * theta, -I_MAX, I_MAX))  # `next`: read at the next step
        return {"torque": float(np.clip(u, -U_MAX, U_MAX))}


pid = PID()

"""velocity.pol's computation in Python: examples/pendulum's controller with the angular
velocity estimated by finite difference of the angle, measured before the compiler runs policies
with memory
(`polc eval --expert examples/pendulum_partial/velocity_reference.py:estimator --env examples/pendulum_partial/env.toml`).

It reads only what a policy reads (cos_th, sin_th; never the hidden th_dot). The previous angle
and the filtered estimate are its memory; `reset()` (called by polc at every episode's start)
clears them, and at an episode's first step, with no earlier angle, the estimate is 0.
"""

from __future__ import annotations

import math

import numpy as np

K_E, E_UP = 2.0, 5.0  # expert.py's gains (a file given to --expert is loaded alone, so they are repeated)
KP, KD = 10.0, 2.0
COS_BALANCE = 0.85
U_MAX = 2.0

DT = 0.05  # Pendulum-v1's time step (s)
ALPHA = 1.0  # low-pass filter gain: 1 takes each new difference as it is


class VelocityEstimate:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.th_prev, self.v_prev, self.started = 0.0, 0.0, False

    def __call__(self, obs: dict) -> dict:
        c, s = float(obs["cos_th"]), float(obs["sin_th"])
        theta = math.atan2(s, c)
        d = math.atan2(math.sin(theta - self.th_prev), math.cos(theta - self.th_prev))  # wrapped
        v_raw = d / DT if self.started else 0.0
        w = float(np.clip(self.v_prev + ALPHA * (v_raw - self.v_prev), -8, 8))
        self.th_prev, self.v_prev, self.started = theta, w, True
        if c > COS_BALANCE:
            u = -(KP * theta + KD * w)
        else:
            u = K_E * (E_UP - (w * w / 6.0 + 5.0 * c)) * w
        return {"torque": float(np.clip(u, -U_MAX, U_MAX))}


estimator = VelocityEstimate()

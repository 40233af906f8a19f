"""A privileged swing-up demonstrator for the partially observed pendulum
(`polc demos examples/pendulum_partial/env.toml --expert examples/pendulum_partial/expert.py:act`).

The policy's schema hides the angular velocity `th_dot` (`hidden = true` in env.toml), but the
environment's observation still holds it, so this expert reads it, as the paper's expert reads
the simulator: privileged demonstrations. The controller is examples/pendulum's:
Pendulum-v1's dynamics (g = 10, m = l = 1, dt = 0.05, torque in [-2, 2]) are
theta'' = 15 sin(theta) + 3 u with theta = 0 upright. With the energy
E = theta'^2 / 6 + 5 cos(theta), dE/dt = theta' u, so
- swing-up (energy shaping): u = K_E (E_UP - E) theta', pumping energy in until
  the pole reaches the upright energy E_UP = 5;
- balance (near upright, cos(theta) > COS_BALANCE): u = -(KP theta + KD theta').
Both parts need theta': a policy that sees only the angle must estimate it (velocity.pol).
"""

from __future__ import annotations

import math

import numpy as np

K_E, E_UP = 2.0, 5.0
KP, KD = 10.0, 2.0
COS_BALANCE = 0.85
U_MAX = 2.0


def act(obs: dict) -> dict:
    c, s = float(obs["cos_th"]), float(obs["sin_th"])
    w = float(obs["th_dot"])  # hidden from the policy; the environment's observation has it
    theta = math.atan2(s, c)
    if c > COS_BALANCE:
        u = -(KP * theta + KD * w)
    else:
        energy = w * w / 6.0 + 5.0 * c
        u = K_E * (E_UP - energy) * w
    return {"torque": float(np.clip(u, -U_MAX, U_MAX))}

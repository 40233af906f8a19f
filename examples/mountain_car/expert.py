"""A demonstrator for gymnasium's MountainCarContinuous-v0, written for polc's
example: pump energy by pushing in the direction the car already moves, at a
force that saturates once the car is moving (`tanh` of the velocity), starting
with a push to the left (towards the nearer slope) while the car is still.
Reaching the flag pays 100; each step costs 0.1 * force^2."""

from __future__ import annotations

import math

K_PUMP = 200.0  # force per unit of velocity before saturation (|velocity| <= 0.07)
START = -0.5  # the push while the car is (almost) still


def act(obs: dict) -> dict:
    v = float(obs["velocity"])
    force = START if abs(v) < 1e-4 else math.tanh(K_PUMP * v)
    return {"force": force}

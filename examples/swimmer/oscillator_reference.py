"""oscillator.pol's computation with its declared weights, in Python: what the gait
structure does before any training, measured before the compiler runs policies with memory
(`polc eval --expert examples/swimmer/oscillator_reference.py:gait --env examples/swimmer/env.toml`).

It reads only the policy's observations. The phase is its memory; `reset()` (called by polc at
every episode's start) sets it back to 0.
"""

from __future__ import annotations

import math

import numpy as np

OMEGA, AMP, LAG = 0.2, 0.8, 1.0  # oscillator.pol's declared weights
KP, KD = 1.0, 0.1


class Gait:
    def __init__(self) -> None:
        self.phase = 0.0

    def reset(self) -> None:
        self.phase = 0.0

    def __call__(self, obs: dict) -> dict:
        angles, rates = np.asarray(obs["angles"], float), np.asarray(obs["rates"], float)
        target = AMP * np.sin([self.phase, self.phase - LAG])
        u = KP * (target - angles[1:3]) - KD * rates[1:3]
        self.phase = math.atan2(math.sin(self.phase + OMEGA), math.cos(self.phase + OMEGA))  # `next`
        return {"torque": np.clip(u, -1, 1)}


gait = Gait()

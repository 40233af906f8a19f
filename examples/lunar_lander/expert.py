"""The demonstrator for LunarLanderContinuous-v3: gymnasium's own `heuristic`
controller (`gymnasium.envs.box2d.lunar_lander.heuristic`), unchanged, fed the
observation in gymnasium's order (`polc demos ... --expert expert.py:act`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from gymnasium.envs.box2d.lunar_lander import heuristic

# heuristic(env, s) reads only env.unwrapped.continuous, to pick the action form
_CONTINUOUS = SimpleNamespace(unwrapped=SimpleNamespace(continuous=True))


def act(obs: dict) -> np.ndarray:
    s = np.concatenate([np.ravel(obs[k]) for k in ("x", "y", "vx", "vy", "angle", "ang_vel", "legs")])
    return heuristic(_CONTINUOUS, s).astype(np.float32)  # the env's own action array [main, lateral]

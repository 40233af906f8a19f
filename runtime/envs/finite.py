"""No non-finite action reaches an environment.

A NaN action is not a bad action but no action at all, and simulators do not
say so: Car Racing's Box2D steps a NaN gas as if it were fine and its reward
counts tiles, so a policy whose gas is NaN scored 999.8, above the expert. Every
environment `EnvSpec.make` builds is wrapped in `FiniteActions`, which refuses
such an action before the simulator sees it: the episode stops with
`NonFiniteAction`, naming the action, the step and the episode's seed, and the
commands report it as a failure (exit 1) rather than a score. Scores that come
out of polc are therefore scores of finite actions only.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import gymnasium as gym
import numpy as np


class NonFiniteAction(ValueError):
    """A policy produced a NaN or infinite action; the environment was not stepped."""


def _what(values: np.ndarray) -> str:
    bad = values[~np.isfinite(values)]
    kinds = sorted({"NaN" if np.isnan(v) else ("+inf" if v > 0 else "-inf") for v in bad.ravel()})
    return " and ".join(kinds)


def non_finite_message(name: str, values: Any, step: int, seed: Optional[int]) -> str:
    """One sentence for a non-finite action (`step` counts from 0 within the episode)."""
    v = np.asarray(values, dtype=np.float64)
    where = "" if v.ndim == 0 else f" (elements {np.flatnonzero(~np.isfinite(v.ravel())).tolist()[:8]})"
    episode = f" of the episode with seed {seed}" if seed is not None else ""
    return (f'the policy\'s action "{name}" is {_what(v)}{where} at step {step}{episode}; a non-finite '
            f"action is never sent to the environment, so the episode has no score. Look for a division "
            f"or log that leaves its domain on that state (polc rollout with --seed to trace it, then "
            f"polc analyze), or a non-finite value in the params file")


_FLOATS = (float, np.float32, np.float64)  # the scalars packed rollouts pass (`trace.vector`)


class FiniteActions(gym.Wrapper):
    """Raise `NonFiniteAction` instead of stepping the environment with a NaN or
    infinite action (a dict of arrays by action name, or one array)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._step = 0
        self._seed: Optional[int] = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        self._step = 0
        self._seed = seed if seed is not None else None
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any):
        verify_finite(action, self._step, self._seed)
        self._step += 1
        return self.env.step(action)


def verify_finite(action: Any, step: int, seed: Optional[int]) -> None:
    """Raise `NonFiniteAction` when `action` (a dict of arrays by action name, or one
    array) holds a NaN or infinite value; `step` and `seed` are the message's."""
    items = action.items() if isinstance(action, dict) else [("action", action)]
    for name, value in items:
        if value is None:
            continue
        if type(value) in _FLOATS:  # a scalar, as packed rollouts pass them: no array round trip
            if not math.isfinite(value):
                raise NonFiniteAction(non_finite_message(name, value, step, seed))
            continue
        v = np.asarray(value)
        if v.dtype.kind in "fc" and not np.all(np.isfinite(v)):
            raise NonFiniteAction(non_finite_message(name, v, step, seed))


__all__ = ["FiniteActions", "NonFiniteAction", "non_finite_message", "verify_finite"]

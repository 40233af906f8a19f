"""Vectorised environments for rollouts, kept free of jax imports.

Worker processes of `AsyncVectorEnv` unpickle the environment factory and so
import the module that defines it: this one, which only needs gymnasium.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym


def _make(spec: Any) -> gym.Env:
    return spec.make()


def make_vector_env(spec: Any, n_envs: int, asynchronous: bool) -> gym.vector.VectorEnv:
    """`n_envs` copies of `spec`'s environment. Autoreset is off: the rollout
    resets each finished copy itself, with the seed of its next episode.
    Async workers are spawned (not forked: the parent runs JAX's threads)."""
    fns = [functools.partial(_make, spec) for _ in range(n_envs)]
    mode = gym.vector.AutoresetMode.DISABLED
    if asynchronous:
        return gym.vector.AsyncVectorEnv(fns, copy=False, context="spawn", autoreset_mode=mode)
    return gym.vector.SyncVectorEnv(fns, copy=False, autoreset_mode=mode)

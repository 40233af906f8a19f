"""Vectorised environments for rollouts, kept free of jax imports.

By default every episode of a batch runs in this process (SyncVectorEnv) and
the policy is called once per step for all of them. Measured on 2 cores
(10 evaluation episodes, `benchmarks/bench_rl.py` has the RL figures): Car
Racing 3.7 s in one process vs 20.9 s in 2 worker processes and 10.1 s in 10;
Meta-World's door 7.2 s vs 12.9 s and 20.8 s. A step of either environment
costs less than shipping its observation dict through a pipe, so worker
processes (`asynchronous=True`) only pay off for environments much slower
than these.

Worker processes of `AsyncVectorEnv` unpickle the environment factory and so
import the module that defines it: this one, which only needs gymnasium.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym


def _make(spec: Any) -> gym.Env:
    return spec.make()


# The most environments stepped together by default: one batched policy call per
# step for up to this many episodes (an evaluation of 10 seeds, an RL update of 20).
MAX_BATCH = 64


def default_n_envs(episodes: int) -> int:
    """How many environments to step together for `episodes` episodes."""
    return max(1, min(int(episodes), MAX_BATCH))


def make_vector_env(spec: Any, n_envs: int, asynchronous: bool) -> gym.vector.VectorEnv:
    """`n_envs` copies of `spec`'s environment. Autoreset is off: the rollout
    resets each finished copy itself, with the seed of its next episode.
    Async workers are spawned (not forked: the parent runs JAX's threads)."""
    fns = [functools.partial(_make, spec) for _ in range(n_envs)]
    mode = gym.vector.AutoresetMode.DISABLED
    if asynchronous:
        return gym.vector.AsyncVectorEnv(fns, copy=False, context="spawn", autoreset_mode=mode)
    return gym.vector.SyncVectorEnv(fns, copy=False, autoreset_mode=mode)

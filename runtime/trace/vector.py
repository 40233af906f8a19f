"""Vectorised environments for rollouts, kept free of jax imports.

By default every episode of a batch runs in this process (SyncVectorEnv) and
the policy is called once per step for all of them. Measured on 2 cores
(10 evaluation episodes, `benchmarks/bench_rl.py` has the RL figures): Car
Racing 3.7 s in one process vs 20.9 s in 2 worker processes and 10.1 s in 10;
Meta-World's door 7.2 s vs 12.9 s and 20.8 s. A step of either environment
costs less than shipping its observation dict through a pipe, so worker
processes (`asynchronous=True`) only pay off for environments much slower
than these.

Rollouts and RL collection step them through `make_packed_env`: observations
and actions as packed float32 rows (`PackedEnvs`), not gymnasium's dicts.

Worker processes of `AsyncVectorEnv` unpickle the environment factory and so
import the module that defines it: this one, which only needs gymnasium and numpy.
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Sequence

import gymnasium as gym
import numpy as np


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


# A packed layout: (name, start, size, shape) per field, in row order
# (`polc.runtime.trace.rollout.fields_of`).
Fields = tuple[tuple[str, int, int, tuple[int, ...]], ...]


def _row_actions(row: np.ndarray, actions: Fields) -> dict:
    """One env's action dict from its packed row: scalars as numpy scalars and arrays as
    views, the values gymnasium's vector envs hand each env (`iterate` over a Dict space)."""
    return {name: row[start] if not shape else row[start:start + size].reshape(shape)
            for name, start, size, shape in actions}


def _pack_dict(obs: dict, n: int, fields: Fields, out: np.ndarray) -> np.ndarray:
    for name, start, size, _ in fields:
        out[:, start:start + size] = np.reshape(obs[name], (n, size))
    return out


# Wrappers that hand an observation on untouched (they read actions, steps or the
# episode's end only), so an env under nothing else may return its observation late.
_PASS_THROUGH = ("FiniteActions", "TimeLimit", "OrderEnforcing")


def _passes_observations(env: gym.Env) -> bool:
    while env is not env.unwrapped:
        if type(env).__name__ not in _PASS_THROUGH or not isinstance(env, gym.Wrapper):
            return False
        env = env.env
    return True


def _direct_limit(env: gym.Env) -> Optional[float]:
    """The step limit of an env whose wrappers `PackedEnvs` can stand in for (polc's
    `FiniteActions`, gymnasium's `TimeLimit` and `OrderEnforcing`, exactly those types; inf
    without a `TimeLimit`) when its unwrapped class steps packed rows (`step_many`), else None."""
    from ..envs.finite import FiniteActions

    if not hasattr(type(env.unwrapped), "step_many"):
        return None
    limit = float("inf")
    while env is not env.unwrapped:
        if type(env) is gym.wrappers.TimeLimit:
            limit = min(limit, env._max_episode_steps)
        elif type(env) not in (FiniteActions, gym.wrappers.OrderEnforcing):
            return None
        env = env.env
    return limit


class PackedEnvs:
    """`n` copies of `spec`'s environment stepped in this process, their observations
    packed into one (n, O) float32 array in the order of `obs` (the trace layout's
    `obs_fields`) and their actions read from a packed (n, D) array.

    It is gymnasium's `SyncVectorEnv` with autoreset off, minus the dict of stacked
    arrays it rebuilds every step (which the rollout then packed again): each env's
    observation goes straight into its row. An env whose unwrapped `packed_obs` is the
    base of every array of the observation it returned (Car Racing's), laid out as
    `packed_fields`, is copied as one row; under wrappers that never read observations
    (`_PASS_THROUGH`), its `step` does not compute one at all, and the observations of
    all such envs are computed together after the step (its class's `observe_many`).
    Infos are not collected (nobody reads them; wrappers still see them).

    Those envs are also stepped together, past their wrappers, when the wrappers are
    only `FiniteActions`, `TimeLimit` and `OrderEnforcing` and the class can take packed
    rows (`step_many`, which makes every env's raw action at once): then this class does
    the wrappers' work for all of them at once, by the same rules (a non-finite action
    raises `NonFiniteAction` with the step and seed `FiniteActions` would name, an episode
    is truncated at the `TimeLimit`'s step, no step before a reset). Resets still go
    through the wrappers."""

    def __init__(self, spec: Any, n: int, obs: Fields):
        self.envs = [spec.make() for _ in range(n)]
        self.n, self.obs_fields = n, obs
        self.obs_size = sum(f[2] for f in obs)
        names = tuple(f[0] for f in obs)
        self._fast = [getattr(e.unwrapped, "packed_fields", None) == names for e in self.envs]
        # Envs whose observations are computed together after each step (`observe_many`): packed
        # like the fast ones, of one class, and under wrappers that never look at an observation.
        batch = [i for i, e in enumerate(self.envs) if self._fast[i] and _passes_observations(e)
                 and hasattr(type(e.unwrapped), "observe_many")]
        batch = [i for i in batch if type(self.envs[i].unwrapped) is type(self.envs[batch[0]].unwrapped)]
        self._batch = np.array(batch, dtype=np.intp)
        self._batch_envs = [self.envs[i].unwrapped for i in batch]
        for u in self._batch_envs:
            u.defer_observation = True
        limits = [_direct_limit(self.envs[i]) for i in batch]
        # stepped together past their wrappers (`step_many`), or each through its wrappers
        self._direct = bool(batch) and all(limit is not None for limit in limits)
        self._limit = np.array(limits if self._direct else [], np.float64)
        self._wrapped = [i for i in range(n) if not self._direct or i not in set(batch)]
        # the batch's rows of an (n, ...) array: all of it (a view, not a copy) when the batch is every env
        self._rows_of = slice(None) if batch == list(range(n)) else self._batch
        self._elapsed = np.zeros(n, np.int64)  # steps since each env's reset
        self._seeds: list[Optional[int]] = [None] * n
        self._was_reset = np.zeros(n, bool)
        self._rows = np.zeros((n, self.obs_size), np.float32)
        self._done = np.zeros(n, bool)

    def _put(self, rows: np.ndarray, i: int, obs: dict) -> None:
        if self._fast[i]:
            packed = self.envs[i].unwrapped.packed_obs
            # every array a view of that row: a wrapper that replaced any of them (even one
            # field) is read field by field
            if len(obs) == len(self.obs_fields) and all(
                    getattr(obs.get(name), "base", None) is packed for name, *_ in self.obs_fields):
                rows[i] = packed
                return
        row = rows[i]
        for name, start, size, _ in self.obs_fields:
            row[start:start + size] = np.ravel(obs[name])

    def reset(self, seeds: Sequence[Optional[int]], mask: Optional[np.ndarray] = None) -> np.ndarray:
        """Reset every env (or those where `mask`) with its seed; the packed observations (n, O)."""
        rows = self._rows.copy()
        for i, env in enumerate(self.envs):
            if mask is None or mask[i]:
                # gymnasium passes what is left of the options once it took the mask out: {}
                obs, _ = env.reset(seed=seeds[i], options=None if mask is None else {})
                self._put(rows, i, obs)
                self._done[i] = False
                self._elapsed[i], self._seeds[i], self._was_reset[i] = 0, seeds[i], True
        self._rows = rows
        return rows

    # `step` takes `active`: envs left out are neither stepped nor need a reset (the
    # rollout leaves a finished env idle when no episode is left for it).
    steps_subsets = True

    def step(self, actions: np.ndarray, fields: Fields, active: Optional[np.ndarray] = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step env i with the action dict of row i of `actions` (n, D) (`fields` say where each
        action sits); (packed obs (n, O), rewards (n,) float64, terminated (n,), truncated (n,)).
        With `active` (n,) bool, only those envs step; the others keep their last observation,
        reward 0, and may be finished."""
        every = active is None or bool(active.all())
        if every:
            active = np.ones(self.n, bool)
        if (self._done & active).any():
            raise RuntimeError(f"environment {int(np.flatnonzero(self._done & active)[0])} of the vector env "
                               "finished its episode and was stepped without a reset")
        rows = np.empty_like(self._rows) if every else self._rows.copy()
        rewards = np.zeros(self.n)
        terminated, truncated = np.zeros(self.n, bool), np.zeros(self.n, bool)
        for i in self._wrapped:
            if not active[i]:
                continue
            obs, rewards[i], terminated[i], truncated[i], _ = self.envs[i].step(_row_actions(actions[i], fields))
            if obs is not None:  # None: deferred, computed with the batch below
                self._put(rows, i, obs)
        if every:
            pos, b, envs = slice(None), self._rows_of, self._batch_envs
        else:
            pos = np.flatnonzero(active[self._batch])
            b, envs = self._batch[pos], [self._batch_envs[k] for k in pos]
        if self._direct and envs:
            rewards[b], terminated[b], truncated[b] = self._step_direct(actions[b], fields, pos)
        if envs:
            rows[b] = type(envs[0]).observe_many(envs)
        self._done = (terminated | truncated) | (self._done & ~active)
        self._rows = rows
        return rows, rewards, terminated, truncated

    def _step_direct(self, actions: np.ndarray, fields: Fields, pos=slice(None)
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The batch's envs at positions `pos` stepped past their wrappers, doing the wrappers' work."""
        at = self._batch[pos]
        b = self._rows_of if isinstance(pos, slice) else at
        if not self._was_reset[b].all():  # `OrderEnforcing`'s rule and message
            raise gym.error.ResetNeeded("Cannot call env.step() before calling env.reset()")
        finite = np.isfinite(actions[:, _columns(fields)]).all(axis=1)
        if not finite.all():  # `FiniteActions`' message, for the first env with a bad action
            from ..envs.finite import verify_finite

            j = int(np.argmin(finite))
            verify_finite(_row_actions(actions[j], fields), int(self._elapsed[at[j]]), self._seeds[at[j]])
        envs = self._batch_envs if isinstance(pos, slice) else [self._batch_envs[k] for k in pos]
        rewards, terminated, truncated = type(envs[0]).step_many(envs, actions, fields)
        self._elapsed[b] += 1
        truncated |= self._elapsed[b] >= self._limit[pos]  # `TimeLimit`'s rule
        return rewards, terminated, truncated

    def close(self, terminate: bool = False) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


@functools.lru_cache(maxsize=16)
def _columns(fields: Fields) -> np.ndarray:
    """Every column of a packed row that holds an action laid out as `fields`."""
    return np.concatenate([np.arange(start, start + size) for _, start, size, _ in fields]).astype(np.intp)


class GymPacked:
    """The same interface over a gymnasium vector env (the worker processes of
    `AsyncVectorEnv`): its observation dict packed after each step."""

    def __init__(self, envs: gym.vector.VectorEnv, n: int, obs: Fields):
        self.envs, self.n, self.obs_fields = envs, n, obs
        self.obs_size = sum(f[2] for f in obs)

    def reset(self, seeds: Sequence[Optional[int]], mask: Optional[np.ndarray] = None) -> np.ndarray:
        options = None if mask is None else {"reset_mask": mask}
        obs, _ = self.envs.reset(seed=list(seeds), options=options)
        return _pack_dict(obs, self.n, self.obs_fields, np.empty((self.n, self.obs_size), np.float32))

    steps_subsets = False  # `step` steps every env: a finished one is reset to rerun its seed

    def step(self, actions: np.ndarray, fields: Fields) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        n = self.n
        obs, reward, terminated, truncated, _ = self.envs.step(
            {name: actions[:, start:start + size].reshape((n,) + shape) for name, start, size, shape in fields})
        rows = _pack_dict(obs, n, self.obs_fields, np.empty((n, self.obs_size), np.float32))
        return rows, reward, terminated, truncated

    def close(self, terminate: bool = False) -> None:
        self.envs.close(terminate=terminate)


def make_packed_env(spec: Any, n_envs: int, asynchronous: bool, obs: Fields):
    """`n_envs` copies of `spec`'s environment behind the packed interface (`PackedEnvs`
    in this process, the default; `GymPacked` over worker processes when `asynchronous`)."""
    if asynchronous:
        return GymPacked(make_vector_env(spec, n_envs, True), n_envs, obs)
    return PackedEnvs(spec, n_envs, obs)

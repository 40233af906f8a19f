"""Rollouts, evaluations and RL collection on a `WorkerPool`, with the results the
in-process functions give for the same seeds:

    ray_rollout(pool, params, seeds, config, on_episode, on_steps) -> RolloutResult
    ray_evaluate(pool, params, spec, seeds, config, on_episode, on_steps) -> EvalResult
    ray_train(pool, policy, params, spec, config, directory, ...)  -> RLResult

Each worker steps its share of the episodes batched as the local code does (one
policy call per step for all of its environments), and an episode's data depend only
on its seed (and an RL update's key and the episode's place in the update), never on
which worker or slot ran it, so the shares put together are the whole run. Episodes
reach `on_episode` in seed-list order, as each share's results arrive; the trace
writer and the evaluation's scoring are the local ones.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..rl.collect import Collector, Episodes
from ..trace.evaluate import EvalResult
from ..trace.rollout import Episode, RolloutConfig, RolloutResult
from ..trace.vector import MAX_BATCH
from .pool import WorkerPool, shares


def host_params(params):
    """The params as NumPy arrays (they travel to the workers; no device buffers)."""
    import jax

    return jax.tree.map(np.asarray, params)


def _share_config(config: RolloutConfig, n: int) -> RolloutConfig:
    from dataclasses import replace

    return replace(config, n_envs=max(1, min(config.n_envs, n)), asynchronous=None)


def ray_rollout(pool: WorkerPool, params, seeds: Sequence[int], config: RolloutConfig = RolloutConfig(),
                on_episode: Optional[Callable[[Episode], None]] = None,
                on_steps: Optional[Callable[[int], None]] = None) -> RolloutResult:
    """`trace.rollout.rollout` on the pool: episode k runs seed `seeds[k]` and keeps index k."""
    seeds = [int(s) for s in seeds]
    ref = pool.put(host_params(params))
    parts = shares(len(seeds), pool.size, MAX_BATCH)
    returns, lengths = np.zeros(len(seeds)), np.zeros(len(seeds), np.int64)

    def arrived(_, episodes: list[Episode]) -> None:
        for ep in episodes:
            returns[ep.index], lengths[ep.index] = ep.ret, ep.length
            if on_steps is not None:
                on_steps(ep.length)
            if on_episode is not None:
                on_episode(ep)

    pool.map("rollout", [(ref, a, seeds[a:b], _share_config(config, b - a)) for a, b in parts], arrived)
    return RolloutResult(np.asarray(seeds, np.int64), returns, lengths)


def merge_evaluations(parts: Sequence[EvalResult]) -> EvalResult:
    """Evaluations of consecutive shares of a seed list as one evaluation of the whole."""
    first = parts[0]
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
    return EvalResult(first.env, cat("seeds"), cat("returns"), cat("lengths"),
                      None if first.scores is None else cat("scores"), first.metric, first.solved_at,
                      None if first.successes is None else cat("successes"))


def ray_evaluate(pool: WorkerPool, params, seeds: Sequence[int], config: RolloutConfig = RolloutConfig(),
                 on_episode: Optional[Callable[[Episode], None]] = None,
                 on_steps: Optional[Callable[[int], None]] = None) -> EvalResult:
    """`trace.evaluate.evaluate` on the pool: each worker evaluates its share of the seeds
    (metric, solved share and success flags computed there by the same code)."""
    seeds = [int(s) for s in seeds]
    ref = pool.put(host_params(params))
    parts = shares(len(seeds), pool.size, MAX_BATCH)

    def arrived(j: int, ev: EvalResult) -> None:
        start = parts[j][0]
        for k, (s, r, n) in enumerate(zip(ev.seeds, ev.returns, ev.lengths)):
            if on_steps is not None:
                on_steps(int(n))
            if on_episode is not None:
                on_episode(Episode(start + k, int(s), float(r), int(n), None))

    results = pool.map("evaluate", [(ref, seeds[a:b], _share_config(config, b - a)) for a, b in parts], arrived)
    return merge_evaluations(results)


def merge_episodes(parts: Sequence[Episodes]) -> Episodes:
    """The episodes of consecutive shares of an update as the update's `Episodes`."""
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
    return Episodes(cat("seeds"), cat("obs"), cat("draws"), cat("logp"), cat("rewards"), cat("mask"),
                    cat("returns"), cat("lengths"), sum(p.resets for p in parts),
                    sum(p.idle_resets for p in parts))


class RayCollector(Collector):
    """`rl.collect.Collector` whose episodes the pool's workers collect, each its share of
    the update (`workers.ShareCollector`: the same noise as one process would draw).
    `Episodes.idle_resets` counts every worker's idle restarts, so it may differ from a
    local run's; the training episodes (`resets`) and all the data are the same."""

    def __init__(self, pool: WorkerPool, policy, spec: Any, n_envs: int = 1, min_std: float = 0.0):
        super().__init__(policy, spec, n_envs, False, min_std)
        self.pool, self.min_std = pool, float(min_std)

    def run(self, params, key, seeds: Sequence[int],
            on_episode: Optional[Callable[[int, int, float, int], None]] = None, std_scale: float = 1.0) -> Episodes:
        seeds = [int(s) for s in seeds]
        ref = self.pool.put(host_params(params))
        key = np.asarray(key)
        parts = shares(len(seeds), self.pool.size, MAX_BATCH)

        def arrived(j: int, eps: Episodes) -> None:
            if on_episode is not None:
                for k in range(len(eps.seeds)):
                    on_episode(parts[j][0] + k, int(eps.seeds[k]), float(eps.returns[k]), int(eps.lengths[k]))

        calls = [(ref, key, a, seeds[a:b], min(self.n_envs, b - a), self.min_std, float(std_scale))
                 for a, b in parts]
        return merge_episodes(self.pool.map("collect", calls, arrived))

    def close(self) -> None:  # the pool's workers hold the environments; the pool closes them
        pass


def ray_train(pool: WorkerPool, policy, params, spec: Any, config, directory: str, **kw):
    """`rl.train.train` with every update's episodes collected by the pool's workers."""
    from ..rl.train import train

    def make(policy, spec, n_envs=1, asynchronous=None, min_std=0.0):
        return RayCollector(pool, policy, spec, n_envs, min_std)

    return train(policy, params, spec, config, directory, make_collector=make, **kw)

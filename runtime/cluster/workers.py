"""The rollout-worker actor: one per CPU of the cluster, each holding its environments
(made from the env spec it was sent, `gym:` ones included) and the policy, compiled once
when the actor starts, from its source text (so a node without the .pol file runs it).

Every method runs the local collection code on the actor's share of the episodes and
returns what that code returns, so the driver's results are the local ones:

    evaluate(params, seeds, config)                 -> EvalResult of those seeds (`trace.evaluate`)
    rollout(params, offset, seeds, config)          -> [Episode], indices offset..offset+len-1
    collect(params, key, offset, seeds, ...)        -> Episodes of update episodes offset.. (`rl.collect`)

The class is plain Python; `pool.py` makes it a Ray actor (`ray.remote(RolloutWorker)`),
so importing this module does not import Ray.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Sequence

import numpy as np

from ..rl.collect import Collector, Episodes
from ..trace.evaluate import EvalResult, evaluate
from ..trace.rollout import Episode, Rollout, RolloutConfig


class ShareCollector(Collector):
    """A `Collector` for episodes offset, offset+1, ... of an update: the noise of step t
    of update episode k is drawn with fold_in(fold_in(key, k), t) (`rl.collect`), so a
    share run with its offset draws exactly what the whole update run in one process draws."""

    def __init__(self, policy, spec: Any, n_envs: int, min_std: float):
        super().__init__(policy, spec, n_envs, False, min_std)
        self.offset = 0
        whole = self.step_fn
        self.step_fn = lambda params, key, flat, episode, *rest: whole(params, key, flat, episode + self.offset, *rest)


class RolloutWorker:
    """See the module docstring. `spec` is an EnvSpec (pickled by Ray), `source` and
    `file` the policy's Pol text and the file it came from (for messages)."""

    def __init__(self, spec: Any, source: str, file: str):
        import polc

        self.spec = spec
        self.policy = polc.loads(source, file).compile()
        self._rollouts: dict[RolloutConfig, Rollout] = {}
        self._collectors: dict[tuple[int, float], ShareCollector] = {}

    def where(self) -> dict:
        """Which process on which host this actor is (progress and the tests)."""
        return {"pid": os.getpid(), "host": socket.gethostname()}

    def evaluate(self, params, seeds: Sequence[int], config: RolloutConfig) -> EvalResult:
        return evaluate(self.policy, params, self.spec, [int(s) for s in seeds], config)

    def rollout(self, params, offset: int, seeds: Sequence[int], config: RolloutConfig) -> list[Episode]:
        if config not in self._rollouts:  # one compiled step and one vector env per config, kept
            self._rollouts[config] = Rollout(self.policy, self.spec, config)
        episodes: list[Episode] = []
        self._rollouts[config].run(params, seeds, episodes.append)
        return [_shifted(ep, offset) for ep in episodes]

    def collect(self, params, key, offset: int, seeds: Sequence[int], n_envs: int, min_std: float,
                std_scale: float) -> Episodes:
        k = (int(n_envs), float(min_std))
        if k not in self._collectors:
            self._collectors[k] = ShareCollector(self.policy, self.spec, n_envs, min_std)
        collector = self._collectors[k]
        collector.offset = int(offset)
        return collector.run(params, key, seeds, None, std_scale)

    def close(self) -> None:
        for r in self._rollouts.values():
            r.close()
        for c in self._collectors.values():
            c.close()


def _shifted(ep: Episode, offset: int) -> Episode:
    """An episode of a share as the whole run numbers it (its index and `episode` column)."""
    if not offset:
        return ep
    columns = ep.columns
    if columns is not None:
        columns = dict(columns, episode=np.full(ep.length, ep.index + offset, np.int32))
    return ep._replace(index=ep.index + offset, columns=columns)

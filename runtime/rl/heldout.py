"""The seeds of an RL run and the held-out evaluation of `keep="best"`.

Between the demonstration seeds (0..999) and the evaluation seeds (10000..) lie the
seeds RL may use: the last VALIDATION of them (at most half) are held out for
choosing the params to keep (9000..9999), the rest train (1000..8999). So the
selection never sees a track the policy trained, was fitted or is evaluated on.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

VALIDATION = 1000       # the held-out seeds: the last VALIDATION below the evaluation seeds


def _pools(spec: Any) -> tuple[range, range]:
    """(training seeds, validation seeds): the seeds between the demonstration and
    evaluation seeds, the last VALIDATION of them (at most half) held out."""
    demo = getattr(spec, "demo_seeds", range(0, 1000))
    evals = getattr(spec, "eval_seeds", range(10_000, 20_000))
    gap = range(demo.stop, evals.start)
    held = min(VALIDATION, len(gap) // 2)
    return gap[:len(gap) - held], gap[len(gap) - held:]


def training_seeds(spec: Any, config, update: int) -> tuple[list[int], np.ndarray]:
    """Update `update`'s episode seeds (E,) and their group ids (E,) for `config` (an
    `RLConfig`): group g runs pool[(update * seeds_per_update + g) % len(pool)]."""
    pool = _pools(spec)[0]
    k, per = config.seeds_per_update, config.episodes_per_update // config.seeds_per_update
    groups = np.repeat(np.arange(k), per)
    return [pool[(update * k + g) % len(pool)] for g in groups], groups


def validation_seeds(spec: Any, n: int) -> list[int]:
    """The first `n` held-out seeds (9000.. for Car Racing): never training, demonstration or evaluation seeds."""
    return list(_pools(spec)[1][:n])


class Validator:
    """The held-out evaluation of `keep="best"`: `val_episodes` validation seeds, mean or
    sampled actions, the environment's metric (higher or lower is better)."""

    def __init__(self, policy, spec: Any, config):  # config: an RLConfig
        from ..envs.metric import RETURN

        self.policy, self.spec, self.config = policy, spec, config
        self.seeds = validation_seeds(spec, config.val_episodes)
        self.higher = getattr(spec, "metric", RETURN).higher_is_better

    def __call__(self, params) -> float:
        from ..trace.evaluate import evaluate
        from ..trace.rollout import RolloutConfig

        c = self.config
        rc = RolloutConfig(n_envs=min(c.n_envs, len(self.seeds)), sample=c.val_actions == "sampled", trace=False,
                           asynchronous=c.asynchronous)
        return float(f"{evaluate(self.policy, params, self.spec, self.seeds, rc).mean:.6g}")

    def better(self, score: float, than: Optional[float]) -> bool:
        return than is None or (score > than if self.higher else score < than)

    def due(self, state) -> bool:
        """After every `val_every` updates, and after the budget's last update."""
        c = self.config
        return state.updates % c.val_every == 0 or state.resets + c.episodes_per_update > c.resets

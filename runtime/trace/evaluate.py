"""Evaluation: a policy's score over unseen seeds (`polc eval`).

Seeds come from the environment's `eval_seeds` (10_000 upward), which never
overlap its demonstration seeds (0..999): `--seeds 10` is the first ten of
them. The score of an episode is the environment's `metric`: the undiscounted
return unless it says otherwise (the door: the minimum handle-to-target
distance, lower is better, computed from each episode's step table).
Reported: the mean and the (population, ddof=0) standard deviation of the
scores, and a per-seed table (with the return beside any other metric).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from ..envs.metric import RETURN, Metric
from .rollout import RolloutConfig, rollout


class EvalResult(NamedTuple):
    env: str
    seeds: np.ndarray    # (E,) int64
    returns: np.ndarray  # (E,) float64
    lengths: np.ndarray  # (E,) int64
    scores: Optional[np.ndarray] = None  # (E,) float64: the metric per episode; None when it is the return
    metric: Metric = RETURN

    @property
    def values(self) -> np.ndarray:
        """(E,) the metric of each episode (the returns for the return)."""
        return self.returns if self.scores is None else self.scores

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def std(self) -> float:
        return float(np.std(self.values))

    def to_json(self, **extra: Any) -> dict:
        out = {"env": self.env, "episodes": len(self.seeds), "mean_return": round(float(np.mean(self.returns)), 2),
               "std_return": round(float(np.std(self.returns)), 2),
               "per_seed": [{"seed": int(s), "return": round(float(r), 2), "steps": int(n)}
                            for s, r, n in zip(self.seeds, self.returns, self.lengths)]}
        if not self.metric.is_return:
            out.update(metric=self.metric.key, higher_is_better=self.metric.higher_is_better,
                       mean=round(self.mean, 4), std=round(self.std, 4))
            for row, v in zip(out["per_seed"], self.values):
                row[self.metric.key] = round(float(v), 4)
        return {**out, **extra}

    def summary(self) -> str:
        n = len(self.seeds)
        if self.metric.is_return:
            return f"{self.env}: return {self.mean:.1f} ± {self.std:.1f} over {n} unseen seeds"
        unit = f" {self.metric.unit}" if self.metric.unit else ""
        return (f"{self.env}: {self.metric.name} {self.mean:.4f} ± {self.std:.4f}{unit} over {n} unseen seeds "
                f"({self.metric.direction})")


def eval_seeds(spec: Any, n: int, start: Optional[int] = None) -> list[int]:
    """`n` evaluation seeds: the environment's first `n` eval seeds, or `start`, start+1, ...
    (a start inside the demonstration seeds is refused)."""
    seeds, demo = spec.eval_seeds, spec.demo_seeds
    chosen = list(seeds[:n]) if start is None else list(range(start, start + n))
    overlap = [s for s in chosen if s in demo]
    if overlap:
        raise ValueError(f"evaluation seeds {overlap[0]}..{overlap[-1]} overlap the demonstration seeds "
                         f"{demo.start}..{demo.stop - 1}; evaluate on seeds from {seeds.start} upward")
    return chosen


def evaluate(policy, params, spec: Any, seeds: Sequence[int], config: RolloutConfig = RolloutConfig(),
             on_episode=None) -> EvalResult:
    """Run one episode per seed; per-seed returns, lengths and the environment's
    metric. Untraced when the metric is the return; otherwise each episode's
    step table is kept just long enough to score it."""
    metric = getattr(spec, "metric", RETURN)
    cfg = RolloutConfig(config.n_envs, config.sample, config.noise_seed, not metric.is_return, config.asynchronous)
    scores = np.zeros(len(seeds))

    def done(ep) -> None:
        if ep.columns is not None:
            scores[ep.index] = metric.of_episode(ep.columns)
        if on_episode is not None:
            on_episode(ep)

    res = rollout(policy, params, spec, seeds, cfg, done)
    return EvalResult(spec.schema.name, res.seeds, res.returns, res.lengths,
                      None if metric.is_return else scores, metric)


def evaluate_expert(spec: Any, seeds: Sequence[int], on_episode=None) -> EvalResult:
    """The environment's privileged expert over `seeds` (one episode each, in
    this process: the expert reads the simulator)."""
    from .demos import run_expert

    metric = getattr(spec, "metric", RETURN)
    episodes, scores = [], []
    for k, seed in enumerate(seeds):
        ep, columns = run_expert(spec, int(seed), k)
        episodes.append(ep)
        scores.append(metric.of_episode(columns))
        if on_episode is not None:
            on_episode(ep)
    return EvalResult(spec.schema.name, np.asarray([e.seed for e in episodes], np.int64),
                      np.asarray([e.ret for e in episodes]), np.asarray([e.length for e in episodes], np.int64),
                      None if metric.is_return else np.asarray(scores), metric)


def render(result: EvalResult):
    """A rich table: one row per seed, then the mean ± std (print `summary()` beside it);
    a metric other than the return gets its own first column."""
    from rich.table import Table

    m = result.metric
    extra = [] if m.is_return else [f"{m.name}" + (f" ({m.unit})" if m.unit else "")]
    t = Table()
    for name in ["seed", *extra, "return", "steps"]:
        t.add_column(name, justify="right")
    for s, v, r, n in zip(result.seeds, result.values, result.returns, result.lengths):
        t.add_row(str(s), *([f"{v:.4f}"] if extra else []), f"{r:.1f}", str(n))
    t.add_section()
    if extra:
        t.add_row("mean ± std", f"{result.mean:.4f} ± {result.std:.4f}",
                  f"{np.mean(result.returns):.1f} ± {np.std(result.returns):.1f}", "")
    else:
        t.add_row("mean ± std", f"{result.mean:.1f} ± {result.std:.1f}", "")
    return t

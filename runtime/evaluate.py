"""Evaluation: a policy's return over unseen seeds (`polc eval`).

Seeds come from the environment's `eval_seeds` (10_000 upward), which never
overlap its demonstration seeds (0..999): `--seeds 10` is the first ten of
them. Reported: the mean and the (population, ddof=0) standard deviation of
the undiscounted episode returns, and a per-seed table.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from .rollout import RolloutConfig, rollout


class EvalResult(NamedTuple):
    env: str
    seeds: np.ndarray    # (E,) int64
    returns: np.ndarray  # (E,) float64
    lengths: np.ndarray  # (E,) int64

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        return float(np.std(self.returns))

    def to_json(self, **extra: Any) -> dict:
        return {"env": self.env, "episodes": len(self.seeds), "mean_return": round(self.mean, 2),
                "std_return": round(self.std, 2),
                "per_seed": [{"seed": int(s), "return": round(float(r), 2), "steps": int(n)}
                             for s, r, n in zip(self.seeds, self.returns, self.lengths)], **extra}

    def summary(self) -> str:
        return f"{self.env}: return {self.mean:.1f} ± {self.std:.1f} over {len(self.seeds)} unseen seeds"


def eval_seeds(spec: Any, n: int, start: Optional[int] = None) -> list[int]:
    """`n` evaluation seeds: the environment's first `n` eval seeds, or `start`, start+1, ...
    (a start inside the demonstration seeds is refused)."""
    seeds = getattr(spec, "eval_seeds", range(10_000, 20_000))
    demo = getattr(spec, "demo_seeds", range(0, 1000))
    chosen = list(seeds[:n]) if start is None else list(range(start, start + n))
    overlap = [s for s in chosen if s in demo]
    if overlap:
        raise ValueError(f"evaluation seeds {overlap[0]}..{overlap[-1]} overlap the demonstration seeds "
                         f"{demo.start}..{demo.stop - 1}; evaluate on seeds from {seeds.start} upward")
    return chosen


def evaluate(policy, params, spec: Any, seeds: Sequence[int], config: RolloutConfig = RolloutConfig(),
             on_episode=None) -> EvalResult:
    """Run one untraced episode per seed; returns per-seed returns and lengths."""
    cfg = RolloutConfig(config.n_envs, config.sample, config.noise_seed, False, config.asynchronous)
    res = rollout(policy, params, spec, seeds, cfg, on_episode)
    return EvalResult(spec.schema.name, res.seeds, res.returns, res.lengths)


def evaluate_expert(spec: Any, seeds: Sequence[int], on_episode=None) -> EvalResult:
    """The environment's privileged expert over `seeds` (one episode each, in
    this process: the expert reads the simulator)."""
    from .demos import run_expert

    episodes = []
    for k, seed in enumerate(seeds):
        ep, _ = run_expert(spec, int(seed), k)
        episodes.append(ep)
        if on_episode is not None:
            on_episode(ep)
    return EvalResult(spec.schema.name, np.asarray([e.seed for e in episodes], np.int64),
                      np.asarray([e.ret for e in episodes]), np.asarray([e.length for e in episodes], np.int64))


def render(result: EvalResult):
    """A rich table: one row per seed, then the mean ± std (print `summary()` beside it)."""
    from rich.table import Table

    t = Table()
    t.add_column("seed", justify="right")
    t.add_column("return", justify="right")
    t.add_column("steps", justify="right")
    for s, r, n in zip(result.seeds, result.returns, result.lengths):
        t.add_row(str(s), f"{r:.1f}", str(n))
    t.add_section()
    t.add_row("mean ± std", f"{result.mean:.1f} ± {result.std:.1f}", "")
    return t

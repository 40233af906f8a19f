"""Evaluation: a policy's score over unseen seeds (`polc eval`).

Seeds come from the environment's `eval_seeds` (10_000 upward), which never
overlap its demonstration seeds (0..999): `--seeds 10` is the first ten of
them. The score of an episode is the environment's `metric`: the undiscounted
return unless it says otherwise (the door: the minimum handle-to-target
distance, lower is better, computed from each episode's step table).
Reported: the mean and the (population, ddof=0) standard deviation of the
scores, and a per-seed table (with the return beside any other metric). Where
the environment spec defines them, also:

- `solved_at` (Car Racing: 900): the share of episodes whose score is at or
  above it (CarRacing counts as solved at an average of 900 over 100 tracks);
- `success` (the door: Meta-World's `info["success"]`): an episode succeeds when
  any of its steps reports success (`metaworld.evaluation` ends an episode at
  its first success and counts it), and the success rate is the share of
  episodes that did. The flag is read from the env's info dict by a wrapper
  (`SuccessLog`), so those episodes run in this process.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, NamedTuple, Optional, Sequence

import gymnasium as gym
import numpy as np

from ..envs.metric import RETURN, Metric
from .rollout import Rollout, RolloutConfig


class EvalResult(NamedTuple):
    env: str
    seeds: np.ndarray    # (E,) int64
    returns: np.ndarray  # (E,) float64
    lengths: np.ndarray  # (E,) int64
    scores: Optional[np.ndarray] = None  # (E,) float64: the metric per episode; None when it is the return
    metric: Metric = RETURN
    solved_at: Optional[float] = None    # the spec's "solved" score (Car Racing: 900)
    successes: Optional[np.ndarray] = None  # (E,) bool: the env reported success in the episode

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

    @property
    def solved(self) -> Optional[np.ndarray]:
        """(E,) bool: the episode's score is at or above `solved_at` (at or below it
        for a lower-is-better metric); None without a threshold."""
        if self.solved_at is None:
            return None
        v = self.values
        return v >= self.solved_at if self.metric.higher_is_better else v <= self.solved_at

    @property
    def solved_share(self) -> Optional[float]:
        """The share of episodes at the "solved" score, in [0, 1]; None without a threshold."""
        solved = self.solved
        return None if solved is None else float(np.mean(solved))

    @property
    def mean_solved(self) -> Optional[bool]:
        """Whether the mean score reaches `solved_at` (gymnasium's `reward_threshold` is defined
        on the mean over 100 episodes, Car Racing's on 100 tracks); None without a threshold."""
        if self.solved_at is None:
            return None
        m = self.mean
        return bool(m >= self.solved_at if self.metric.higher_is_better else m <= self.solved_at)

    @property
    def decimals(self) -> int:
        """Decimals of the returns in text: `decimals(returns, the threshold when it is on them)`."""
        return decimals(self.returns, self.solved_at if self.metric.is_return else None)

    @property
    def success_rate(self) -> Optional[float]:
        """The share of episodes in which the env reported success; None if it reports none."""
        return None if self.successes is None else float(np.mean(self.successes))

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
        if self.solved_at is not None:
            out.update(solved_at=self.solved_at, mean_solved=self.mean_solved, solved_share=round(self.solved_share, 4))
            for row, ok in zip(out["per_seed"], self.solved):
                row["solved"] = bool(ok)
        if self.successes is not None:
            out.update(success_rate=round(self.success_rate, 4))
            for row, ok in zip(out["per_seed"], self.successes):
                row["success"] = bool(ok)
        return {**out, **extra}

    def summary(self) -> str:
        n, d = len(self.seeds), self.decimals
        if self.metric.is_return:
            text = f"{self.env}: return {self.mean:.{d}f} ± {self.std:.{d}f} over {n} unseen seeds"
        else:
            unit = f" {self.metric.unit}" if self.metric.unit else ""
            text = (f"{self.env}: {self.metric.name} {self.mean:.4f} ± {self.std:.4f}{unit} over {n} unseen seeds "
                    f"({self.metric.direction})")
        if self.solved_at is not None:
            text += "; " + self.threshold_sentence()
        if self.successes is not None:
            text += f"; success rate {self.success_rate:.2f} ({int(np.sum(self.successes))}/{n})"
        return text


    def threshold_sentence(self) -> str:
        """`the mean meets the solved threshold -3.75 (a mean at or above it); 49/100 episodes (49%)
        reach it` (the threshold is on the mean, as gymnasium defines `reward_threshold`)."""
        side = "at or above" if self.metric.higher_is_better else "at or below"
        k, n = int(np.sum(self.solved)), len(self.seeds)
        return (f"the mean {'meets' if self.mean_solved else 'misses'} the solved threshold {self.solved_at:g} "
                f"(a mean {side} it); {k}/{n} episodes ({self.solved_share:.0%}) reach it")


def decimals(values: np.ndarray, threshold: Optional[float] = None) -> int:
    """Decimals that show `values` to 3 significant digits at their typical size (the median
    magnitude: Reacher's -3.64, Car Racing's 932.3) and `threshold` as written (-3.75): at least
    1, at most 6."""
    v = np.abs(np.asarray(values, np.float64))
    v = v[np.isfinite(v) & (v > 0)]
    d = 2 - int(np.floor(np.log10(np.median(v)))) if v.size else 1
    if threshold is not None and math.isfinite(threshold):
        d = max(d, -min(0, Decimal(repr(float(threshold))).normalize().as_tuple().exponent))
    return min(6, max(1, d))


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


class SuccessLog:
    """Which episodes reported success: a spec whose environments are wrapped so that
    every `reset(seed=s)` starts a record for `s` and every step whose `info[key]`
    is truthy marks it. The records live in this process, so the environments must
    too (a rollout's default; `evaluate` asks for it). Every other attribute is the
    wrapped spec's.

        log = SuccessLog(spec, "success")
        ...run episodes with log.make()...
        log.of(seeds)   # (E,) bool, the first episode run with each seed
    """

    def __init__(self, spec: Any, key: str):
        self.spec, self.key = spec, key
        self.records: list[list] = []  # [seed, succeeded] per episode started, in order

    def make(self, *args: Any, **kw: Any) -> gym.Env:
        return _RecordSuccess(self.spec.make(*args, **kw), self)

    def of(self, seeds: Sequence[int]) -> np.ndarray:
        """(E,) bool for `seeds` (distinct): the first episode run with each. Later
        episodes of a seed are the idle reruns of a vector env, not recorded."""
        first: dict[int, bool] = {}
        for seed, ok in self.records:
            first.setdefault(seed, ok)
        missing = [int(s) for s in seeds if int(s) not in first]
        if missing:
            raise RuntimeError(f"internal error: no success record for seeds {missing[:3]}")
        return np.asarray([first[int(s)] for s in seeds], bool)

    def __getattr__(self, name: str) -> Any:
        if name == "spec":
            raise AttributeError(name)
        return getattr(self.spec, name)


class _RecordSuccess(gym.Wrapper):
    def __init__(self, env: gym.Env, log: SuccessLog):
        super().__init__(env)
        self._log, self._record = log, None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        out = self.env.reset(seed=seed, options=options)
        self._record = [-1 if seed is None else int(seed), False]
        self._log.records.append(self._record)
        return out

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._record is not None and info.get(self._log.key):
            self._record[1] = True
        return obs, reward, terminated, truncated, info


def _success_log(spec: Any) -> Optional[SuccessLog]:
    key = getattr(spec, "success", None)
    return None if key is None else SuccessLog(spec, key)


def evaluate(policy, params, spec: Any, seeds: Sequence[int], config: RolloutConfig = RolloutConfig(),
             on_episode=None, on_steps=None) -> EvalResult:
    """Run one episode per seed; per-seed returns, lengths, the environment's
    metric and, where the spec defines them, which episodes solved the task and
    which succeeded. Untraced when the metric is the return; otherwise each
    episode's step table is kept just long enough to score it. An environment
    that reports success runs in this process (its flags are read here)."""
    return evaluate_many(policy, [params], spec, seeds, config, on_episode, on_steps)[0]


def evaluate_many(policy, params_list: Sequence[Any], spec: Any, seeds: Sequence[int],
                  config: RolloutConfig = RolloutConfig(), on_episode=None, on_steps=None) -> list[EvalResult]:
    """`evaluate` for each params in `params_list`, one after another, on the same seeds
    and with one compiled step and one set of environments for all of them (what
    `polc fit`'s closed-loop check of the declared and the fitted weights runs): each
    result is the one `evaluate` gives for those params alone."""
    metric = getattr(spec, "metric", RETURN)
    log = _success_log(spec)
    asynchronous = False if log is not None else config.asynchronous
    n = max(1, min(config.n_envs, len(seeds)))
    cfg = RolloutConfig(n, config.sample, config.noise_seed, not metric.is_return, asynchronous)
    results = []
    with Rollout(policy, spec if log is None else log, cfg) as r:
        for params in params_list:
            scores = np.zeros(len(seeds))

            def done(ep) -> None:
                if ep.columns is not None:
                    scores[ep.index] = metric.of_episode(ep.columns)
                if on_episode is not None:
                    on_episode(ep)

            if log is not None:
                log.records.clear()  # the success flags of this params' episodes only
            res = r.run(params, seeds, done, on_steps)
            results.append(EvalResult(spec.schema.name, res.seeds, res.returns, res.lengths,
                                      None if metric.is_return else scores, metric, getattr(spec, "solved_at", None),
                                      None if log is None else log.of(res.seeds)))
    return results


def evaluate_expert(spec: Any, seeds: Sequence[int], on_episode=None) -> EvalResult:
    """The environment's privileged expert over `seeds` (one episode each, in
    this process: the expert reads the simulator)."""
    from .demos import run_expert

    metric = getattr(spec, "metric", RETURN)
    log = _success_log(spec)
    episodes, scores = [], []
    for k, seed in enumerate(seeds):
        ep, columns = run_expert(spec if log is None else log, int(seed), k)
        episodes.append(ep)
        scores.append(metric.of_episode(columns))
        if on_episode is not None:
            on_episode(ep)
    return EvalResult(spec.schema.name, np.asarray([e.seed for e in episodes], np.int64),
                      np.asarray([e.ret for e in episodes]), np.asarray([e.length for e in episodes], np.int64),
                      None if metric.is_return else np.asarray(scores), metric, getattr(spec, "solved_at", None),
                      None if log is None else log.of(seeds))


def render(result: EvalResult):
    """A rich table: one row per seed, then the mean ± std (print `summary()` beside it);
    a metric other than the return gets its own first column."""
    from rich.table import Table

    m = result.metric
    extra = [] if m.is_return else [f"{m.name}" + (f" ({m.unit})" if m.unit else "")]
    flags = ([] if result.solved_at is None else [f"{'≥' if m.higher_is_better else '≤'} {result.solved_at:g}"]) + (
        [] if result.successes is None else ["success"])
    d = result.decimals
    caption = None
    if result.solved_at is not None:
        side = "at or above" if m.higher_is_better else "at or below"
        caption = f"{flags[0]} on the mean row: the mean (the threshold is on it), then the episodes {side} it"
    t = Table(caption=caption)
    for name in ["seed", *extra, "return", "steps", *flags]:
        t.add_column(name, justify="right")
    solved = result.solved if result.solved is not None else [None] * len(result.seeds)
    success = result.successes if result.successes is not None else [None] * len(result.seeds)
    yes = lambda ok: [] if ok is None else ["yes" if ok else "no"]  # noqa: E731
    for s, v, r, n, a, b in zip(result.seeds, result.values, result.returns, result.lengths, solved, success):
        t.add_row(str(s), *([f"{v:.4f}"] if extra else []), f"{r:.{d}f}", str(n), *yes(a), *yes(b))
    t.add_section()
    k, e = (0 if result.solved is None else int(np.sum(result.solved))), len(result.seeds)
    shares = ([] if result.solved_at is None else [f"{yes(result.mean_solved)[0]} ({k}/{e})"]) + (
        [] if result.successes is None else [f"{result.success_rate:.2f}"])
    if extra:
        t.add_row("mean ± std", f"{result.mean:.4f} ± {result.std:.4f}",
                  f"{np.mean(result.returns):.{d}f} ± {np.std(result.returns):.{d}f}", "", *shares)
    else:
        t.add_row("mean ± std", f"{result.mean:.{d}f} ± {result.std:.{d}f}", "", *shares)
    return t

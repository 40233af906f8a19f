"""A population of candidate revisions fitted and scored, and the best of them.

`evaluate_candidates` is the one place a population is fitted and scored: it takes the list
of candidates and returns their scores, one per candidate in the same order, and touches
nothing else (no run directory, no model), so the same call can be spread over workers.
A candidate is scored by the environment's metric, mean over the run's training seeds (the
rollout seeds), never over the unseen evaluation seeds: the table's evaluation of the
chosen revision stays a fair one. Ties go to the earlier candidate in `order`, a
permutation drawn from the run's seed and the round (`candidate_order`), so which of equal
revisions wins does not depend on the order the model wrote them.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional, Sequence


class Candidate(NamedTuple):
    index: int            # 1 .. K, the order the model wrote them
    text: str             # the checked program text
    program: Any          # its polc.Program


class Score(NamedTuple):
    index: int
    verdict: str                      # "scored", or why it has no score (unfittable, non-finite)
    score: Optional[float]            # the metric's mean over the seeds; None without a score
    scores: tuple[float, ...]         # per seed
    val_loss: Optional[float]         # the fit's validation loss
    episodes: int                     # environment episodes it took (resets)


def candidate_order(seed: int, k: int, n: int) -> list[int]:
    """The tie-breaking order of round `k`'s `n` candidates (indices 1..n), from the run's seed."""
    import numpy as np

    return [int(i) + 1 for i in np.random.default_rng([seed, k]).permutation(n)]


def evaluate_candidates(candidates: Sequence[Candidate], demo: Any, spec: Any, seeds: Sequence[int],
                        settings: Any, fit: Optional[Callable[..., Any]] = None, local: bool = False) -> list[Score]:
    """Fit each candidate to the demonstration `demo` and score it on `seeds` (mean actions,
    untraced); one `Score` per candidate, in order. `fit` is `work.fit_program` unless given.
    With `settings.ray_address` set (and not `local`), a population of two or more is spread over
    that Ray cluster, one candidate a task, with the same scores (`on_ray`)."""
    address = getattr(settings, "ray_address", None)
    if not local and len(candidates) > 1 and address:
        from .on_ray import ray_evaluate_candidates

        return ray_evaluate_candidates(address, evaluate_candidates, candidates, demo, spec, seeds, settings, fit)
    from ...envs.finite import NonFiniteAction
    from ...trace.evaluate import evaluate
    from ..work import FitFailed, fit_program, rollout_config

    fit = fit or fit_program
    out = []
    for c in candidates:
        try:
            fitted = fit(c.program, demo, settings)
        except FitFailed as e:
            out.append(Score(c.index, f"unfittable: {e}", None, (), None, 0))
            continue
        try:
            result = evaluate(fitted.policy, fitted.params, spec, list(seeds),
                              rollout_config(settings, len(seeds), trace=False))
        except NonFiniteAction as e:
            out.append(Score(c.index, f"non-finite action: {e}", None, (), fitted.info["val_loss"], len(seeds)))
            continue
        values = tuple(float(v) for v in result.values)
        mean = float(sum(values) / len(values))
        verdict = "scored" if math.isfinite(mean) else "non-finite score"
        out.append(Score(c.index, verdict, mean if math.isfinite(mean) else None, values,
                         float(fitted.info["val_loss"]), len(seeds)))
    return out


def best(scores: Sequence[Score], order: Sequence[int], higher_is_better: bool) -> Optional[Score]:
    """The best scored candidate in the metric's direction, ties to the earlier in `order`."""
    rank = {i: r for r, i in enumerate(order)}
    scored = [s for s in scores if s.score is not None]
    if not scored:
        return None
    sign = -1.0 if higher_is_better else 1.0
    return min(scored, key=lambda s: (sign * s.score, rank.get(s.index, len(rank))))

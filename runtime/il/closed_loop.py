"""The closed-loop check of a fit: does driving with the fitted weights score better
than driving with the declared ones?

A low imitation loss does not mean a good policy: a term the demonstration never
excites can be fitted anywhere, and the policy then fails off the demonstrated path.
So `polc fit` runs both weight sets, mean actions, on a few TRAINING seeds (the
environment's `demo_seeds`, skipping the ones the demonstration itself was recorded
on; never the evaluation seeds that `polc eval` reports as unseen) and, by default,
keeps the better of the two (`choose`: the declared weights when fitting made the
score worse, as with a structure that reads an echo of its own action).
`closed_loop_check` is the check; `choose` the choice on top of its result, which
`polc fit`, the refinement loop and `polc experiment` share.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from .score_cache import ScoreCache, score_key


class ClosedLoop(NamedTuple):
    env: str
    seeds: tuple[int, ...]
    declared: np.ndarray    # (E,) the metric per seed with the declared weights
    fitted: np.ndarray      # (E,) ... with the fitted weights
    metric: str             # "return", or the environment's metric key
    higher_is_better: bool

    @property
    def declared_mean(self) -> float:
        return float(np.mean(self.declared))

    @property
    def fitted_mean(self) -> float:
        return float(np.mean(self.fitted))

    @property
    def worse(self) -> bool:
        """Whether fitting made the mean score worse, by more than 0.1% (two scores equal
        at the precision they are printed with are not a regression)."""
        drop = self.declared_mean - self.fitted_mean if self.higher_is_better else \
            self.fitted_mean - self.declared_mean
        return drop > 1e-3 * max(abs(self.declared_mean), abs(self.fitted_mean))

    def summary(self) -> str:
        n = len(self.seeds)
        return (f"closed loop on {n} training seed{'s' if n != 1 else ''} ({self.seeds[0]}..{self.seeds[-1]}): "
                f"{self.metric} {self.declared_mean:.4g} ± {np.std(self.declared):.3g} with the declared weights, "
                f"{self.fitted_mean:.4g} ± {np.std(self.fitted):.3g} fitted")

    def warning(self) -> str:
        """The one-line warning `polc fit` prints when `worse`."""
        return (f"warning: fitting made the policy worse in closed loop ({self.metric} {self.declared_mean:.4g} "
                f"declared -> {self.fitted_mean:.4g} fitted on {len(self.seeds)} training seeds); the demonstration "
                "may not excite some terms: give them priors (`~ normal(mu, sigma)`), lower --prior-scale, "
                "or record recovery demonstrations")

    def to_json(self) -> dict:
        return {"env": self.env, "seeds": list(self.seeds), "metric": self.metric,
                "declared": round(self.declared_mean, 4), "fitted": round(self.fitted_mean, 4),
                "worse": self.worse}


def training_seeds(spec: Any, n: int, exclude: Sequence[int] = ()) -> list[int]:
    """The first `n` of the environment's demonstration seeds not in `exclude`."""
    skip = set(int(s) for s in exclude)
    out = [s for s in spec.demo_seeds[: n + len(skip)] if s not in skip][:n]
    if len(out) < n:
        raise ValueError(f"the environment has only {len(out)} training seeds outside the demonstration's")
    return out


def closed_loop_check(policy, fitted_params, spec: Any, seeds: Sequence[int], declared_params=None,
                      n_envs: int = 0, cache: Optional["ScoreCache"] = None) -> ClosedLoop:
    """Score `policy` with its declared weights (or `declared_params`) and with
    `fitted_params` on `seeds` (training seeds: see `training_seeds`), mean actions.
    With a `cache` (`score_cache.ScoreCache`), the declared weights' scores come from it
    when this structure, these declared values, environment and seeds were scored before
    (by this code), and are stored there otherwise: a refit simulates only its own weights."""
    import jax

    from ..trace.evaluate import evaluate_many
    from ..trace.rollout import RolloutConfig
    from ..trace.vector import default_n_envs

    if declared_params is None:
        declared_params = policy.init(jax.random.PRNGKey(0))
    config = RolloutConfig(n_envs=n_envs or default_n_envs(len(seeds)))
    key = None if cache is None else score_key(policy, declared_params, spec, seeds, config.n_envs)
    declared = None if key is None else cache.get(key)
    if declared is not None and declared.shape != (len(seeds),):
        declared = None
    runs = evaluate_many(policy, [fitted_params] if declared is not None else [declared_params, fitted_params],
                         spec, list(seeds), config)
    if declared is None:
        declared = runs[0].values
        if key is not None:
            cache.put(key, declared)
    metric = runs[-1].metric
    return ClosedLoop(spec.schema.name, tuple(int(s) for s in seeds), np.asarray(declared), runs[-1].values,
                      "return" if metric.is_return else metric.key, metric.higher_is_better)


KEEPS = ("best", "fitted")  # `polc fit --keep`: the better of declared and fitted in closed loop, or the fit


class Choice(NamedTuple):
    """Which weights a fit hands back: "fitted" or "declared", and why (one sentence)."""

    kept: str
    reason: str

    def to_json(self) -> dict:
        return {"kept": self.kept, "reason": self.reason}


def choose(check: Optional[ClosedLoop], keep: str = "best") -> Choice:
    """The weights to keep after a fit, from the closed-loop check's result (training seeds
    only): with `keep="best"` the declared ones when fitting made the score worse (`worse`),
    else the fitted ones; `keep="fitted"` always the fit. Without a check, the fit."""
    if keep not in KEEPS:
        raise ValueError(f"keep must be one of {', '.join(KEEPS)}, not {keep!r}")
    if check is None:
        return Choice("fitted", "no closed-loop check ran, so the fit is kept")
    scores = (f"{check.metric} {check.declared_mean:.4g} declared, {check.fitted_mean:.4g} fitted on "
              f"{len(check.seeds)} training seed{'s' if len(check.seeds) != 1 else ''}")
    if keep == "fitted":
        return Choice("fitted", f"--keep fitted ({scores})")
    if check.worse:
        return Choice("declared", f"fitting made the policy worse in closed loop ({scores}); the declared "
                                  "weights are kept")
    return Choice("fitted", f"the fit is no worse in closed loop ({scores})")

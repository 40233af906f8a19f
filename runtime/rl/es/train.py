"""Evolution strategies on the mean actions (`polc rl --engine es`): improve params
by the return of the policy people run, the one without noise.

    result = train(policy, params, spec, ESConfig(resets=2000), "es/", progress=True)

The paper's objective (`polc.runtime.rl.train`) improves the SAMPLED policy: it
samples every action around its mean and follows the likelihood ratio of the
samples. On Car Racing that improved the sampled returns while the mean-action
returns of the same params fell (docs/results/rl.md); and an action declared
without noise cannot be trained that way at all. This learner never samples an
action. It is OpenAI's evolution strategy (Salimans et al. 2017, "Evolution
Strategies as a Scalable Alternative to Reinforcement Learning"), as people use it:

One update, in the policy's UNCONSTRAINED params flattened to a vector theta (D,),
so every weight constraint holds at every step by construction (the params that move
some action's mean: weights only a noise std reads keep their value; `SearchSpace`):
    eps_1..eps_K ~ normal(0, I_D)                      K = population / 2 directions
    theta +- sigma * eps_k                             antithetic pairs: the population
    F_i  = the return of member i, mean actions, on the update's track (all members
           on the same track, as the paper's groups of 20 episodes share theirs)
    u_i  = centred rank of F_i in [-0.5, 0.5]          (fitness shaping: invariant to the
                                                        return's scale and its outliers)
    g    = sum_k (u_k+ - u_k-) eps_k / (K sigma)       the gradient estimate of E[u]
    theta <- Adam(lr) ascent on g                      (optax.adam on -g)

The perturbations of update u come from numpy's default_rng([seed, u]), so a
resumed run draws what an uninterrupted one would and reaches the same params
bit for bit. Resets: each update uses `population` episodes (one reset each) and
the run stops before exceeding the budget, as the paper's count of training
episodes; held-out episodes (`keep="best"`) are not counted. Training tracks and
held-out seeds are `heldout`'s, as for the paper's objective: update u runs
training seed pool[u % len(pool)].

Outputs: those of every `polc rl` run (`run`): rl.params, last.params with
keep="best", log.json (one record per update: the population's returns, the
gradient's and the step's norms), curve.png (the population's mean return:
mean actions), checkpoint.npz.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, ClassVar, NamedTuple, Optional

import numpy as np

from .. import checkpoint as ckpt
from ..collect import RLError
from ..heldout import training_seeds
from ..run import Bar, Run, run_log
from .population import Population, SearchSpace


@dataclass(frozen=True)
class ESConfig:
    resets: int = 400                 # budget: environment episodes used for training
    population: int = 20              # members per update (even: antithetic pairs), one episode each
    sigma: float = 0.05               # perturbation std in the unconstrained params
    lr: float = 0.02                  # Adam's learning rate on the flattened params
    seed: int = 0                     # the perturbations: update u draws from default_rng([seed, u])
    keep: str = "last"                # "best": rl.params = the best held-out evaluation (`validation_seeds`)
    val_episodes: int = 5             # held-out episodes per evaluation (keep="best")
    val_every: int = 5                # updates between held-out evaluations (and after the last)

    # The fields `heldout.Validator` and `training_seeds` read, fixed for this learner.
    val_actions: ClassVar[str] = "mean"
    asynchronous: ClassVar[bool] = False
    seeds_per_update: ClassVar[int] = 1
    # What a resumed run may change.
    RESUMABLE: ClassVar[tuple[str, ...]] = ("resets",)

    @property
    def episodes_per_update(self) -> int:
        return self.population

    @property
    def n_envs(self) -> int:  # one environment per member; the held-out evaluation uses at most this many
        return self.population

    @classmethod
    def from_saved(cls, saved: dict) -> "ESConfig":
        return cls(**saved)

    def verify(self) -> None:
        """Raise `ValueError` naming the first bad setting."""
        if self.population < 2 or self.population % 2:
            raise ValueError(f"population must be an even number of at least 2: antithetic pairs "
                             f"(got {self.population})")
        if self.resets < 0:
            raise ValueError(f"the resets budget must be >= 0 (got {self.resets})")
        for name in ("sigma", "lr"):
            if not (getattr(self, name) > 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be positive (got {getattr(self, name)})")
        for name in ("val_episodes", "val_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.keep not in ("best", "last"):
            raise ValueError(f'keep must be "best" or "last" (got "{self.keep}")')

    def differences(self, other: "ESConfig") -> list[str]:
        """The settings (outside RESUMABLE) where `other` differs: "sigma 0.05 -> 0.1"."""
        return [f"{f.name} {getattr(self, f.name)} -> {getattr(other, f.name)}" for f in fields(self)
                if f.name not in self.RESUMABLE and getattr(self, f.name) != getattr(other, f.name)]


class ESResult(NamedTuple):
    params: Any              # the kept unconstrained params (the best with keep="best", else the last)
    state: ckpt.TrainState
    log: dict                # what log.json holds
    directory: str


def centred_ranks(values: np.ndarray) -> np.ndarray:
    """(P,) -> (P,) float64 in [-0.5, 0.5]: each value's rank, scaled; ties get the mean of their ranks."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=np.float64)
    for v in np.unique(values):  # equal returns (a track every member finished alike) rank equal
        tied = values == v
        ranks[tied] = ranks[tied].mean()
    return ranks / max(len(values) - 1, 1) - 0.5


def gradient(noise: np.ndarray, scores: np.ndarray, sigma: float) -> np.ndarray:
    """The antithetic estimate (D,) from the directions `noise` (K, D) and the population's
    fitness `scores` (2K,): members 0..K-1 are theta + sigma eps_k, K..2K-1 theta - sigma eps_k."""
    k = noise.shape[0]
    u = centred_ranks(scores)
    return (u[:k] - u[k:]) @ noise / (k * sigma)


def perturbations(config: ESConfig, update: int, dim: int) -> np.ndarray:
    """Update `update`'s directions (K, D), float64."""
    return np.random.default_rng([config.seed, update]).standard_normal((config.population // 2, dim))


@dataclass
class _Optimiser:
    """Adam ascent on the flattened params (optax's adam, applied to -g)."""

    lr: float

    def __post_init__(self):
        import optax

        self.adam = optax.adam(self.lr)

    def init(self, flat: np.ndarray):
        import jax.numpy as jnp

        return self.adam.init(jnp.asarray(flat, jnp.float32))

    def step(self, flat: np.ndarray, state, g: np.ndarray):
        import jax.numpy as jnp
        import optax

        updates, state = self.adam.update(-jnp.asarray(g, jnp.float32), state, jnp.asarray(flat, jnp.float32))
        return np.asarray(optax.apply_updates(jnp.asarray(flat, jnp.float32), updates), np.float32), state


def _record(update: int, state: ckpt.TrainState, result, g: np.ndarray, step: np.ndarray, seed: int,
            seconds: tuple[float, float]) -> dict:
    r = lambda x: float(f"{float(x):.6g}")  # noqa: E731
    R = result.returns
    return {"update": update, "resets": state.resets, "seeds": [seed],
            "return_mean": r(np.mean(R)), "return_std": r(np.std(R)), "return_min": r(np.min(R)),
            "return_max": r(np.max(R)), "length_mean": r(np.mean(result.lengths)),
            "grad_norm": r(np.linalg.norm(g)), "step_norm": r(np.linalg.norm(step)),
            "collect_s": round(seconds[0], 3), "update_s": round(seconds[1], 3),
            "elapsed_s": round(state.elapsed, 1)}


def train(policy, params, spec: Any, config: ESConfig, directory: str, resume: bool = False,
          start: Optional[dict] = None, progress: bool = False,
          on_update: Optional[Callable[[dict], None]] = None) -> ESResult:
    """Run (or, with `resume`, continue) the evolution strategy in `directory` until the
    resets budget is spent (see the module docstring). Raises `RLError`."""
    config.verify()
    space = SearchSpace(policy, params)
    optimiser = _Optimiser(config.lr)
    run = Run(directory, policy, spec, config, engine="es", error=RLError, title="ES",
              label="population mean return (mean actions)")
    state, meta = run.open(ckpt.TrainState(params, optimiser.init(space.vector(params)), 0, 0, 0.0), start, resume)
    session = time.perf_counter()
    with Population(policy, spec, config.population, space) as population, \
            Bar(progress, config.resets, state, _describe, label="es resets") as bar:
        while state.resets + config.population <= config.resets:
            t0 = time.perf_counter()
            flat = space.vector(state.params)
            seed = training_seeds(spec, config, state.updates)[0][0]
            noise = perturbations(config, state.updates, space.size)
            rows = np.concatenate([flat + config.sigma * noise, flat - config.sigma * noise]).astype(np.float32)
            result = population.run(rows, [seed] * config.population, on_episode=bar.episode)
            t1 = time.perf_counter()
            g = gradient(noise, result.returns, config.sigma)
            new_flat, opt_state = optimiser.step(flat, state.opt_state, g)
            t2 = time.perf_counter()
            if not np.all(np.isfinite(new_flat)):
                raise RLError(f"update {state.updates + 1} made the params non-finite; the last good params are "
                              f"in {directory}. Lower the learning rate (now {config.lr}) or sigma (now {config.sigma})")
            state = state._replace(params=space.params(new_flat), opt_state=opt_state, updates=state.updates + 1,
                                   resets=state.resets + config.population, elapsed=state.elapsed + (t2 - session))
            record = _record(state.updates, state, result, g, new_flat - flat, seed, (t1 - t0, t2 - t1))
            state, session = run.after_update(state, meta, record, t2, bar, on_update)
    return ESResult(run.kept(state), state, run_log(meta, state), directory)


def _describe(record: dict) -> str:
    """The progress line of one update."""
    return (f"update {record['update']}: resets {record['resets']}, population return {record['return_mean']:.1f} "
            f"± {record['return_std']:.1f} (min {record['return_min']:.1f}, max {record['return_max']:.1f}), "
            f"step {record['step_norm']:.3g}, {record['collect_s']:.1f} s rollout")

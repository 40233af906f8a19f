"""RL beyond the demonstration: improve fitted params with the paper's objective
(`losses`: clipped likelihood ratio over windows of steps, group-relative
reward-to-go; gamma 0.98, clip 0.2, Adam lr 7e-3, 20 episodes per update,
3 epochs).

    result = train(policy, params, spec, RLConfig(resets=400), "rl/", progress=True)

One update: collect `episodes_per_update` episodes with sampled actions in
`n_envs` environments (one batched policy call per step, `collect`), compute
the advantages, then `epochs` passes of `minibatches` Adam steps each on the
loss, all in the UNCONSTRAINED space of the params (`policy.init`'s), so every
weight constraint holds at every step by construction.

Robustness beyond the paper (each measured with its ablation in docs/results/rl.md;
`RLConfig.PAPER` switches them all off):
    trust region   after every Adam step the approximate KL between the policy that
                   collected the update's episodes and the new params is measured on
                   all of them (`losses.approx_kl`); a step that takes it past
                   `target_kl` is shortened by halving (up to 20 times) until the KL
                   is back under the target, and the update stops there: its later
                   epochs and minibatches are skipped (log: `steps`, `stopped_at`);
    std floor      the sampled policy during RL draws every action with std
                   max(std, min_std), and its likelihood ratio is taken under that
                   same distribution; the params keep the policy's own std;
    advantages     normalised over the whole update after the group normalisation;
    gradients      clipped to a global norm (`optax.clip_by_global_norm`) before Adam;
    keep best      (`keep="best"`) the params are evaluated on `val_episodes` held-out
                   seeds (`validation_seeds`: neither training nor evaluation seeds)
                   before training and every `val_every` updates, and rl.params holds
                   the best of them (last.params the last); the log says which update;
    anneal         over the last `anneal` share of the updates the sampling std is
                   scaled linearly from 1 down to ANNEAL_END. The schedule follows the
                   budget (`resets`): a run resumed with a larger budget anneals again
                   at its new end, so leave it off for runs that grow in steps. With
                   `anneal_lr` Adam's step is scaled by the same factor: as the noise
                   shrinks, episodes of a group differ less, and the group-normalised
                   advantages that Adam's scale-free step follows carry less signal.

Resets. Every environment episode used for training is one reset, as in the
paper's Table 1 (final evaluation is not counted). An update uses exactly
`episodes_per_update` resets, and the run stops when the next update would
exceed `config.resets`: a budget of 100 runs 5 updates of 20; 110 runs 5 too.

Seeds. Training tracks come from the seeds between the demonstration seeds and
the evaluation seeds, minus the last VALIDATION of them (the held-out seeds of
`keep="best"`): 1000..8999 for Car Racing, never demonstration, validation
(9000..9999) or evaluation seeds (10000..). Update u's
group g runs seed pool[(u * seeds_per_update + g) % len(pool)]. Every episode of
a group runs the same seed, so the group-relative advantage compares episodes
that differ only by the policy's noise (GRPO's group of answers to one prompt).
`config.seed` picks the noise: update u draws with fold_in(PRNGKey(seed), u).

Outputs in the run directory, rewritten after every update (`run`: rl.params, with
keep="best" last.params too, log.json, curve.png every CURVE_EVERY updates and after
the last, checkpoint.npz last). `resume=True` continues from `checkpoint.npz` and
reaches bit for bit the params an uninterrupted run reaches.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, ClassVar, NamedTuple, Optional

import numpy as np

from . import checkpoint as ckpt
from .collect import Collector, Episodes, RLError, verify_stochastic
from .heldout import training_seeds
from .losses import advantages, rl_loss
from .run import PARAMS, Bar, Run, run_log

# Re-exported: what callers of `train` name (the run's files, the held-out seeds).
from .heldout import validation_seeds  # noqa: E402,F401
from .run import CURVE, LAST, LOG  # noqa: E402,F401

ANNEAL_END = 0.1        # the sampling std's scale at the last update when annealing
HALVINGS = 20           # the trust region shortens a step at most 2^-20 before giving up on it


@dataclass(frozen=True)
class RLConfig:
    resets: int = 400                 # budget: environment episodes used for training
    gamma: float = 0.98               # discount of the reward-to-go
    clip: float = 0.2                 # window ratios are clipped to [1 - clip, 1 + clip]
    lr: float = 7e-3                  # Adam's learning rate (every parameter)
    episodes_per_update: int = 20
    epochs: int = 3                   # passes over an update's episodes
    minibatches: int = 1              # Adam steps per epoch (the episodes split evenly)
    window: int = 10                  # steps per likelihood-ratio window (1: per step)
    seeds_per_update: int = 1         # groups per update: episodes of a group share an env seed
    seed: int = 0                     # the noise of the sampled actions
    n_envs: int = 1                   # environments stepped together (the same episodes up to float rounding)
    asynchronous: bool = False        # step them in worker processes (slower for Car Racing: `polc.runtime.trace.vector`)
    target_kl: float = 0.05           # trust region: an update stops where its approx. KL reaches this (0: off)
    min_std: float = 0.1              # floor on every action's sampling std during RL (0: off)
    max_grad_norm: float = 1.0        # global gradient-norm clip before Adam (0: off)
    normalise_advantages: bool = True  # normalise the advantages over the update's steps
    keep: str = "last"                # "best": rl.params = the best held-out evaluation (`validation_seeds`)
    val_episodes: int = 5             # held-out episodes per evaluation (keep="best")
    val_every: int = 5                # updates between held-out evaluations (and after the last)
    val_actions: str = "mean"         # the held-out evaluation acts on the "mean" or "sampled" actions
    anneal: float = 0.0               # share of the updates, at the end, over which the sampling std shrinks
    anneal_lr: bool = False           # scale Adam's step by the same factor as the std while annealing

    # What a resumed run may change. Not n_envs: the batch size of the policy call
    # changes its float rounding, and a bit-for-bit resume needs the same calls.
    RESUMABLE: ClassVar[tuple[str, ...]] = ("resets",)
    # The settings that did not exist before the trust region, floor, clipping and
    # keep-best: their values reproducing the paper's update (and what a checkpoint
    # written before them ran with).
    PAPER: ClassVar[dict] = {"target_kl": 0.0, "min_std": 0.0, "max_grad_norm": 0.0,
                             "normalise_advantages": False, "keep": "last", "anneal": 0.0, "anneal_lr": False}

    @classmethod
    def from_saved(cls, saved: dict) -> "RLConfig":
        """The config a checkpoint's meta records; settings it lacks ran as `PAPER`."""
        return cls(**{**cls.PAPER, **saved})

    def verify(self) -> None:
        """Raise `ValueError` naming the first bad setting."""
        for name in ("episodes_per_update", "epochs", "minibatches", "window", "seeds_per_update", "n_envs",
                     "val_episodes", "val_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.resets < 0:
            raise ValueError(f"the resets budget must be >= 0 (got {self.resets})")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1] (got {self.gamma})")
        if not 0.0 < self.clip < 1.0:
            raise ValueError(f"clip must lie in (0, 1) (got {self.clip})")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"the learning rate must be positive (got {self.lr})")
        for name in ("target_kl", "min_std", "max_grad_norm"):
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be >= 0 (0 switches it off; got {getattr(self, name)})")
        if not 0.0 <= self.anneal <= 1.0:
            raise ValueError(f"anneal must lie in [0, 1] (got {self.anneal})")
        if self.anneal_lr and self.anneal <= 0:
            raise ValueError("anneal_lr scales Adam's step with the annealed std: set anneal > 0 too")
        if self.keep not in ("best", "last"):
            raise ValueError(f'keep must be "best" or "last" (got "{self.keep}")')
        if self.val_actions not in ("mean", "sampled"):
            raise ValueError(f'val_actions must be "mean" or "sampled" (got "{self.val_actions}")')
        for name in ("seeds_per_update", "minibatches"):
            if self.episodes_per_update % getattr(self, name):
                raise ValueError(f"{name} ({getattr(self, name)}) must divide episodes_per_update "
                                 f"({self.episodes_per_update})")

    def differences(self, other: "RLConfig") -> list[str]:
        """The settings (outside RESUMABLE) where `other` differs: "lr 0.007 -> 0.01"."""
        return [f"{f.name} {getattr(self, f.name)} -> {getattr(other, f.name)}" for f in fields(self)
                if f.name not in self.RESUMABLE and getattr(self, f.name) != getattr(other, f.name)]

    def std_scale(self, update: int) -> float:
        """The sampling std's scale in update `update` (0-based): 1, then with `anneal`
        linearly down to ANNEAL_END over the last `anneal` share of the budget's updates."""
        total = self.resets // self.episodes_per_update
        start = total * (1.0 - self.anneal)
        if self.anneal <= 0 or update + 1 <= start:
            return 1.0
        frac = min(1.0, (update + 1 - start) / max(total - start, 1e-9))
        return float(1.0 - (1.0 - ANNEAL_END) * frac)


class RLResult(NamedTuple):
    params: Any              # the final unconstrained params
    state: ckpt.TrainState
    log: dict                # what log.json holds
    directory: str


class StepStats(NamedTuple):
    """One Adam step of an update (each field (S,), S = epochs x minibatches)."""

    loss: Any            # the minibatch's -J before the step
    clip_fraction: Any
    ratio: Any
    kl: Any              # approx. KL on the whole update after the step (the trust region's measure)
    scale: Any           # the share of Adam's step taken (1, halved by the trust region, 0 when skipped)
    taken: Any           # 1 if the step was applied
    grad_norm: Any       # the global norm of the gradient before clipping


class Updater:
    """The jitted update: `epochs` x `minibatches` Adam steps on `losses.rl_loss`,
    inside the trust region (see the module docstring)."""

    def __init__(self, policy, config: RLConfig):
        self.config = config
        self.optimizer, self._update = _compiled_update(policy, config.clip, config.window, config.lr, config.min_std,
                                                        config.target_kl, config.max_grad_norm)

    def __call__(self, params, opt_state, batch, rng: np.random.Generator, std_scale: float = 1.0):
        """Episode order: a fresh permutation per epoch (host-side, from `rng`), cut into minibatches."""
        c = self.config
        e = c.episodes_per_update
        order = np.stack([rng.permutation(e) if c.minibatches > 1 else np.arange(e) for _ in range(c.epochs)])
        order = order.reshape(c.epochs * c.minibatches, e // c.minibatches).astype(np.int32)
        return self._update(params, opt_state, batch, order, np.float32(std_scale),
                            np.float32(self.lr_scale(std_scale)))

    def lr_scale(self, std_scale: float) -> float:
        """The factor on Adam's step: the std's annealing factor with `anneal_lr`, else 1."""
        return std_scale if self.config.anneal_lr else 1.0


@functools.lru_cache(maxsize=8)
def _compiled_update(policy, clip: float, window: int, lr: float, min_std: float = 0.0, target_kl: float = 0.0,
                     max_grad_norm: float = 0.0):
    """(optimizer, jitted update), shared by the runs of a process with these settings."""
    import jax
    import jax.numpy as jnp
    import optax

    from .losses import approx_kl, batch_logp

    adam = optax.adam(lr)
    optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), adam) if max_grad_norm > 0 else adam
    grad = jax.value_and_grad(rl_loss(policy, clip, window, min_std), has_aux=True)
    logp = batch_logp(policy, min_std)

    def moved(params, updates, s):
        return optax.apply_updates(params, jax.tree.map(lambda u: s * u, updates))

    def trust(params, updates, batch, std_scale):
        """The largest s in 1, 1/2, ... (HALVINGS times) whose step keeps the KL within target_kl, its KL; 0 if none
        (and the KL of not moving). The candidates 1, 1/2, ..., 2^-HALVINGS, 0 are tried in one loop whose body
        holds the only copy of the policy's log-probability: XLA compiles each copy, and with three (the first
        try, the halvings, the fallback) Car Racing's update took 1.8-2.4 s to compile, 1.6-2.0 s with one."""
        def body(c):
            s, k, _, _ = c
            v = approx_kl(logp(moved(params, updates, s), batch.obs, batch.actions, std_scale), batch.logp, batch.mask)
            done = (v <= target_kl) | (s == 0.0)  # a NaN KL, like HALVINGS halvings, falls back to 0
            return jnp.where(done, s, jnp.where((v > target_kl) & (k < HALVINGS), s * 0.5, 0.0)), k + 1, v, done

        s, _, v, _ = jax.lax.while_loop(lambda c: ~c[3], body, (jnp.float32(1.0), 0, jnp.float32(jnp.nan), False))
        return s, v

    def step(carry, idx):
        params, opt_state, stopped, batch, std_scale, lr_scale = carry
        mb = jax.tree.map(lambda x: x[idx], batch)
        (_, stats), g = grad(params, mb, std_scale)
        updates, new_opt = optimizer.update(g, opt_state, params)
        updates = jax.tree.map(lambda u: lr_scale * u, updates)  # Adam's step is linear in its lr
        if target_kl > 0:
            s, kl = jax.lax.cond(stopped, lambda: (jnp.float32(0.0), jnp.float32(jnp.nan)),
                                 lambda: trust(params, updates, batch, std_scale))
        else:
            s = jnp.float32(1.0)
            kl = approx_kl(logp(moved(params, updates, s), batch.obs, batch.actions, std_scale), batch.logp,
                           batch.mask)
        taken = s > 0
        params = jax.tree.map(lambda a, b: jnp.where(taken, a, b), moved(params, updates, s), params)
        opt_state = jax.tree.map(lambda a, b: jnp.where(taken, a, b), new_opt, opt_state)
        out = StepStats(stats.loss, stats.clip_fraction, stats.ratio, kl, s, taken.astype(jnp.float32),
                        optax.tree.norm(g))
        return (params, opt_state, stopped | (s < 1.0), batch, std_scale, lr_scale), out

    def update(params, opt_state, batch, order, std_scale, lr_scale):
        init = (params, opt_state, jnp.bool_(False), batch, std_scale, lr_scale)
        (params, opt_state, _, _, _, _), stats = jax.lax.scan(step, init, order)
        return params, opt_state, stats

    return optimizer, jax.jit(update)


def _record(update: int, state: ckpt.TrainState, ep: Episodes, stats: StepStats, std_scale: float,
            seconds: tuple[float, float], lr_scale: float = 1.0) -> dict:
    r = lambda x: float(f"{float(x):.6g}")  # noqa: E731
    taken = np.asarray(stats.taken) > 0
    scale = np.asarray(stats.scale)
    cut = np.flatnonzero(scale < 1.0)
    last = int(np.flatnonzero(taken)[-1]) if taken.any() else None
    return {"update": update, "resets": state.resets, "idle_resets": ep.idle_resets,
            "seeds": sorted({int(s) for s in ep.seeds}),
            "return_mean": r(np.mean(ep.returns)), "return_std": r(np.std(ep.returns)),
            "return_min": r(np.min(ep.returns)), "return_max": r(np.max(ep.returns)),
            "length_mean": r(np.mean(ep.lengths)),
            "loss": r(np.mean(stats.loss)), "clip_fraction": r(stats.clip_fraction[-1]),
            # after the update, on all its episodes (0 when no step was taken)
            "approx_kl": r(stats.kl[last]) if last is not None else 0.0, "ratio": r(stats.ratio[-1]),
            "steps": int(taken.sum()), "of_steps": len(taken),
            "stopped_at": int(cut[0]) + 1 if len(cut) else None,     # the step the trust region shortened (1-based)
            "step_scale": r(scale[cut[0]]) if len(cut) else 1.0,
            "grad_norm": r(np.max(stats.grad_norm)), "std_scale": r(std_scale), "lr_scale": r(lr_scale),
            "collect_s": round(seconds[0], 3), "update_s": round(seconds[1], 3),
            "elapsed_s": round(state.elapsed, 1)}


def _finite(tree) -> bool:
    import jax

    return all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree.leaves(tree))


def train(policy, params, spec: Any, config: RLConfig, directory: str, resume: bool = False,
          start: Optional[dict] = None, progress: bool = False,
          on_update: Optional[Callable[[dict], None]] = None,
          make_collector: Callable[..., Collector] = Collector) -> RLResult:
    """Run (or, with `resume`, continue) RL in `directory` until the resets budget
    is spent (see the module docstring). `start` describes where `params` came
    from ({"file": ..., "sha256": ...}) for the log. `make_collector(policy, spec,
    n_envs, asynchronous, min_std)` builds what collects each update's episodes
    (`Collector`, or a cluster's). Raises `RLError`."""
    import jax

    verify_stochastic(policy.program)
    config.verify()
    updater = Updater(policy, config)
    run = Run(directory, policy, spec, config, error=RLError)
    state, meta = run.open(ckpt.TrainState(params, updater.optimizer.init(params), 0, 0, 0.0), start, resume)
    session = time.perf_counter()
    base = jax.random.PRNGKey(config.seed)
    with make_collector(policy, spec, config.n_envs, config.asynchronous, config.min_std) as collector, \
            Bar(progress, config.resets, state, _describe) as bar:
        while state.resets + config.episodes_per_update <= config.resets:
            t0 = time.perf_counter()
            seeds, groups = training_seeds(spec, config, state.updates)
            key = jax.random.fold_in(base, state.updates)
            std_scale = config.std_scale(state.updates)
            episodes = collector.run(state.params, key, seeds, bar.episode, std_scale)
            adv = advantages(episodes.rewards, episodes.mask, groups, config.gamma, config.normalise_advantages)
            batch = collector.transitions(episodes, adv)
            t1 = time.perf_counter()
            rng = np.random.default_rng([config.seed, state.updates])
            new_params, opt_state, stats = updater(state.params, state.opt_state, batch, rng, std_scale)
            jax.block_until_ready(new_params)
            t2 = time.perf_counter()
            if not (_finite(new_params) and np.all(np.isfinite(np.asarray(stats.loss)))):
                raise RLError(f"update {state.updates + 1} made the params or the loss non-finite; the last "
                              f"good params are in {os.path.join(directory, PARAMS)}. Lower the learning rate "
                              f"(now {config.lr}), set a trust region (--target-kl) or a std floor (--min-std)")
            state = state._replace(params=new_params, opt_state=opt_state, updates=state.updates + 1,
                                   resets=state.resets + episodes.resets, elapsed=state.elapsed + (t2 - session))
            record = _record(state.updates, state, episodes, stats, std_scale, (t1 - t0, t2 - t1),
                             updater.lr_scale(std_scale))
            meta["rng"] = np.asarray(jax.random.fold_in(base, state.updates)).tolist()  # the next update's key
            state, session = run.after_update(state, meta, record, t2, bar, on_update)
    return RLResult(run.kept(state), state, run_log(meta, state), directory)




def _describe(record: dict) -> str:
    """The progress line of one update."""
    stop = (f" (trust region: stopped at step {record['stopped_at']} of {record['of_steps']})"
            if record["stopped_at"] is not None else "")
    return (f"update {record['update']}: resets {record['resets']}, return {record['return_mean']:.1f} "
            f"± {record['return_std']:.1f}, clipped {record['clip_fraction']:.0%}, KL {record['approx_kl']:.3g}"
            f"{stop}, {record['collect_s']:.1f} s rollout + {record['update_s']:.1f} s gradient")

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

Resets. Every environment episode used for training is one reset, as in the
paper's Table 1 (final evaluation is not counted). An update uses exactly
`episodes_per_update` resets, and the run stops when the next update would
exceed `config.resets`: a budget of 100 runs 5 updates of 20; 110 runs 5 too.

Seeds. Training tracks come from the seeds between the demonstration seeds and
the evaluation seeds (1000..9999 for Car Racing), never from either: update u's
group g runs seed pool[(u * seeds_per_update + g) % len(pool)]. Every episode of
a group runs the same seed, so the group-relative advantage compares episodes
that differ only by the policy's noise (GRPO's group of answers to one prompt).
`config.seed` picks the noise: update u draws with fold_in(PRNGKey(seed), u).

Outputs in the run directory, rewritten after every update:
    rl.params       the current params (loads in `polc eval` / `polc rollout`)
    log.json        config, start params, one record per update
    curve.png       mean return against resets
    checkpoint.npz  params, optimiser state, counters, PRNG key, log (`checkpoint`)
`resume=True` continues from `checkpoint.npz` and reaches bit for bit the
params an uninterrupted run reaches.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, ClassVar, NamedTuple, Optional

import numpy as np

from . import checkpoint as ckpt
from .collect import Collector, Episodes, RLError, verify_stochastic
from .losses import advantages, rl_loss

PARAMS, LOG, CURVE = "rl.params", "log.json", "curve.png"


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

    # What a resumed run may change. Not n_envs: the batch size of the policy call
    # changes its float rounding, and a bit-for-bit resume needs the same calls.
    RESUMABLE: ClassVar[tuple[str, ...]] = ("resets",)

    def verify(self) -> None:
        """Raise `ValueError` naming the first bad setting."""
        for name in ("episodes_per_update", "epochs", "minibatches", "window", "seeds_per_update", "n_envs"):
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
        for name in ("seeds_per_update", "minibatches"):
            if self.episodes_per_update % getattr(self, name):
                raise ValueError(f"{name} ({getattr(self, name)}) must divide episodes_per_update "
                                 f"({self.episodes_per_update})")

    def differences(self, other: "RLConfig") -> list[str]:
        """The settings (outside RESUMABLE) where `other` differs: "lr 0.007 -> 0.01"."""
        return [f"{f.name} {getattr(self, f.name)} -> {getattr(other, f.name)}" for f in fields(self)
                if f.name not in self.RESUMABLE and getattr(self, f.name) != getattr(other, f.name)]


class RLResult(NamedTuple):
    params: Any              # the final unconstrained params
    state: ckpt.TrainState
    log: dict                # what log.json holds
    directory: str


def training_seeds(spec: Any, config: RLConfig, update: int) -> tuple[list[int], np.ndarray]:
    """Update `update`'s episode seeds (E,) and their group ids (E,) (see the module docstring)."""
    demo = getattr(spec, "demo_seeds", range(0, 1000))
    evals = getattr(spec, "eval_seeds", range(10_000, 20_000))
    pool = range(demo.stop, evals.start)
    k, per = config.seeds_per_update, config.episodes_per_update // config.seeds_per_update
    groups = np.repeat(np.arange(k), per)
    return [pool[(update * k + g) % len(pool)] for g in groups], groups


class Updater:
    """The jitted update: `epochs` x `minibatches` Adam steps on `losses.rl_loss`."""

    def __init__(self, policy, config: RLConfig):
        self.config = config
        self.optimizer, self._update = _compiled_update(policy, config.clip, config.window, config.lr)

    def __call__(self, params, opt_state, batch, rng: np.random.Generator):
        """Episode order: a fresh permutation per epoch (host-side, from `rng`), cut into minibatches."""
        c = self.config
        e = c.episodes_per_update
        order = np.stack([rng.permutation(e) if c.minibatches > 1 else np.arange(e) for _ in range(c.epochs)])
        order = order.reshape(c.epochs * c.minibatches, e // c.minibatches).astype(np.int32)
        return self._update(params, opt_state, batch, order)


@functools.lru_cache(maxsize=8)
def _compiled_update(policy, clip: float, window: int, lr: float):
    """(optimizer, jitted update), shared by the runs of a process with these settings."""
    import jax
    import optax

    optimizer = optax.adam(lr)
    grad = jax.value_and_grad(rl_loss(policy, clip, window), has_aux=True)

    def step(carry, idx):
        params, opt_state, batch = carry
        mb = jax.tree.map(lambda x: x[idx], batch)
        (_, stats), g = grad(params, mb)
        updates, opt_state = optimizer.update(g, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, batch), stats

    def update(params, opt_state, batch, order):
        (params, opt_state, _), stats = jax.lax.scan(step, (params, opt_state, batch), order)
        return params, opt_state, stats

    return optimizer, jax.jit(update)


def _record(update: int, state: ckpt.TrainState, ep: Episodes, stats, seconds: tuple[float, float]) -> dict:
    r = lambda x: float(f"{float(x):.6g}")  # noqa: E731
    return {"update": update, "resets": state.resets, "idle_resets": ep.idle_resets,
            "seeds": sorted({int(s) for s in ep.seeds}),
            "return_mean": r(np.mean(ep.returns)), "return_std": r(np.std(ep.returns)),
            "return_min": r(np.min(ep.returns)), "return_max": r(np.max(ep.returns)),
            "length_mean": r(np.mean(ep.lengths)),
            "loss": r(np.mean(stats.loss)), "clip_fraction": r(stats.clip_fraction[-1]),
            "approx_kl": r(stats.approx_kl[-1]), "ratio": r(stats.ratio[-1]),
            "collect_s": round(seconds[0], 3), "update_s": round(seconds[1], 3),
            "elapsed_s": round(state.elapsed, 1)}


def _finite(tree) -> bool:
    import jax

    return all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree.leaves(tree))


def train(policy, params, spec: Any, config: RLConfig, directory: str, resume: bool = False,
          start: Optional[dict] = None, progress: bool = False,
          on_update: Optional[Callable[[dict], None]] = None) -> RLResult:
    """Run (or, with `resume`, continue) RL in `directory` until the resets budget
    is spent (see the module docstring). `start` describes where `params` came
    from ({"file": ..., "sha256": ...}) for the log. Raises `RLError`."""
    import jax

    from ..io.params import params_sha256, structure_sha256

    verify_stochastic(policy.program)
    config.verify()
    tp = policy.program
    updater = Updater(policy, config)
    state = ckpt.TrainState(params, updater.optimizer.init(params), 0, 0, 0.0)
    meta = {"policy": tp.name, "file": tp.file, "structure_sha256": structure_sha256(tp),
            "env": spec.schema.name, "start_params": dict(start or {}, sha256=params_sha256(params)),
            "config": asdict(config), "updates_log": []}
    if ckpt.exists(directory):
        if not resume:
            raise RLError(f"'{directory}' already holds an RL run ({ckpt.NAME}); pass --resume to continue it "
                          f"or choose another output directory")
        state, meta = _resumed(directory, state, meta, config, check_start=bool(start and start.get("file")))
    threshold = _threshold(spec)
    session = time.perf_counter()
    base = jax.random.PRNGKey(config.seed)
    with Collector(policy, spec, config.n_envs, config.asynchronous) as collector, _progress(progress, config, state) as bar:
        while state.resets + config.episodes_per_update <= config.resets:
            t0 = time.perf_counter()
            seeds, groups = training_seeds(spec, config, state.updates)
            key = jax.random.fold_in(base, state.updates)
            episodes = collector.run(state.params, key, seeds, bar.episode)
            adv = advantages(episodes.rewards, episodes.mask, groups, config.gamma)
            batch = collector.transitions(episodes, adv)
            t1 = time.perf_counter()
            rng = np.random.default_rng([config.seed, state.updates])
            new_params, opt_state, stats = updater(state.params, state.opt_state, batch, rng)
            jax.block_until_ready(new_params)
            t2 = time.perf_counter()
            if not (_finite(new_params) and np.all(np.isfinite(np.asarray(stats.loss)))):
                raise RLError(f"update {state.updates + 1} made the params or the loss non-finite; the last "
                              f"good params are in {os.path.join(directory, PARAMS)}. Lower the learning rate "
                              f"(now {config.lr}) or bound the noise std away from 0")
            state = ckpt.TrainState(new_params, opt_state, state.updates + 1, state.resets + episodes.resets,
                                    state.elapsed + (t2 - session))
            session = t2
            record = _record(state.updates, state, episodes, stats, (t1 - t0, t2 - t1))
            meta["updates_log"].append(record)
            meta["rng"] = np.asarray(jax.random.fold_in(base, state.updates)).tolist()  # the next update's key
            _write_outputs(directory, policy, state, meta, threshold)
            bar.updated(record)
            if on_update is not None:
                on_update(record)
    log = _log(meta, state)
    return RLResult(state.params, state, log, directory)


def _resumed(directory: str, fresh: ckpt.TrainState, meta: dict, config: RLConfig, check_start: bool):
    """The checkpoint's state and meta, after checking it belongs to this policy, config
    and (when `check_start`) start params."""
    try:
        state, saved = ckpt.load(directory, fresh.params, fresh.opt_state)
    except ckpt.CheckpointError as e:
        raise RLError(str(e)) from None
    why = ckpt.other_run(directory, saved, meta, RLConfig(**saved["config"]).differences(config), check_start)
    if why:
        raise RLError(why)
    saved["config"] = asdict(config)  # the new budget
    return state, saved


def _threshold(spec: Any) -> Optional[float]:
    import gymnasium as gym

    try:
        return gym.spec(spec.schema.env_id).reward_threshold
    except Exception:  # an env not registered with gymnasium has no threshold to draw
        return None


def _log(meta: dict, state: ckpt.TrainState) -> dict:
    return {"polc_rl": 1, "policy": meta["policy"], "file": meta["file"], "env": meta["env"],
            "start_params": meta["start_params"], "config": meta["config"], "updates": state.updates,
            "resets": state.resets, "elapsed_s": round(state.elapsed, 1), "params": PARAMS,
            "log": meta["updates_log"]}


def _write_outputs(directory: str, policy, state: ckpt.TrainState, meta: dict, threshold) -> None:
    """The params file, log and curve first, the checkpoint last: the checkpoint is
    the commit point, and a resumed run rewrites the others identically."""
    import json

    from polc.files import write_atomic

    from ..io.params import save_params
    from .curve import plot_curve

    os.makedirs(directory, exist_ok=True)
    log = _log(meta, state)
    info = {"method": "rl", "env": meta["env"], "updates": state.updates, "resets": state.resets,
            "start_params": meta["start_params"], "return_mean_last_update": log["log"][-1]["return_mean"],
            "config": meta["config"]}
    save_params(os.path.join(directory, PARAMS), policy, state.params, info)
    write_atomic(os.path.join(directory, LOG), json.dumps(log, indent=1) + "\n")
    plot_curve(os.path.join(directory, CURVE), log["log"], f"RL: {os.path.basename(meta['file'] or meta['policy'])} on {meta['env']}", threshold)
    ckpt.save(directory, state, meta)


class _Bar:
    """Progress: resets used of the budget, the last update's mean return, elapsed seconds."""

    def __init__(self, enabled: bool, config: RLConfig, state: ckpt.TrainState):
        self.enabled, self.config = enabled, config
        self.elapsed0, self.t0, self.progress, self.task = state.elapsed, time.perf_counter(), None, None
        self.ret = "-"
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(TextColumn("rl resets"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("mean return {task.fields[ret]}  elapsed {task.fields[el]}"),
                                     console=Console(stderr=True))
            self.task = self.progress.add_task("rl", total=config.resets, completed=state.resets, ret="-",
                                               el=self._elapsed())

    def _elapsed(self) -> str:
        s = int(self.elapsed0 + time.perf_counter() - self.t0)
        return f"{s // 60}:{s % 60:02d}"

    def episode(self, index: int, seed: int, ret: float, length: int) -> None:
        if self.enabled:
            self.progress.update(self.task, advance=1, el=self._elapsed())

    def updated(self, record: dict) -> None:
        if self.enabled:
            self.ret = f"{record['return_mean']:.1f}"
            self.progress.update(self.task, completed=record["resets"], ret=self.ret, el=self._elapsed())
            self.progress.console.print(
                f"update {record['update']}: resets {record['resets']}, return {record['return_mean']:.1f} "
                f"± {record['return_std']:.1f}, clipped {record['clip_fraction']:.0%}, "
                f"{record['collect_s']:.1f} s rollout + {record['update_s']:.1f} s gradient", soft_wrap=True)

    def __enter__(self) -> "_Bar":
        if self.enabled:
            self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.progress.__exit__(*exc)


def _progress(enabled: bool, config: RLConfig, state: ckpt.TrainState) -> _Bar:
    return _Bar(enabled, config, state)

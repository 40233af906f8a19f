"""Imitation learning: fit a policy's weights to a demonstration table.

    demos = load_demos(read_table("demos/car.parquet"), policy.program)
    result = fit(policy, demos, FitConfig(restarts=3))
    save_params("fit.params", policy, result.params, result.info())

The loss is `losses.batch_loss` (Gaussian NLL for noisy actions, squared
error otherwise) plus the negative log prior over the number of training rows
(`losses.objective`: maximum a posteriori, MAP). The prior is each weight's
declared `~ prior` and, for a weight without one, a Gaussian pull toward its
declared value of std `prior_scale` in the unconstrained space (inf: none,
which is maximum likelihood for that weight). The validation loss is the same
objective on the held-out rows. Weights are optimised in their UNCONSTRAINED space (the
params `policy.init` makes), so every constraint holds at every step by
construction. Adam over shuffled minibatches (learning rate 1e-2 for the
named weights, 1e-3 for mlp blocks); a random `val_fraction` of the rows is held
out; the learning rates halve after `lr_patience` epochs without a validation
improvement, and a restart stops after `patience` such epochs, keeping its best
params. The epochs and those decisions run compiled, `CHUNK` epochs per call
(`step.FitStep.epochs`: a `lax.scan` over epochs, each a `lax.scan` over minibatches),
compiled once per structure and row-count bucket (`bucket`) and reused by every restart
and later fit (`step.py`). Restart 0 starts from
the weights declared in the source; restart k >= 1 perturbs them in the
unconstrained space (and draws new mlp weights). The restart with the lowest
validation loss wins. A loss that becomes
non-finite ends that restart with a message; if it is non-finite at the start,
`FitError` says which value (state, latent, mean or std) is to blame.

A program with memory (`state` declarations) is fitted by whole episodes (`episodes`: the
rows of each, in table order): a batch holds episodes padded to the bucket of the longest
(`_episode_batches`), each run as a scan over its steps from the initial state
(`losses.episode_loss`), and the validation split holds out whole episodes
(`split_episodes`); everything else (objective per real step, restarts, early stopping,
the compiled epochs) is the same.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, Optional

import numpy as np

from polc.check import typed as T

from .defaults import PRIOR_SCALE
from .losses import Batch, centre, has_memory, kind, regularised
from ..io.table import Table




class FitError(Exception):
    """Fitting cannot proceed or produced nothing usable; the message says why."""


@dataclass(frozen=True)
class FitConfig:
    learning_rate: float = 1e-2      # Adam's, for the named weights (O(1) gains)
    mlp_learning_rate: float = 1e-3  # Adam's, for the parameters of mlp(...) blocks
    batch_size: int = 256
    max_epochs: int = 2000
    patience: int = 100       # epochs without a validation improvement before a restart stops
    lr_patience: int = 25     # epochs without one before the learning rate drops
    lr_decay: float = 0.5     # ... by this factor
    min_delta: float = 1e-4   # relative: improvements below min_delta * |best loss| do not count
    val_fraction: float = 0.2
    restarts: int = 3
    init_noise: float = 0.5   # std of the perturbation of unconstrained weights for restarts >= 1
    clip_norm: float = 10.0   # global gradient-norm clip
    seed: int = 0
    prior_scale: float = PRIOR_SCALE  # std of the pull of prior-less weights to their declared value (unconstrained)


class Demos(NamedTuple):
    obs: dict        # name -> (N, *shape) float32
    actions: dict    # name -> (N, *shape) float32
    episode: np.ndarray  # (N,) int

    @property
    def size(self) -> int:
        return len(self.episode)

    def take(self, idx: np.ndarray) -> "Demos":
        return Demos({k: v[idx] for k, v in self.obs.items()}, {k: v[idx] for k, v in self.actions.items()},
                     self.episode[idx])


class RestartResult(NamedTuple):
    restart: int
    epochs: int                 # epochs run
    best_epoch: int
    train_loss: float           # at the best epoch
    val_loss: float             # the best
    stopped: str                # "early stopping", "max epochs" or why it diverged


class FitResult(NamedTuple):
    params: dict                # the winning restart's params at its best validation loss
    best: RestartResult
    restarts: tuple[RestartResult, ...]
    loss: str                   # losses.kind
    n_train: int
    n_val: int
    seconds: float
    config: FitConfig
    priors: dict = {}           # {"declared": {weight: "normal(0.3, 0.1)"}, "pulled": [weights], "prior_scale": S}

    def info(self, **extra: Any) -> dict:
        """A summary for the params file's "fit" entry (restarts counted from 1)."""
        config = asdict(self.config)
        config["prior_scale"] = self.config.prior_scale if math.isfinite(self.config.prior_scale) else None
        return {"loss": self.loss, "val_loss": _r(self.best.val_loss), "train_loss": _r(self.best.train_loss),
                "restart": self.best.restart + 1, "epoch": self.best.best_epoch, "rows_train": self.n_train,
                "rows_val": self.n_val, "seconds": round(self.seconds, 1),
                "restarts": [{"restart": r.restart + 1, "epochs": r.epochs, "val_loss": _r(r.val_loss),
                              "stopped": r.stopped} for r in self.restarts],
                "priors": self.priors, "config": config, **extra}


def _r(x: float) -> float:
    return float(f"{x:.6g}")


def load_demos(table: Table, tp) -> Demos:
    """The columns the program needs, checked against its declarations."""
    problems = []
    cols: dict[str, dict] = {"obs": {}, "action": {}}
    for prefix, decls in (("obs", tp.obs), ("action", tp.actions)):
        for d in decls:
            name = f"{prefix}.{d.name}"
            spec = table.columns.get(name)
            if spec is None:
                problems.append(f'no column "{name}" (the table has {prefix} columns: '
                                f'{", ".join(table.names(prefix)) or "none"})')
            elif spec.shape != d.type.shape:
                problems.append(f'column "{name}" has shape {list(spec.shape)} but {prefix} "{d.name}" '
                                f"is declared {d.type}")
            else:
                v = np.asarray(table.column(name), np.float32)
                if not np.all(np.isfinite(v)):
                    problems.append(f'column "{name}" has non-finite values')
                cols[prefix][d.name] = v
    if problems:
        raise FitError(f"the demonstration '{table.path}' does not fit policy \"{tp.name}\":\n"
                       + "\n".join("  - " + p for p in problems))
    if table.num_rows < 10:
        raise FitError(f"the demonstration '{table.path}' has {table.num_rows} rows; fitting needs at least 10")
    episode = np.asarray(table.column("episode") if "episode" in table.columns else np.zeros(table.num_rows, np.int32))
    demos = Demos(cols["obs"], cols["action"], episode)
    if getattr(tp, "states", ()) and "step" in table.columns:
        demos = _in_step_order(demos, np.asarray(table.column("step")), table.path)
    return demos


def _in_step_order(demos: Demos, step: np.ndarray, path) -> Demos:
    """A program with memory is fitted through each episode step after step (`episodes`), so
    its rows are put in the order of the table's "step" column within each episode (a table
    polc wrote is in that order already: nothing moves). Two rows of one episode at the same
    step leave no order to fit through: FitError naming the first."""
    ids, first = np.unique(demos.episode, return_index=True)
    rank = np.empty(len(ids), np.int64)
    rank[np.argsort(first)] = np.arange(len(ids))
    ep = rank[np.searchsorted(ids, demos.episode)]  # episodes in order of first appearance
    order = np.lexsort((step, ep))
    same = (np.diff(ep[order]) == 0) & (np.diff(step[order]) == 0)
    if same.any():
        i = order[np.flatnonzero(same)[0]]
        raise FitError(f"the demonstration '{path}' has two rows of episode {demos.episode[i]} at step "
                       f"{step[i]}; a policy with memory is fitted through each episode in step order")
    return demos if np.array_equal(order, np.arange(len(order))) else demos.take(order)


def episodes(demos: Demos) -> list[np.ndarray]:
    """The row indices of each episode, episodes in order of first appearance, rows in
    table order (the order they were recorded in)."""
    ids, first = np.unique(demos.episode, return_index=True)
    return [np.flatnonzero(demos.episode == ids[j]) for j in np.argsort(first)]


def split_episodes(demos: Demos, val_fraction: float, seed: int) -> tuple[Demos, Demos]:
    """A random (train, validation) split by whole episodes (a program with memory: a
    held-out row would need the state its episode's earlier rows make)."""
    eps = episodes(demos)
    if len(eps) < 2:
        raise FitError("a policy with memory is fitted by whole episodes and validated on held-out episodes, "
                       f"but the demonstration has {len(eps)} episode; record at least 2 (e.g. `polc demos "
                       "--episodes 5`)")
    n_val = min(len(eps) - 1, max(1, int(round(len(eps) * val_fraction))))
    perm = np.random.default_rng(seed).permutation(len(eps))

    def take(js) -> Demos:
        return demos.take(np.concatenate([eps[j] for j in sorted(js)]))

    return take(perm[n_val:]), take(perm[:n_val])


def split(demos: Demos, val_fraction: float, seed: int) -> tuple[Demos, Demos]:
    """A random (train, validation) split of the rows."""
    n = demos.size
    n_val = min(n - 1, max(1, int(round(n * val_fraction))))
    perm = np.random.default_rng(seed).permutation(n)
    return demos.take(np.sort(perm[n_val:])), demos.take(np.sort(perm[:n_val]))


def diagnose_nonfinite(policy, params, demos: Demos, distribution=None) -> Optional[str]:
    """Which value makes the loss non-finite at `params`, or None. `distribution`: the
    batched distribution (default: `acting.batched_distribution`; a fit passes its cached jit)."""
    import jax

    memory = has_memory(policy)
    if distribution is None:
        from ..acting import acting, batched_distribution
        from .step import episodes_distribution

        distribution = (episodes_distribution if memory else batched_distribution)(acting(policy))
    if memory:  # whole episodes from the initial state, padded (`_episode_batches`); the real steps kept
        batch = _episode_batches(demos, bucket(len(episodes(demos)), floor=1))
        real = np.asarray(batch.weight) > 0
        mean, std, latents = jax.tree.map(lambda x: np.asarray(x)[real], distribution(params, batch.obs))
    else:
        # The rows padded to their bucket (copies of row 0), so every length in it shares the
        # compiled `distribution`; the padding is cut off the results.
        n = demos.size
        take = np.concatenate([np.arange(n), np.zeros(bucket(n) - n, np.int64)])
        mean, std, latents = jax.tree.map(lambda x: np.asarray(x)[:n],
                                          distribution(params, {k: v[take] for k, v in demos.obs.items()}))
    tp = policy.program
    for st in getattr(tp, "states", ()):
        bad = ~np.isfinite(np.asarray(latents[st.name], np.float64))
        if st.type.base == T.REAL and bad.any():
            return (f'state "{st.name}" is not finite on {_rows(bad)} of {demos.size} demonstration rows '
                    f"(an update without a bound that grows over the episode? give it a range)")
    for lat in tp.latents:
        bad = ~np.isfinite(np.asarray(latents[lat.name], np.float64))
        if lat.type.base == T.REAL and bad.any():
            return (f'latent "{lat.name}" is not finite on {_rows(bad)} of {demos.size} demonstration rows '
                    f"(a log or sqrt of a negative value, or a division by zero?)")
    for a in tp.actions:
        m = np.asarray(mean[a.name], np.float64)
        if not np.all(np.isfinite(m)):
            return f'the mean of action "{a.name}" is not finite on {_rows(~np.isfinite(m))} rows'
        if a.name in std:
            s = np.asarray(std[a.name], np.float64)
            bad = ~(np.isfinite(s) & (s > 0))
            if bad.any():
                return (f'the noise std of action "{a.name}" is zero, negative or not finite on {_rows(bad)} '
                        f"of {demos.size} rows, where the likelihood is undefined; keep it positive, e.g. a "
                        f"weight in [0.01, 1] or softplus(...) + 0.01")
    return None


def _rows(bad: np.ndarray) -> int:
    return int(np.count_nonzero(bad.reshape(bad.shape[0], -1).any(axis=1)))


def bucket(n: int, floor: int = 16) -> int:
    """The row count `n` is padded to: the next power of two, at least `floor`. Compiled
    code is shaped by the bucket, not by `n`, so demonstrations of other lengths in the
    same bucket reuse it (padding rows carry weight 0)."""
    return max(floor, 1 << max(0, n - 1).bit_length())


def _batches(demos: Demos, rows: int) -> Batch:
    """The rows of `demos` as jax arrays, padded to `rows` with copies of row 0 (a real
    row: zeros could make the loss non-finite, and nan * 0 is nan) of weight 0."""
    import jax.numpy as jnp

    take = np.concatenate([np.arange(demos.size), np.zeros(rows - demos.size, np.int64)])
    return Batch({k: jnp.asarray(v[take]) for k, v in demos.obs.items()},
                 {k: jnp.asarray(v[take]) for k, v in demos.actions.items()},
                 jnp.asarray(np.arange(rows) < demos.size, jnp.float32))


def _episode_batches(demos: Demos, slots: int) -> Batch:
    """The episodes of `demos` as jax arrays (slots, T, ...), T the bucket of the longest:
    each episode's rows from step 0, padded after its end with copies of its last row
    (real values: nan * 0 is nan) of weight 0; slots past the episodes are copies of
    episode 0 of weight 0 (the padding episode that `_Trainer.order` pads batches with)."""
    import jax.numpy as jnp

    eps = episodes(demos)
    t = bucket(max(len(e) for e in eps))
    rows = np.zeros((slots, t), np.int64)
    weight = np.zeros((slots, t), np.float32)
    for j in range(slots):
        e = eps[j] if j < len(eps) else eps[0]
        rows[j, :len(e)], rows[j, len(e):] = e, e[-1]
        weight[j, :len(e)] = 1.0 if j < len(eps) else 0.0
    return Batch({k: jnp.asarray(v[rows]) for k, v in demos.obs.items()},
                 {k: jnp.asarray(v[rows]) for k, v in demos.actions.items()}, jnp.asarray(weight))


def _initial(policy, config: FitConfig, restart: int) -> dict:
    import jax

    key = jax.random.fold_in(jax.random.PRNGKey(config.seed), restart)
    params = policy.init(key)
    if restart == 0 or config.init_noise <= 0:
        return params
    names = [w.name for w in policy.program.weights]
    keys = jax.random.split(jax.random.fold_in(key, 1), max(1, len(names)))
    for k, name in zip(keys, names):
        params[name] = params[name] + config.init_noise * jax.random.normal(k, params[name].shape)
    return params


CHUNK = 64  # epochs per compiled call (the ones after a restart stops are skipped, not run)


class _Trainer:
    """One fit's use of the structure's compiled step (`step.fit_step`, shared by every
    restart and by later fits of the same structure): its data, rows and pull centre.

    The data go in as arguments, not closed-over constants: constants would be
    baked into the compiled program and make compiling it take seconds. Their row
    counts are bucketed (`bucket`): the training rows fill `nb` batches of `bs`, and the
    batches are padded to a power of two (batches of padding only are no Adam step), so
    every demonstration length in a bucket runs the same compiled code."""

    def __init__(self, policy, params, train: Demos, val: Demos, config: FitConfig):
        from . import step as fs

        self.step = fs.fit_step(policy, params, config)
        self.lr = fs.learning_rates(policy, params, config)
        self.centre = centre(policy, config.prior_scale)
        if has_memory(policy):
            # Whole episodes: a batch holds about `batch_size` steps' worth of them (at least
            # one), and its empty slots point at a padding episode (index n, weight 0).
            n = len(episodes(train))
            longest = bucket(max(len(e) for e in episodes(train)))
            bs = min(max(1, config.batch_size // longest), bucket(n, floor=1))
            nb = bucket(-(-n // bs), floor=1)
            self.n, self.pad, self.shape = n, n, (nb, bs)
            self.data = _episode_batches(train, bucket(n + 1, floor=1))
            self.val_data = _episode_batches(val, bucket(len(episodes(val)), floor=1))
        else:
            n = train.size
            bs = min(config.batch_size, bucket(n))
            nb = bucket(-(-n // bs), floor=1)
            self.n, self.pad, self.shape = n, 0, (nb, bs)
            self.data, self.val_data = _batches(train, nb * bs), _batches(val, bucket(val.size))
        self.n_rows, self.n_val = np.int32(train.size), np.int32(val.size)
        self.rule = fs.Rule(np.int32(config.max_epochs), np.int32(config.patience), np.int32(config.lr_patience),
                            np.float32(config.lr_decay), np.float32(config.min_delta))

    def init(self, params):
        """(flat params, optimiser state) of a restart from `params`."""
        flat = self.step.ravel(params)
        return flat, self.step.init(flat, self.lr)

    def order(self, rng: np.random.Generator, epochs: int) -> np.ndarray:
        """(epochs, nb, bs) int32: each epoch's shuffled training rows (with memory: episodes),
        padded with row 0 (with memory: the padding episode, index n). Shuffled on the host:
        a jitted permutation would add most of a second to every compile."""
        nb, bs = self.shape
        idx = np.full((epochs, nb * bs), self.pad, np.int32)
        for e in range(epochs):
            idx[e, :self.n] = rng.permutation(self.n)
        return idx.reshape(epochs, nb, bs)

    def epochs(self, run, rng: np.random.Generator):
        """Up to CHUNK more epochs of `run` in one call: (run, (K, 2) losses)."""
        return self.step.epochs(run, self.order(rng, CHUNK), self.data, self.val_data, self.n_rows, self.centre,
                                self.rule)

    def val(self, flat):
        return self.step.val(flat, self.val_data, self.n_rows, self.centre)


def fit(policy, demos: Demos, config: FitConfig = FitConfig(), progress: bool = False) -> FitResult:
    """Fit `policy` to `demos` (see the module docstring). Raises `FitError`
    when every restart fails."""
    t0 = time.perf_counter()
    train, val = (split_episodes if has_memory(policy) else split)(demos, config.val_fraction, config.seed)
    start = _initial(policy, config, 0)
    trainer = _Trainer(policy, start, train, val, config)
    results, best_params = [], None
    with _progress(progress, config) as bar:
        for r in range(config.restarts):
            params = start if r == 0 else _initial(policy, config, r)
            res, flat = _restart(trainer, params, r, config, bar)
            if r == 0 and res.best_epoch == 0:
                # Never better than the initial weights: a loss not finite there makes the first
                # epoch diverge (or the validation loss NaN), so this is where to say which value
                # is at fault. Asked only then: the diagnosis compiles the policy over every row.
                why = diagnose_nonfinite(policy, start, demos, trainer.step.distribution)
                if why:
                    raise FitError(f"the imitation loss is not finite at the initial weights: {why}")
            results.append(res)
            if math.isfinite(res.val_loss) and (best_params is None or res.val_loss < best.val_loss):
                best, best_params = res, flat
    if best_params is None:
        raise FitError("every restart diverged:\n" + "\n".join(f"  - restart {r.restart + 1}: {r.stopped}"
                                                               for r in results)
                       + f"\nLower the learning rate (now {config.learning_rate}; {config.mlp_learning_rate} for "
                         "mlp blocks) or check the weights' constraints and the demonstration.")
    return FitResult(trainer.step.unravel(best_params), best, tuple(results), kind(policy), train.size, val.size,
                     time.perf_counter() - t0, config, prior_summary(policy, config.prior_scale))


def prior_summary(policy, prior_scale: float) -> dict:
    """Which weights the MAP objective holds to what: declared priors, and the weights
    pulled toward their declared values (with the scale of the pull)."""
    pulled = regularised(policy, prior_scale)
    return {"declared": {w.name: str(w.prior) for w in policy.program.weights if w.prior is not None},
            "pulled": list(pulled), "prior_scale": prior_scale if pulled else None}


def _restart(trainer: _Trainer, params, r: int, config: FitConfig, bar) -> tuple[RestartResult, Any]:
    """Train from `params` until early stopping; the learning rate drops by
    `lr_decay` after `lr_patience` epochs without a validation improvement. The epochs
    and these decisions run compiled, CHUNK epochs per call (`step.FitStep.epochs`)."""
    from . import step as fs

    state = trainer.init(params)
    rng = np.random.default_rng([config.seed, r])
    val0 = np.float32(trainer.val(state[0]))
    run = fs.Run(state, np.int32(0), np.int32(fs.RUNNING), val0, np.float32(np.nan), np.int32(0), state[0],
                 np.int32(0), np.float32(1.0), np.full(2, np.nan, np.float32))
    task = bar.add_task(f"restart {r + 1}/{config.restarts}", total=config.max_epochs, train=math.nan,
                        val=float(val0))
    stop = fs.RUNNING if config.max_epochs > 0 else fs.MAX_EPOCHS
    while stop == fs.RUNNING:
        run, losses = trainer.epochs(run, rng)
        stop, epoch, best_val = int(run.stop), int(run.epoch), float(run.best_val)
        ran = np.asarray(losses)[np.isfinite(np.asarray(losses)).all(axis=1)]
        bar.update(task, completed=epoch, train=float(ran[-1, 0]) if len(ran) else math.nan, val=best_val)
    epoch, best_epoch = int(run.epoch), int(run.best_epoch)
    best_val, best_train = float(run.best_val), float(run.best_train)
    stopped = {fs.EARLY: "early stopping", fs.MAX_EPOCHS: "max epochs"}.get(stop)
    if stop == fs.DIVERGED:
        train_loss, val_loss = np.asarray(run.losses).tolist()
        which, value = ("training", train_loss) if not math.isfinite(train_loss) else ("validation", val_loss)
        stopped = (f"diverged at epoch {epoch}: the {which} loss became {value} "
                   f"(best validation loss so far {best_val:.4g})")
    bar.update(task, total=epoch, completed=epoch)
    if best_epoch == 0:  # never improved on the start: a diverged restart has nothing to offer
        best_train = best_val = math.nan if stop == fs.DIVERGED else best_val
    return RestartResult(r, epoch, best_epoch, best_train, best_val, stopped), np.asarray(run.best_flat)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def add_task(self, *args, **kw) -> int:
        return 0

    def update(self, *args, **kw) -> None:
        pass


def _progress(enabled: bool, config: FitConfig):
    if not enabled:
        return _NoProgress()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("train {task.fields[train]:.4g}  best val {task.fields[val]:.4g}"),
                    TimeElapsedColumn(), console=Console(stderr=True))

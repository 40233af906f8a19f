"""The compiled training step of `polc fit`, made once per structure and reused.

    step = fit_step(policy, params, config)    # cached: the same structure gets the same jits
    state = step.init(flat, lr)                # flat = step.ravel(params): (P,) float32
    state, (train_loss, val_loss) = step.epoch(state, idx, data, val_data, n, centre)
    run, losses = step.epochs(run, idxs, data, val_data, n, centre, rule)  # K epochs, early stopping inside
    loss = step.val(flat, data, n, centre)

The parameters are one flat vector (laid out as `jax.flatten_util.ravel_pytree` lays them)
for the optimiser: Adam over one (P,) array instead of one small array per weight (the Car
Racing example has 16 scalar leaves), and the state is a handful of arrays to move per call
instead of ~50. The update is element for element the one `optax.multi_transform` of two
Adams gave (named weights and mlp blocks at their own learning rates, a per-element vector
here), after the same global-norm clip, whose norm is summed leaf by leaf as optax sums it.
Measured on the example: the same losses and weights, bit for bit, as before the flattening
(docs/performance.md, `polc fit`). The validation loss is computed in the epoch's call.

What a fit varies goes in as arguments, not constants baked into the program: the data,
the declared values a prior-less weight is pulled toward (`losses.centre`), the learning rates
and their decay (in the optimiser state), and the number of real rows (the arrays are
padded to a bucket, `train.bucket`, with rows of weight 0; a batch of padding only is no
Adam step), so a second fit of the same structure on as many rows or any count in the same
bucket, in the same process, compiles nothing. `epochs` runs K epochs per call with the
early stopping and learning-rate decay of `train._restart` decided between them in the
compiled loop (float32 comparisons, where the Python loop compared float64 copies of the same
float32 losses: the same decisions but within a rounding of the threshold). Steps are cached by `structure_key`: everything in the
program the loss depends on, so not spans, docs, intents or the weights' declared values.
"""

from __future__ import annotations

import collections
import hashlib
import json
from dataclasses import fields, is_dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .losses import Batch, has_memory, objective as map_objective

_SKIP = {"span", "doc", "text", "init"}  # fields that do not change the traced loss
_CACHE_SIZE = 8  # structures kept (a refinement run fits a new one every round)
_cache: "collections.OrderedDict[tuple, FitStep]" = collections.OrderedDict()


# Run.stop: why a restart's epochs stopped (RUNNING: they go on).
RUNNING, EARLY, MAX_EPOCHS, DIVERGED = 0, 1, 2, 3


class Rule(NamedTuple):
    """When a restart stops and its learning rates drop (FitConfig's numbers, as arrays so
    that other values do not recompile)."""
    max_epochs: Any     # () int32
    patience: Any       # () int32: epochs without a validation improvement before it stops
    lr_patience: Any    # () int32: ... before the learning rates drop
    lr_decay: Any       # () float32: by this factor
    min_delta: Any      # () float32: relative improvement that counts


class Run(NamedTuple):
    """A restart in progress, carried from epoch to epoch inside `FitStep.epochs`."""
    state: Any          # (flat (P,), optimiser state)
    epoch: Any          # () int32: epochs run
    stop: Any           # () int32: RUNNING, EARLY, MAX_EPOCHS or DIVERGED
    best_val: Any       # () float32: the best validation loss (at the start: the initial params')
    best_train: Any     # () float32: the training loss of the best epoch (nan before one)
    best_epoch: Any     # () int32 (0: the start)
    best_flat: Any      # (P,) the params of the best epoch
    decayed: Any        # () int32: the epoch of the last learning-rate drop
    factor: Any         # () float32: the learning rates' decay factor now
    losses: Any         # (2,) float32: the last epoch's [training, validation] loss


class FitStep(NamedTuple):
    """The jitted pieces of fitting one structure (see the module docstring)."""
    init: Callable       # (flat (P,), lr (P,)) -> optimiser state; lr: each element's learning rate
    epoch: Callable      # (state, idx (nb, bs) int32, data, val_data: Batch, n: () int32 rows, centre)
                         #   -> (state, (2,) [mean training loss, validation loss after the epoch])
    epochs: Callable     # (run: Run, idx (K, nb, bs), data, val_data, n, centre, rule: Rule)
                         #   -> (run, (K, 2) losses; nan for epochs skipped after the stop)
    val: Callable        # (flat (P,), data Batch, n: () int32, centre) -> the objective on `data`
    distribution: Callable  # (params, obs batch) -> (mean, std, latents): `acting.batched_distribution`,
    #                         with memory `episodes_distribution` (obs (E, T, ...))
    ravel: Callable      # params -> (P,) float32 NumPy, leaves in jax.tree order
    unravel: Callable    # (P,) -> params (jax arrays)
    key: tuple


def structure_key(tp) -> str:
    """A digest of what the loss of `tp` depends on (its observations, weights with their
    constraints and priors, nodes and mlp blocks), not of spans, docs or declared values."""
    parts = [tp.obs, tp.weights, tp.nodes, tp.mlps]
    if getattr(tp, "states", ()):  # memory: its updates too (a program without keeps its old digest)
        parts.append(tp.states)
    canon = _canon(parts)
    return hashlib.sha256(json.dumps(canon, separators=(",", ":"), default=repr).encode()).hexdigest()


def _canon(x: Any) -> Any:
    if is_dataclass(x):
        return [type(x).__name__] + [[f.name, _canon(getattr(x, f.name))] for f in fields(x) if f.name not in _SKIP]
    if isinstance(x, (tuple, list)):
        return [_canon(v) for v in x]
    if isinstance(x, float):
        return repr(x)
    return x


def fit_step(policy, params, config) -> FitStep:
    """The step of `policy` (params shaped like `params`) under `config`'s clip norm and
    prior scale, made on first use and cached by structure (the last few structures)."""
    leaves = tuple((tuple(np.shape(x)), str(np.asarray(x).dtype)) for x in jax.tree.leaves(params))
    key = (structure_key(policy.program), str(jax.tree.structure(params)), leaves,
           float(config.clip_norm), float(config.prior_scale))
    step = _cache.get(key)
    if step is None:
        step = _cache[key] = _make(policy, params, config, key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    _cache.move_to_end(key)
    return step


def clear_cache() -> None:
    """Forget every cached step (tests; the next fit compiles again)."""
    _cache.clear()


def learning_rates(policy, params, config) -> np.ndarray:
    """(P,) float32: the learning rate of each element of the flat params (named weights:
    `learning_rate`, mlp blocks: `mlp_learning_rate`)."""
    weights = {w.name for w in policy.program.weights}
    rates = {k: jax.tree.map(lambda x, k=k: np.full(np.shape(x), config.learning_rate if k in weights
                                                   else config.mlp_learning_rate, np.float32), v)
             for k, v in params.items()}
    return np.concatenate([np.ravel(x) for x in jax.tree.leaves(rates)]).astype(np.float32)


def _clip_by_global_norm(unravel, max_norm: float) -> optax.GradientTransformation:
    """`optax.clip_by_global_norm` of the flat updates, the norm summed leaf by leaf in the
    order optax sums the params' leaves, so it is the same number to the last bit."""
    def update(updates, state, params=None):
        del params
        g_norm = optax.tree.norm(unravel(updates))
        trigger = jnp.squeeze(g_norm < max_norm)
        return jax.lax.select(trigger, updates, (updates / g_norm.astype(updates.dtype)) * max_norm), state

    return optax.GradientTransformation(optax.init_empty_state, update)


def optimizer(unravel, clip_norm: float) -> optax.GradientTransformation:
    """The clip, Adam as `optax.adam` composes it, then each element's -learning rate and the
    decay factor: both scales live in the state (`FitStep.init`, `with_decay`), so a new
    learning rate or a decay does not recompile."""
    return optax.chain(
        _clip_by_global_norm(unravel, clip_norm),
        optax.scale_by_adam(),
        optax.inject_hyperparams(optax.scale)(step_size=jnp.zeros(1, jnp.float32)),
        optax.inject_hyperparams(optax.scale)(step_size=1.0))


def _make(policy, params, config, key: tuple) -> FitStep:
    treedef = jax.tree.structure(params)
    shapes = [np.shape(x) for x in jax.tree.leaves(params)]
    ends = [int(e) for e in np.cumsum([int(np.prod(sh)) for sh in shapes])]
    starts = [0] + ends[:-1]

    # In the traced code: `ravel_pytree`'s unravel (slices of the flat vector, reshaped).
    def unravel(flat):
        return jax.tree.unflatten(treedef, [flat[a:b].reshape(sh) for a, b, sh in zip(starts, ends, shapes)])

    # On the host, in NumPy: the same values, without an XLA compile or dispatch each.
    def ravel(params) -> np.ndarray:
        return np.concatenate([np.ravel(np.asarray(x, np.float32)) for x in jax.tree.leaves(params)])

    def host_unravel(flat):
        flat = np.asarray(flat, np.float32)
        return jax.tree.unflatten(treedef, [jnp.asarray(flat[a:b].reshape(sh))
                                            for a, b, sh in zip(starts, ends, shapes)])

    episodic = has_memory(policy)
    optimizer_ = optimizer(unravel, config.clip_norm)
    map_value = map_objective(policy, config.prior_scale)

    def objective(flat, batch: Batch, n: int, centre):
        return map_value(unravel(flat), batch, n, centre)

    def init(flat, lr):
        clip, adam, rate, decay = optimizer_.init(flat)
        hyper = dict(rate.hyperparams, step_size=-lr)
        # The decay factor a strong float32 scalar, as `epochs` writes it back.
        decay = decay._replace(hyperparams=dict(decay.hyperparams, step_size=jnp.ones((), jnp.float32)))
        return clip, adam, rate._replace(hyperparams=hyper), decay

    def epoch(state, idx, data: Batch, val_data: Batch, n, centre):
        if episodic:
            return episodes_epoch(state, idx, data, val_data, n, centre)
        nb, bs = idx.shape
        weight = (jnp.arange(nb * bs) < n).astype(jnp.float32).reshape(nb, bs)

        def one(carry, xs):
            flat, opt_state, data = carry
            i, w = xs

            def update(flat, opt_state):
                batch = Batch({k: v[i] for k, v in data.obs.items()}, {k: v[i] for k, v in data.actions.items()},
                              w)
                value, grads = jax.value_and_grad(objective)(flat, batch, n, centre)
                updates, opt_state = optimizer_.update(grads, opt_state, flat)
                return optax.apply_updates(flat, updates), opt_state, value * jnp.sum(w)

            # A batch of padding only (the row count's bucket holds more batches than the
            # rows fill) is no Adam step: the params and the optimiser state pass through.
            flat, opt_state, total = jax.lax.cond(w[0] > 0, update,
                                                  lambda f, o: (f, o, jnp.zeros((), jnp.float32)),
                                                  flat, opt_state)
            return (flat, opt_state, data), total

        (flat, opt_state, _), totals = jax.lax.scan(one, (*state, data), (idx, weight))
        # The validation loss of the new params in the same call: one dispatch and one
        # transfer to the host per epoch, not two.
        return (flat, opt_state), jnp.stack([jnp.sum(totals) / n, objective(flat, val_data, n, centre)])

    def episodes_epoch(state, idx, data: Batch, val_data: Batch, n, centre):
        """`epoch` for a program with memory: `idx` (nb, bs) picks whole episodes (data
        (E, T, ...)), padded with a padding episode (weight 0 at every step); `n` counts the
        real training steps (the objective's rows)."""
        def one(carry, i):
            flat, opt_state, data = carry
            batch = Batch({k: v[i] for k, v in data.obs.items()}, {k: v[i] for k, v in data.actions.items()},
                          data.weight[i])

            def update(flat, opt_state):
                value, grads = jax.value_and_grad(objective)(flat, batch, n, centre)
                updates, opt_state = optimizer_.update(grads, opt_state, flat)
                return optax.apply_updates(flat, updates), opt_state, value * jnp.sum(batch.weight)

            # A batch of padding episodes only is no Adam step (its first is real otherwise).
            flat, opt_state, total = jax.lax.cond(batch.weight[0, 0] > 0, update,
                                                  lambda f, o: (f, o, jnp.zeros((), jnp.float32)),
                                                  flat, opt_state)
            return (flat, opt_state, data), total

        (flat, opt_state, _), totals = jax.lax.scan(one, (*state, data), idx)
        return (flat, opt_state), jnp.stack([jnp.sum(totals) / n, objective(flat, val_data, n, centre)])

    def epochs(run: Run, idx, data: Batch, val_data: Batch, n, centre, rule: Rule):
        """`idx.shape[0]` epochs of `epoch` with `rule`'s early stopping and learning-rate
        decay decided between them, in one call; epochs after the restart stopped are skipped."""
        def one(run: Run, idx_k):
            def go(run: Run):
                state, losses = epoch(run.state, idx_k, data, val_data, n, centre)
                train, val = losses[0], losses[1]
                k = run.epoch + 1
                finite = jnp.isfinite(train) & jnp.isfinite(val)
                better = finite & (val < run.best_val - rule.min_delta * jnp.abs(run.best_val))
                best_epoch = jnp.where(better, k, run.best_epoch)
                patience_out = finite & (k - best_epoch >= rule.patience)
                decay = finite & ~patience_out & (k - jnp.maximum(best_epoch, run.decayed) >= rule.lr_patience)
                factor = jnp.where(decay, run.factor * rule.lr_decay, run.factor)
                stop = jnp.where(~finite, DIVERGED, jnp.where(patience_out, EARLY,
                                                              jnp.where(k >= rule.max_epochs, MAX_EPOCHS, RUNNING)))
                return Run(with_decay_traced(state, factor), k, stop,
                           jnp.where(better, val, run.best_val), jnp.where(better, train, run.best_train), best_epoch,
                           jnp.where(better, state[0], run.best_flat), jnp.where(decay, k, run.decayed), factor,
                           losses), losses

            def skip(run: Run):
                return run, jnp.full(2, jnp.nan, jnp.float32)

            return jax.lax.cond(run.stop == RUNNING, go, skip, run)

        return jax.lax.scan(one, run, idx)

    from ..acting import acting, batched_distribution

    distribution = episodes_distribution(acting(policy)) if episodic else batched_distribution(acting(policy))
    from ..io.executables import cached  # a registered policy's executables come from disk when made before

    def jit(fn: Callable, name: str) -> Callable:  # keyed as `_cache` is: by structure, not by source
        return cached(jax.jit(fn), policy, f"fit.{name}", key, source=False)

    return FitStep(init=jit(init, "init"), epoch=jit(epoch, "epoch"), epochs=jit(epochs, "epochs"),
                   val=jit(objective, "val"), distribution=jit(distribution, "distribution"),
                   ravel=ravel, unravel=host_unravel, key=key)


def episodes_distribution(act) -> Callable:
    """(params, obs (E, T, ...)) -> (mean, std, latents), each (E, T, ...): every episode
    stepped from the initial state (the states' values are among the latents)."""
    def one(params, obs):
        def body(state, o):
            mean, std, latents, nxt = act.distribution(params, o, state)
            return nxt, (mean, std, latents)

        return jax.lax.scan(body, act.init_state(), obs)[1]

    return jax.vmap(one, in_axes=(None, 0))


def with_decay_traced(state, factor):
    """`with_decay` inside a compiled loop (`factor` a traced scalar)."""
    clip, adam, rate, decay = state[1]
    step = jnp.asarray(factor, jnp.float32).reshape(jnp.shape(decay.hyperparams["step_size"]))
    return state[0], (clip, adam, rate, decay._replace(hyperparams=dict(decay.hyperparams, step_size=step)))


def with_decay(state, factor: float):
    """`state` with every learning rate scaled by `factor` (no recompile: it is state)."""
    clip, adam, rate, decay = state
    return clip, adam, rate, decay._replace(hyperparams=dict(decay.hyperparams, step_size=np.float32(factor)))


__all__ = ["DIVERGED", "EARLY", "MAX_EPOCHS", "RUNNING", "FitStep", "Rule", "Run", "clear_cache", "fit_step", "learning_rates", "structure_key", "with_decay"]

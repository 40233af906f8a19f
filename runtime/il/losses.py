"""Imitation losses: how far a policy is from demonstrated actions.

Actions that declare noise (`~ normal(std = ...)`) contribute their Gaussian
negative log-likelihood (the paper's choice: the std is fitted too); actions
without noise contribute the squared error of their mean. Both are per step,
summed over actions and their elements, so `per_step_loss` gives one number per
demonstration row and a batch loss is its (weighted) mean.

MAP fitting adds the negative log prior (`prior_penalty`): the weights' declared
priors (`policy.log_prior`, no Jacobian term: see `polc.backend.lower`) and, for every
weight that declares none, a Gaussian pull toward its declared value in the
unconstrained space, `(u - u_declared)^2 / (2 S^2)` with S the `prior_scale`
(S = inf: none; weights that only a noise std reads are not pulled). The objective of `n` demonstration rows is
`sum of per-step losses + prior_penalty`; `objective` returns it divided by `n`,
so it reads on the scale of a mean per-step loss, and a prior's weight against
the data is that of one more row per `n`, whatever the batch size.

A program with MEMORY (`state` declarations) is fitted through time: a batch holds whole
episodes, padded to a common length T (`Batch` arrays (B, T, *shape), `weight` (B, T): 1 on
an episode's real steps, 0 after its end), and `episode_loss` runs each one as a
`jax.lax.scan` over its steps from the initial state (`policy.state0`), the recorded
observations as inputs, so each step's loss sees the state the episode's earlier steps
made and gradients flow back through the state. The per-step losses are those of a row;
the batch loss is their weighted mean over real steps, the same formula as for rows.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from polc.analysis.deps import mean_weights

Arrays = dict[str, jax.Array]


class Batch(NamedTuple):
    obs: Arrays      # name -> (B, *obs shape) float32; with memory (B, T, *obs shape): episodes
    actions: Arrays  # name -> (B, *action shape) float32, the demonstrated actions (with memory (B, T, ...))
    weight: jax.Array  # (B,) float32: 1 for a real row, 0 for padding (with memory (B, T): real steps)


def kind(policy) -> str:
    """"gaussian_nll", "squared_error", or "gaussian_nll+squared_error" (mixed)."""
    tp = policy.program
    noisy = any(a.std is not None for a in tp.actions)
    plain = any(a.std is None for a in tp.actions)
    return "+".join(k for k, on in (("gaussian_nll", noisy), ("squared_error", plain)) if on)


def per_step_loss(policy) -> Callable[[dict, Arrays, Arrays], jax.Array]:
    """(params, obs batch, action batch) -> (B,) loss of each row: `polc.runtime.acting`'s
    log-density and means, each row at the initial policy state (rows are fitted one by one)."""
    from ..acting import acting, log_prob

    policy_act = acting(policy)
    tp = policy.program
    noisy = any(a.std is not None for a in tp.actions)
    plain = tuple(a.name for a in tp.actions if a.std is None)

    def one(params, obs, actions):
        state = policy_act.init_state()
        loss = jnp.zeros((), jnp.float32)
        if noisy:
            loss = loss - log_prob(policy_act, params, obs, actions, state)[0]
        if plain:
            mean = policy_act.distribution(params, obs, state)[0]
            for name in plain:
                loss = loss + jnp.sum(jnp.square(mean[name] - actions[name]))
        return loss

    return jax.vmap(one, in_axes=(None, 0, 0))


def has_memory(policy) -> bool:
    """Whether `policy` carries a state from step to step (then it is fitted by episodes)."""
    return bool(getattr(policy.program, "states", ()))


def _step_loss(policy_act, noisy: bool, plain: tuple[str, ...]):
    """(params, obs, actions, state) -> (the loss of one step, next state)."""
    from ..acting import gaussian_log_prob

    def one(params, obs, actions, state):
        mean, std, _, nxt = policy_act.distribution(params, obs, state)
        loss = jnp.zeros((), jnp.float32)
        if noisy:
            loss = loss - gaussian_log_prob(mean, std, actions)
        for name in plain:
            loss = loss + jnp.sum(jnp.square(mean[name] - actions[name]))
        return loss, nxt

    return one


def episode_loss(policy) -> Callable[[dict, Arrays, Arrays, jax.Array], jax.Array]:
    """(params, obs (B, T, ...), actions (B, T, ...), weight (B, T)) -> (B, T) the loss of
    every step of every episode, each episode a scan over its steps from the initial state.
    Past an episode's end (weight 0) the state is held, so padding steps compute values
    as finite as the episode's own."""
    from ..acting import acting

    policy_act = acting(policy)
    tp = policy.program
    step = _step_loss(policy_act, any(a.std is not None for a in tp.actions),
                      tuple(a.name for a in tp.actions if a.std is None))

    def one(params, obs, actions, weight):
        def body(state, xs):
            o, a, w = xs
            loss, nxt = step(params, o, a, state)
            return jax.tree.map(lambda n, s: jnp.where(w > 0, n, s), nxt, state), loss

        return jax.lax.scan(body, policy_act.init_state(), (obs, actions, weight))[1]

    return jax.vmap(one, in_axes=(None, 0, 0, 0))


def batch_loss(policy) -> Callable[[dict, Batch], jax.Array]:
    """(params, batch) -> the weighted mean loss (a scalar to minimise): over rows, or over
    the real steps of whole episodes for a program with memory (`episode_loss`)."""
    if has_memory(policy):
        per_episode = episode_loss(policy)

        def episodes(params, batch: Batch) -> jax.Array:
            return jnp.sum(per_episode(params, batch.obs, batch.actions, batch.weight) * batch.weight) / jnp.maximum(
                jnp.sum(batch.weight), 1.0)

        return episodes
    per_step = per_step_loss(policy)

    def loss(params, batch: Batch) -> jax.Array:
        return jnp.sum(per_step(params, batch.obs, batch.actions) * batch.weight) / jnp.maximum(
            jnp.sum(batch.weight), 1.0)

    return loss


def regularised(policy, prior_scale: float) -> tuple[str, ...]:
    """The weights that `prior_penalty` pulls toward their declared value: those
    without a prior of their own that some action's mean reads, when `prior_scale`
    is finite. A weight only a noise std reads is not pulled: the demonstration's
    residuals identify it, and it never moves the mean action."""
    if not math.isfinite(prior_scale):
        return ()
    means = mean_weights(policy.program)
    return tuple(w.name for w in policy.program.weights if w.prior is None and w.name in means)


def prior_penalty(policy, prior_scale: float) -> Callable[[dict, dict], jax.Array]:
    """(params, centre) -> -(log prior): the declared priors plus the pull of `regularised`
    weights toward `centre` (name -> declared unconstrained value; see the module docstring).
    The centre is an argument so one compiled step serves every declared value."""
    pulled = regularised(policy, prior_scale)
    has_priors = any(w.prior is not None for w in policy.program.weights)

    def penalty(params, centre) -> jax.Array:
        total = -policy.log_prior(params) if has_priors else jnp.zeros((), jnp.float32)
        for name in pulled:
            total = total + 0.5 * jnp.sum(jnp.square((params[name] - centre[name]) / prior_scale))
        return total

    return penalty


def centre(policy, prior_scale: float) -> dict:
    """The declared unconstrained values the `regularised` weights are pulled toward."""
    pulled = regularised(policy, prior_scale)
    declared = policy.init(jax.random.PRNGKey(0))  # weights' entries are the declared values, key-independent
    return {name: declared[name] for name in pulled}


def objective(policy, prior_scale: float) -> Callable[[dict, Batch, int, dict], jax.Array]:
    """(params, batch, n_rows, centre) -> batch mean loss + prior_penalty(params, centre) /
    n_rows: the MAP objective of `n_rows` demonstration rows on the mean-loss scale, pulled
    toward `centre` (`centre(policy, prior_scale)` for the declared values)."""
    loss = batch_loss(policy)
    penalty = prior_penalty(policy, prior_scale)

    def value(params, batch: Batch, n_rows: int, centre: dict) -> jax.Array:
        return loss(params, batch) + penalty(params, centre) / n_rows

    return value

"""Imitation losses: how far a policy is from demonstrated actions.

Actions that declare noise (`~ normal(std = ...)`) contribute their Gaussian
negative log-likelihood (the paper's choice: the std is fitted too); actions
without noise contribute the squared error of their mean. Both are per step,
summed over actions and their elements, so `per_step_loss` gives one number per
demonstration row and a batch loss is its (weighted) mean.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

Arrays = dict[str, jax.Array]


class Batch(NamedTuple):
    obs: Arrays      # name -> (B, *obs shape) float32
    actions: Arrays  # name -> (B, *action shape) float32, the demonstrated actions
    weight: jax.Array  # (B,) float32: 1 for a real row, 0 for padding


def kind(policy) -> str:
    """"gaussian_nll", "squared_error", or "gaussian_nll+squared_error" (mixed)."""
    tp = policy.program
    noisy = any(a.std is not None for a in tp.actions)
    plain = any(a.std is None for a in tp.actions)
    return "+".join(k for k, on in (("gaussian_nll", noisy), ("squared_error", plain)) if on)


def per_step_loss(policy) -> Callable[[dict, Arrays, Arrays], jax.Array]:
    """(params, obs batch, action batch) -> (B,) loss of each row."""
    tp = policy.program
    noisy = any(a.std is not None for a in tp.actions)
    plain = tuple(a.name for a in tp.actions if a.std is None)

    def one(params, obs, actions):
        loss = jnp.zeros((), jnp.float32)
        if noisy:
            loss = loss - policy.log_prob(params, obs, actions)
        if plain:
            mean, _ = policy.apply(params, obs)
            for name in plain:
                loss = loss + jnp.sum(jnp.square(mean[name] - actions[name]))
        return loss

    return jax.vmap(one, in_axes=(None, 0, 0))


def batch_loss(policy) -> Callable[[dict, Batch], jax.Array]:
    """(params, batch) -> the weighted mean loss (a scalar to minimise)."""
    per_step = per_step_loss(policy)

    def loss(params, batch: Batch) -> jax.Array:
        return jnp.sum(per_step(params, batch.obs, batch.actions) * batch.weight) / jnp.maximum(
            jnp.sum(batch.weight), 1.0)

    return loss

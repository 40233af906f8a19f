"""The diagonal Gaussian every acting path samples and scores, elementwise.

Each function works on arrays of any shape (one action, a batch, brax's (batch, unroll, A)
rows) and returns the elementwise value; callers sum over what an event is to them
(`_policy.gaussian_log_prob` sums every action of one step, brax sums the action axis).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def normal_sample(key: jax.Array, loc, scale):
    """loc + scale * noise, noise ~ N(0, 1) of loc's shape and dtype: the draw BEFORE any
    clipping to an action's range."""
    return loc + scale * jax.random.normal(key, jnp.shape(loc), jnp.result_type(loc))


def normal_log_density(x, loc, scale):
    """log N(x; loc, scale), elementwise (x is read as float32)."""
    z = (jnp.asarray(x, jnp.float32) - loc) / scale
    return -0.5 * jnp.square(z) - jnp.log(scale) - _HALF_LOG_2PI


def normal_entropy(scale):
    """The differential entropy of N(., scale), elementwise (nats)."""
    return 0.5 + _HALF_LOG_2PI + jnp.log(scale)


def normal_kl(loc_p, scale_p, loc_q, scale_q):
    """KL(p || q) of two Gaussians, elementwise."""
    return (jnp.log(scale_q / scale_p) + (jnp.square(scale_p) + jnp.square(loc_p - loc_q))
            / (2.0 * jnp.square(scale_q)) - 0.5)

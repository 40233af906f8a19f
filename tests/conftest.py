"""Test-wide strictness: JAX never promotes ranks silently and runs on the CPU."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_platforms", "cpu")

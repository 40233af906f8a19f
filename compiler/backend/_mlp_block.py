"""The `mlp(...)` block of a Pol program as a flax.linen module.

Apart from `lower` so that lowering a structure without an mlp block never
imports flax (about 90 ms of CPU at every `polc fit`, `rl` or `eval`); `lower`
imports this module only when a program has one.
"""

from __future__ import annotations

from typing import Callable

import flax.linen as nn


class MlpBlock(nn.Module):
    """Dense layers of `hidden` sizes with `activation` after each, then a Dense
    of size `out` (or 1, squeezed, when out == 0).
    Input: the flattened, concatenated inputs, shape (in_size,)."""

    hidden: tuple[int, ...]
    out: int
    activation: Callable  # e.g. jnp.tanh: `lower.ACTIVATIONS` names them

    @nn.compact
    def __call__(self, x):
        for size in self.hidden:
            x = self.activation(nn.Dense(size)(x))
        y = nn.Dense(self.out or 1)(x)
        return y if self.out else y[0]

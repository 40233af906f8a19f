"""A population of params in one set of environments: environment i acts with the
i-th params of the population, on the mean actions, one batched policy call per
step for all of them (what `trace.Rollout` does for one params).

The params travel as one (P, D) float32 array: each row is the policy's
unconstrained params flattened (`jax.flatten_util.ravel_pytree`), so a row is a
point of the space the evolution strategy searches, and every weight constraint
holds for every row by construction.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ...trace.rollout import Rollout, RolloutConfig, RolloutResult, TraceLayout


def flatten(params) -> tuple[np.ndarray, Callable]:
    """(params as one float32 vector (D,), the function mapping such a vector back to params)."""
    from jax.flatten_util import ravel_pytree

    flat, unravel = ravel_pytree(params)
    return np.asarray(flat, np.float32), unravel


def population_step(policy, layout: TraceLayout, unravel: Callable) -> Callable:
    """The jitted step: (rows (P, D), flat_obs (P, O), seeds (P,), steps (P,)) -> (P, A) mean actions."""
    import jax
    import jax.numpy as jnp

    tp = policy.program
    offsets = {s.column[len("obs."):]: s for s in layout.obs}

    def one(row, flat, seed, step):
        obs = {o.name: flat[offsets[o.name].start:offsets[o.name].start + offsets[o.name].size]
               .reshape(o.type.shape) for o in tp.obs}
        mean, _, _ = policy.distribution(unravel(row), obs)
        return jnp.concatenate([jnp.ravel(jnp.asarray(mean[a.name], jnp.float32)) for a in tp.actions])

    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0)))


class Population(Rollout):
    """`Rollout` whose params are a population: `run(rows, seeds)` plays row i on seeds[i].

        with Population(policy, spec, size=20, unravel=unravel) as pop:
            result = pop.run(rows, [seed] * 20)      # result.returns[i]: row i's return
    """

    def __init__(self, policy, spec: Any, size: int, unravel: Callable):
        super().__init__(policy, spec, RolloutConfig(n_envs=size, trace=False))
        self.step_fn = population_step(policy, self.layout, unravel)

    def run(self, rows, seeds: Sequence[int], on_episode=None, on_steps=None) -> RolloutResult:
        """One episode per row, row i on seeds[i]: one environment per row, so environment i
        runs episode i from its first reset to its end and no environment takes a second one."""
        rows = np.asarray(rows, np.float32)
        if not (rows.ndim == 2 and len(rows) == len(seeds) == self.n):
            raise ValueError(f"a population of {self.n} runs {self.n} rows on {self.n} seeds "
                             f"(got {rows.shape[0] if rows.ndim == 2 else rows.shape} rows, {len(seeds)} seeds)")
        return super().run(rows, seeds, on_episode, on_steps)

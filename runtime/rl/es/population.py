"""A population of params in one set of environments: environment i acts with the
i-th params of the population, on the mean actions, one batched policy call per
step for all of them (what `trace.Rollout` does for one params).

The params travel as one (P, D) float32 array: each row is a point of the space
the evolution strategy searches (`SearchSpace`): the unconstrained params that
move some action's mean, flattened, so every weight constraint holds for every
row by construction. Weights that only a noise std reads never change a mean
action, so they are not searched and keep their value.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ...trace.rollout import Rollout, RolloutConfig, RolloutResult, TraceLayout
from ..collect import unflatten


class SearchSpace:
    """The searched part of a policy's params as one float32 vector: every weight some
    action's mean reads (`polc.analysis.deps.mean_weights`) and every mlp's parameters, in
    `ravel_pytree`'s order; the other weights (read only by noise stds) stay as in `params`.

        space = SearchSpace(policy, params)
        theta = space.vector(params)          # (D,)
        params = space.params(theta)          # the policy's params again, fixed weights included
    """

    def __init__(self, policy, params):
        from jax.flatten_util import ravel_pytree

        from polc.analysis.deps import mean_weights

        weights = {w.name for w in policy.program.weights}
        means = mean_weights(policy.program)
        self.fixed = {k: v for k, v in params.items() if k in weights and k not in means}
        self.searched = tuple(k for k in params if k not in self.fixed)
        flat, self._unravel = ravel_pytree({k: params[k] for k in self.searched})
        self.size = int(flat.size)

    def vector(self, params) -> np.ndarray:
        from jax.flatten_util import ravel_pytree

        return np.asarray(ravel_pytree({k: params[k] for k in self.searched})[0], np.float32)

    def params(self, vector) -> dict:
        return {**self.fixed, **self._unravel(vector)}


def population_step(policy, layout: TraceLayout, space: SearchSpace) -> Callable:
    """The jitted step: (rows (P, D), flat_obs (P, O), state, seeds (P,), steps (P,)) ->
    ((P, A) mean actions, next state): `polc.runtime.acting.act` with row i's params in
    environment i, the policy state reset where an episode starts."""
    import jax
    import jax.numpy as jnp

    from ...acting import act, acting

    tp = policy.program
    obs_names = [o.name for o in tp.obs]
    policy_act = acting(policy)

    def one(row, flat, state, seed, step):
        obs = unflatten(flat, layout.obs, obs_names)  # as the paper's learner's collector unpacks them
        s = act(policy_act, space.params(row), obs, state, fresh=step == 0)
        return jnp.concatenate([jnp.ravel(jnp.asarray(s.mean[a.name], jnp.float32)) for a in tp.actions]), s.state

    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, 0)))


class Population(Rollout):
    """`Rollout` whose params are a population: `run(rows, seeds)` plays row i on seeds[i].

        with Population(policy, spec, size=20, space=SearchSpace(policy, params)) as pop:
            result = pop.run(rows, [seed] * 20)      # result.returns[i]: row i's return
    """

    def __init__(self, policy, spec: Any, size: int, space: SearchSpace):
        super().__init__(policy, spec, RolloutConfig(n_envs=size, trace=False))
        self.step_fn = population_step(policy, self.layout, space)

    def run(self, rows, seeds: Sequence[int], on_episode=None, on_steps=None) -> RolloutResult:
        """One episode per row, row i on seeds[i]: one environment per row, so environment i
        runs episode i from its first reset to its end and no environment takes a second one."""
        rows = np.asarray(rows, np.float32)
        if not (rows.ndim == 2 and len(rows) == len(seeds) == self.n):
            raise ValueError(f"a population of {self.n} runs {self.n} rows on {self.n} seeds "
                             f"(got {rows.shape[0] if rows.ndim == 2 else rows.shape} rows, {len(seeds)} seeds)")
        return super().run(rows, seeds, on_episode, on_steps)

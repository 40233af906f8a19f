"""The compiled policy as a brax PPO network, and its action distribution.

The policy network IS the compiled policy (`policy_network_factory`): its
`init` returns the start params (the IL-fitted ones, or `policy.init`'s) and
its `apply` unpacks the flat observation into the named fields in schema
order (`collect.unflatten` over `TraceLayout`'s segments, as `polc rl` does),
calls `polc.runtime.acting`'s distribution (batched over brax's axes) and returns
[mean (A), std (A)] with the actions in the environment's order. The params
brax optimises are polc's UNCONSTRAINED params, so every weight constraint is
enforced by the reparameterisation inside `apply` at every step. The critic is
brax's MLP value network (`brax.training.networks.make_value_network`).

The action distribution (`polc_normal`). brax's default `NormalTanhDistribution`
samples u ~ N(loc, softplus(scale)) and executes tanh(u): it would squash the
compiled mean a second time (the deterministic action would be tanh(mean), not
the mean) and its std would not be the policy's declared std. `PolcNormal` is
a brax `ParametricDistribution` with an IDENTITY postprocessor whose loc is
the compiled mean (already clipped to the action's declared range by the
lowering) and whose scale is the declared std, as is: the deterministic
action (brax's `mode`) is exactly the compiled policy's mean, a sample is the
Gaussian draw mean + std * noise BEFORE clipping, and its log-density is the
compiled policy's `log_prob` of that draw. Clipping the draw to the declared
range happens in the environment (`clip_to_policy`, a brax `Wrapper`), as in
`polc rl` (runtime/rl/collect.py): the score function of the draw stays exact.
Observation normalisation is off: the policy reads the physical observations
its source declares.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

BRAX_ENVS = {"door_mjx": "polc.runtime.envs.door_mjx:make"}  # name -> "module:factory" of a brax Env


def _brax():
    """Import brax's training modules (their import of jaxopt warns; polc never calls it)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="JAXopt is no longer maintained", category=DeprecationWarning)
        from brax.envs.base import Wrapper
        from brax.training import distribution, networks
        from brax.training.agents.ppo import networks as ppo_networks
        from brax.training.agents.ppo import train as ppo
    return distribution, networks, ppo_networks, ppo, Wrapper


class BraxError(Exception):
    """A brax run cannot proceed; the message says why and what to change."""


# ---- the policy as a brax network ---------------------------------------------------


class _Normal:
    """A diagonal Gaussian with brax's distribution interface (loc, scale (..., A)); the
    densities are `polc.runtime.acting`'s, as every other learner's."""

    def __init__(self, loc, scale):
        self.loc, self.scale = loc, scale

    def sample(self, seed):
        from ...acting import normal_sample

        return normal_sample(seed, self.loc, self.scale)

    def mode(self):
        return self.loc

    def log_prob(self, x):
        from ...acting import normal_log_density

        return normal_log_density(x, self.loc, self.scale)

    def entropy(self):
        from ...acting import normal_entropy

        return normal_entropy(self.scale)

    def kl_divergence(self, old: "_Normal"):
        """KL(old || self), summed over the action axis (brax's convention)."""
        import jax.numpy as jnp

        from ...acting import normal_kl

        return jnp.sum(normal_kl(old.loc, old.scale, self.loc, self.scale), axis=-1)


def polc_normal(action_size: int):
    """The `ParametricDistribution` over parameters [mean (A), std (A)] (module docstring)."""
    distribution = _brax()[0]

    class PolcNormal(distribution.ParametricDistribution):
        def __init__(self):
            super().__init__(param_size=2 * action_size, postprocessor=distribution.IdentityPostprocessor(),
                             event_ndims=1, reparametrizable=True)

        def create_dist(self, parameters):
            import jax.numpy as jnp

            loc, scale = jnp.split(parameters, 2, axis=-1)
            return _Normal(loc, scale)

    return PolcNormal()


def verify_memoryless(tp) -> None:
    """Raise `BraxError` for a program with memory: brax's policy network is a function of
    the current observation, with no state to carry between steps (docs/brax.md)."""
    if tp.states:
        names = ", ".join(f'"{st.name}"' for st in tp.states)
        raise BraxError(f'policy "{tp.name}" has memory (state {names}), and brax\'s policy network carries no '
                        f"state between steps: train it with --engine polc or --engine es")


def verify_actions(tp, schema) -> None:
    """Raise `BraxError` unless every environment action is a stochastic action of the policy."""
    from ..collect import RLError, verify_stochastic

    try:
        verify_stochastic(tp)
    except RLError as e:
        raise BraxError(str(e)) from None
    declared = {a.name for a in tp.actions}
    missing = [f.name for f in schema.actions if f.name not in declared]
    if missing or len(declared) != len(schema.actions):
        raise BraxError(f'policy "{tp.name}" must declare exactly the actions of environment "{schema.name}" '
                        f"({', '.join(f.name for f in schema.actions)})")


def policy_apply(policy, schema) -> Callable:
    """(params, obs (..., O)) -> (..., 2A) [mean, std], actions in the schema's order: the
    distribution of `polc.runtime.acting` (brax's policy network has no state to carry: a
    program with memory is refused, `verify_memoryless`)."""
    import jax.numpy as jnp

    from ...acting import acting, batched_distribution
    from ...trace.rollout import TraceLayout
    from ..collect import unflatten

    tp = policy.program
    verify_memoryless(tp)
    layout = TraceLayout(tp, schema)
    obs_names = [o.name for o in tp.obs]
    order = [f.name for f in schema.actions]
    distribution = batched_distribution(acting(policy))

    def apply(params, obs):
        lead = obs.shape[:-1]
        flat = jnp.reshape(obs, (-1, obs.shape[-1]))
        mean, std, _ = distribution(params, unflatten(flat, layout.obs, obs_names))
        rows = [jnp.reshape(mean[n], (flat.shape[0], -1)) for n in order] + \
               [jnp.reshape(std[n], (flat.shape[0], -1)) for n in order]
        out = jnp.concatenate(rows, axis=-1)
        return jnp.reshape(out, lead + out.shape[-1:])

    return apply


def policy_network_factory(policy, schema, start_params: Any, value_hidden: tuple[int, ...] = (64, 64)):
    """A brax `network_factory` (obs size, action size, ...) -> PPONetworks whose policy
    network is the compiled policy starting from `start_params` (unconstrained)."""
    import jax
    import jax.numpy as jnp

    _, networks, ppo_networks, _, _ = _brax()
    verify_actions(policy.program, schema)
    apply = policy_apply(policy, schema)
    start = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), start_params)
    size = sum(f.size for f in schema.actions)

    def factory(observation_size, action_size, preprocess_observations_fn=lambda x, y: x, **unused):
        if action_size != size:
            raise BraxError(f"the environment takes {action_size} actions, schema \"{schema.name}\" {size}")
        policy_network = networks.FeedForwardNetwork(
            init=lambda key: start, apply=lambda normalizer, params, obs: apply(params, obs))
        value_network = networks.make_value_network(observation_size, preprocess_observations_fn,
                                                    hidden_layer_sizes=value_hidden)
        return ppo_networks.PPONetworks(policy_network=policy_network, value_network=value_network,
                                        parametric_action_distribution=polc_normal(size))

    return factory


def clip_to_policy(env, policy, schema):
    """`env` with each action clipped to the range the policy declares (brax `Wrapper`)."""
    import jax.numpy as jnp

    Wrapper = _brax()[4]
    by_name = {a.name: a for a in policy.program.actions}
    lo = np.concatenate([np.full(f.size, by_name[f.name].lo, np.float32) for f in schema.actions])
    hi = np.concatenate([np.full(f.size, by_name[f.name].hi, np.float32) for f in schema.actions])

    class ClipToPolicy(Wrapper):
        def step(self, state, action):
            return self.env.step(state, jnp.clip(action, lo, hi))

    return ClipToPolicy(env)


def make_env(name: str):
    """The brax Env registered as `name` (BRAX_ENVS)."""
    import importlib

    if name not in BRAX_ENVS:
        raise BraxError(f'environment "{name}" has no MJX version for the brax engine; known: '
                        f"{', '.join(sorted(BRAX_ENVS))}")
    module, factory = BRAX_ENVS[name].split(":")
    return getattr(importlib.import_module(module), factory)()

"""The acting step of a compiled policy, and the small transforms of its distribution.

`acting(policy)` turns a `CompiledPolicy` into an `Acting`: its distribution at one step,
`(params, obs, state) -> (mean, std, latents, next_state)`, unbatched, and the policy
state it starts an episode from. Everything that acts derives from that one function:
`act` (the means, or draws mean + std * noise, with the step's latents and next state),
`log_prob` and `gaussian_log_prob` (the log-density of draws), `episodes_log_prob` (of
whole padded episodes), `batched_distribution` (of independent rows). Transforms in optax's
style wrap the distribution and return an `Acting` again, so they chain and every consumer
sees the same distribution:

    base = acting(policy)
    rl = with_std_scale(with_min_std(base, 0.1), scale)   # std = max(std, 0.1) * scale

The POLICY STATE is a pytree carried from step to step of an episode: the program's
states (docs/language.md, "Memory"), name -> value, starting from `CompiledPolicy.state0`
and stepped by `CompiledPolicy.step_distribution`; a program without memory has the state
`{}` (`next_state` is `state`) and acts through its memoryless `distribution`, bit for bit
as before states existed. The batched steps built on `act` (`polc.runtime.trace.rollout`,
`polc.runtime.rl.collect`, `polc.runtime.rl.es.population`) carry one state per
environment (`initial_states`) and reset a slot's to the initial state where its episode
starts (`fresh`: its step counter is 0). `episodes_log_prob` is a `lax.scan` over the time
axis from the initial state for a program with memory (a `vmap` over steps without).
Noise and log-densities are computed here from the distribution, so the compiled policy's
own `sample` / `log_prob` / `step_sample` / `step_log_prob` are not needed by the runtime.

`batched_distribution` scores independent rows, each at the initial state: it is what a
memoryless program's `polc fit` and brax's PPO networks use; brax's policy network is
stateless, so the brax engine refuses a program with memory (`polc.runtime.rl.brax`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from ._gaussian import normal_log_density, normal_sample

Arrays = dict   # name -> array
State = Any     # a pytree of arrays; {} for a policy without memory


class Acting(NamedTuple):
    """A policy's acting step, unbatched (shapes are one environment's)."""

    program: Any                                   # the TypedProgram (names, shapes, ranges, noise)
    init_state: Callable[[], State]                # () -> the state an episode starts from
    distribution: Callable[[Any, Arrays, State], tuple[Arrays, Arrays, Arrays, State]]
    # (params, obs, state) -> (mean, std, latents, next_state); std only for the noisy actions


class Step(NamedTuple):
    """What one step of one environment computed."""

    mean: Arrays      # action name -> mean (clipped to the action's range by the lowering)
    std: Arrays       # noisy action name -> std (after the transforms)
    actions: Arrays   # action name -> the Gaussian draw (unclipped), or the mean when not sampled
    latents: Arrays   # latent name -> value
    state: State      # the policy state after this step


def acting(policy) -> Acting:
    """The `Acting` of a `CompiledPolicy` (polc.lower)."""
    state0 = dict(getattr(policy, "state0", None) or {})
    if not state0:  # no memory: the memoryless entry point, so such a program acts bit for bit as before
        def distribution(params, obs: Arrays, state: State):
            mean, std, latents = policy.distribution(params, obs)
            return mean, std, latents, state
    else:
        def distribution(params, obs: Arrays, state: State):
            return policy.step_distribution(params, obs, state)

    def init_state() -> State:
        return dict(state0)

    return Acting(policy.program, init_state, distribution)


def _map_std(act: Acting, f: Callable) -> Acting:
    def distribution(params, obs, state):
        mean, std, latents, nxt = act.distribution(params, obs, state)
        return mean, {k: f(v) for k, v in std.items()}, latents, nxt

    return act._replace(distribution=distribution)


def with_min_std(act: Acting, min_std) -> Acting:
    """`act` whose every std is at least `min_std` (max(std, min_std)); 0 leaves a positive std as is."""
    return _map_std(act, lambda s: jnp.maximum(s, min_std))


def with_std_scale(act: Acting, scale) -> Acting:
    """`act` whose every std is multiplied by `scale` (a float or a traced scalar: built
    inside a jitted step, the scale is an argument and a new value does not recompile)."""
    return _map_std(act, lambda s: s * scale)


def step_key(key: jax.Array, episode, step) -> jax.Array:
    """The key of one step's noise: fold_in(fold_in(key, episode), step), so an episode's
    draws depend only on the key, its episode (or seed) number and the step."""
    return jax.random.fold_in(jax.random.fold_in(key, episode), step)


def act(act_: Acting, params, obs: Arrays, state: State, key: Optional[jax.Array] = None,
        fresh=None) -> Step:
    """One step of one environment: the distribution at `obs`, and with `key` a draw of
    every noisy action (one split of `key` per noisy action, in declaration order, as
    `CompiledPolicy.sample` splits it). `fresh` (a () bool, e.g. step == 0): start from the
    initial state instead of `state`, where an episode begins."""
    if fresh is not None:
        state = reset_where(act_, state, fresh)
    mean, std, latents, nxt = act_.distribution(params, obs, state)
    actions = dict(mean)
    if key is not None:
        noisy = [a for a in act_.program.actions if a.std is not None]
        keys = jax.random.split(key, len(noisy)) if noisy else ()
        for k, a in zip(keys, noisy):
            actions[a.name] = normal_sample(k, mean[a.name], std[a.name])
    return Step(mean, std, actions, latents, nxt)


def clip_actions(program, actions: Arrays) -> Arrays:
    """Each action clipped to its declared range (what the environment executes; a draw
    is recorded before this, so its log-density stays the Gaussian's)."""
    return {a.name: _clip(actions[a.name], a.lo, a.hi) for a in program.actions}


def _clip(x, lo: float, hi: float):
    if lo == -float("inf") and hi == float("inf"):
        return x
    return jnp.clip(x, None if lo == -float("inf") else lo, None if hi == float("inf") else hi)


def gaussian_log_prob(mean: Arrays, std: Arrays, actions: Arrays) -> jax.Array:
    """() the log-density of `actions` under independent normals (mean, std), summed over
    every noisy action (the keys of `std`) and its elements."""
    total = jnp.zeros((), jnp.float32)
    for name, s in std.items():
        total = total + jnp.sum(normal_log_density(actions[name], mean[name], s))
    return total


def log_prob(act_: Acting, params, obs: Arrays, actions: Arrays, state: State) -> tuple[jax.Array, State]:
    """(() log-density of the draws `actions` at `obs`, next state)."""
    mean, std, _, nxt = act_.distribution(params, obs, state)
    return gaussian_log_prob(mean, std, actions), nxt


def episodes_log_prob(act_: Acting, params, obs: Arrays, actions: Arrays) -> jax.Array:
    """(E, T) log-densities of padded episodes (obs and actions (E, T, *shape), every
    episode starting at t = 0)."""
    if not act_.init_state():  # no memory: the steps are independent
        def one(params, obs, actions):
            return log_prob(act_, params, obs, actions, {})[0]

        per_step = jax.vmap(one, in_axes=(None, 0, 0))
        return jax.vmap(per_step, in_axes=(None, 0, 0))(params, obs, actions)

    def episode(params, obs, actions):  # (T, ...) -> (T,): a scan over time from the initial state
        def step(state, xs):
            logp, nxt = log_prob(act_, params, xs[0], xs[1], state)
            return nxt, logp

        return jax.lax.scan(step, act_.init_state(), (obs, actions))[1]

    return jax.vmap(episode, in_axes=(None, 0, 0))(params, obs, actions)


def batched_distribution(act_: Acting) -> Callable:
    """(params, obs (B, *shape)) -> (mean, std, latents), each (B, ...): independent rows,
    each at the initial state; for a program without memory only (a program with memory is
    scored along its episodes: `episodes_log_prob`), so raises ValueError for one."""
    if act_.init_state():
        names = ", ".join(f'"{n}"' for n in act_.init_state())
        raise ValueError(f'policy "{act_.program.name}" has memory (state {names}), so its steps are not independent '
                         f"rows: score its episodes in order from the initial state (acting.episodes_log_prob)")

    def one(params, obs):
        return act_.distribution(params, obs, act_.init_state())[:3]

    return jax.vmap(one, in_axes=(None, 0))


def initial_states(act_: Acting, n: int) -> State:
    """The initial state of `n` environments: each leaf (n, *shape)."""
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x)), act_.init_state())


def reset_where(act_: Acting, state: State, fresh) -> State:
    """`state` with the initial state where `fresh` (a () bool inside a vmapped step)."""
    return jax.tree.map(lambda s0, s: jnp.where(fresh, s0, s), act_.init_state(), state)

"""One acting module: how every rollout and learner steps a compiled policy.

    from polc.runtime.acting import acting, act, with_min_std

    a = with_min_std(acting(policy), 0.1)
    step = act(a, params, obs, state, key)     # Step(mean, std, actions, latents, state)

Like brax's `training/acting.py`, it is the one place that turns a policy's distribution
into actions, draws and log-densities, so a change to what a step carries (a policy state,
a std floor) is made once. See `_policy` for the design, `_gaussian` for the densities.
"""

from ._gaussian import normal_entropy, normal_kl, normal_log_density, normal_sample
from ._policy import (Acting, State, Step, act, acting, batched_distribution, clip_actions, episodes_log_prob,
                      gaussian_log_prob, initial_states, log_prob, reset_where, step_key, with_min_std,
                      with_std_scale)

__all__ = ["Acting", "State", "Step", "act", "acting", "batched_distribution", "clip_actions", "episodes_log_prob",
           "gaussian_log_prob", "initial_states", "log_prob", "normal_entropy", "normal_kl", "normal_log_density",
           "normal_sample", "reset_where", "step_key", "with_min_std", "with_std_scale"]

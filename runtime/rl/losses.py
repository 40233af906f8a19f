"""The RL objective of the paper: a clipped likelihood ratio over a window of
steps, times a group-relative reward-to-go (GSPO-like).

Notation: E episodes of one update, padded to T steps; `mask[e, t]` is 1 for
a real step. An episode belongs to a GROUP: the episodes of one update that
ran on the same environment seed (same track, same start), differing only by
the policy's noise (`RLConfig.seeds_per_update` groups per update; by default
one group of all 20 episodes).

Advantage (host side, float64, once per update; `advantages`):
    G[e, t]  = r[e, t] + gamma * G[e, t+1]                 discounted reward-to-go
    A[e, t]  = (G[e, t] - mean_g,t) / (std_g,t + eps)      eps = 1e-8
where mean_g,t and std_g,t (population std) are taken over the episodes of
e's group that are still running at step index t. An episode that ended does
not enter the statistics at later indices, and a step whose group has one
running episode gets A = 0. This is GRPO's group normalisation applied to
every step index instead of to one final reward: each step is judged against
what the other episodes of its group earned from the same point in time on.

Ratio (`window_objective`): per step, rho[e, t] = logp_new - logp_old of the
SAMPLED action (the Gaussian draw before it was clipped to the action's range;
see `polc.runtime.rl.collect`). Each episode's steps are cut into consecutive
windows of W steps, aligned at step 0 (t in [kW, (k+1)W)); for window w with
n_w real steps:
    s_w   = exp( sum_t mask * rho / n_w )      the geometric mean of the step ratios
    Abar_w = sum_t mask * A / n_w              the window's mean advantage
    J      = sum_w n_w * min(s_w * Abar_w, clip(s_w, 1 - c, 1 + c) * Abar_w) / sum_w n_w
and the loss is -J. Why this is "a clipped likelihood ratio over a window of
steps": GSPO clips ONE length-normalised ratio per sequence, exp(mean log
ratio over its tokens), rather than one per token; here the "sequence" is a
window of W control steps. W = 1 is the per-step (PPO/GRPO token-level) ratio;
W >= T is GSPO's whole-episode ratio with the episode's mean advantage.
The geometric mean keeps s_w on the scale of one step's ratio whatever W is,
so one clip range serves every window length, and a window is clipped as a
whole: when the policy has moved too far on a window's actions, none of them
pushes it further. The window weight n_w makes J a mean over steps, so a
partial last window counts for its real steps only. The default W = 10
(0.2 s of Car Racing) spans a manoeuvre's worth of noisy actions while the
reward-to-go (horizon 1 / (1 - gamma) = 50 steps) still credits them jointly.

Additions beyond the paper (`RLConfig`; each can be switched off, docs/results/rl.md
measures them):
    batch normalisation   A <- (A - mean) / (std + eps) over the update's real steps
                          (`normalise_batch`), after the group normalisation;
    the std floor         the sampled policy during RL draws from
                          normal(mean, max(std, min_std) * std_scale) (`batch_logp`),
                          and the ratio is taken under that same distribution;
    approx. KL            (`approx_kl`) mean over real steps of (r - 1) - log r with
                          r = exp(logp_new - logp_old): the estimate of KL(old || new)
                          the trust region of `train` bounds.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import numpy as np

EPS = 1e-8


class Transitions(NamedTuple):
    """One update's episodes, padded to T steps (E, T leading axes)."""

    obs: dict        # name -> (E, T, *shape) float32, the policy's observations
    actions: dict    # name -> (E, T, *shape) float32, the Gaussian draws (before clipping to the range)
    logp: Any        # (E, T) float32, log-density of `actions` under the policy that acted
    advantage: Any   # (E, T) float32, group-relative reward-to-go (`advantages`)
    mask: Any        # (E, T) float32, 1 for a real step, 0 past the episode's end


class Stats(NamedTuple):
    """What one gradient step saw (scalars, means over real steps)."""

    loss: Any            # -J
    clip_fraction: Any   # share of steps whose window ratio lies outside [1 - clip, 1 + clip]
    approx_kl: Any       # mean of (ratio - 1) - log ratio per step: >= 0, about KL(old || new)
    ratio: Any           # mean window ratio s_w


# ---- advantages (NumPy, once per update) -------------------------------------------------


def reward_to_go(rewards: np.ndarray, mask: np.ndarray, gamma: float) -> np.ndarray:
    """(E, T) rewards and mask -> (E, T) float64 discounted reward-to-go, 0 past each end."""
    r = np.asarray(rewards, np.float64) * mask
    g = np.zeros_like(r)
    acc = np.zeros(r.shape[0])
    for t in range(r.shape[1] - 1, -1, -1):
        acc = (r[:, t] + gamma * acc) * mask[:, t]
        g[:, t] = acc
    return g


def group_normalise(values: np.ndarray, mask: np.ndarray, groups: np.ndarray, eps: float = EPS) -> np.ndarray:
    """(E, T) values -> (E, T) float64: each minus its group's mean at the same step
    index, over its group's std there (population), among the running episodes only."""
    values, mask = np.asarray(values, np.float64), np.asarray(mask, np.float64)
    out = np.zeros_like(values)
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        v, m = values[rows], mask[rows]
        n = np.maximum(m.sum(axis=0), 1.0)
        mean = (v * m).sum(axis=0) / n
        std = np.sqrt((np.square(v - mean) * m).sum(axis=0) / n)
        out[rows] = (v - mean) / (std + eps) * m
    return out


def normalise_batch(values: np.ndarray, mask: np.ndarray, eps: float = EPS) -> np.ndarray:
    """(E, T) -> (E, T) float64: zero mean and unit (population) std over the real steps, 0 elsewhere."""
    values, mask = np.asarray(values, np.float64), np.asarray(mask, np.float64)
    n = max(float(mask.sum()), 1.0)
    mean = float((values * mask).sum()) / n
    std = math.sqrt(float((np.square(values - mean) * mask).sum()) / n)
    return (values - mean) / (std + eps) * mask


def advantages(rewards: np.ndarray, mask: np.ndarray, groups: np.ndarray, gamma: float,
               normalise: bool = False) -> np.ndarray:
    """The group-relative reward-to-go (E, T), float32 (see the module docstring);
    `normalise`: then normalised over the whole batch (`normalise_batch`)."""
    a = group_normalise(reward_to_go(rewards, mask, gamma), mask, groups)
    return (normalise_batch(a, mask) if normalise else a).astype(np.float32)


# ---- the clipped objective (JAX) -----------------------------------------------------------


def _windows(x, window: int):
    """(E, T) -> (E, K, W), zero-padded at the end to a whole number of windows."""
    import jax.numpy as jnp

    e, t = x.shape
    k = -(-t // window)
    return jnp.pad(x, ((0, 0), (0, k * window - t))).reshape(e, k, window)


def window_objective(logp_new, logp_old, advantage, mask, clip: float, window: int) -> tuple:
    """(E, T) arrays -> (J, Stats): the clipped windowed objective J to MAXIMISE."""
    import jax.numpy as jnp

    rho = (logp_new - logp_old) * mask
    m = _windows(mask, window)
    n = jnp.sum(m, axis=2)                                   # (E, K) real steps per window
    safe = jnp.maximum(n, 1.0)
    s = jnp.exp(jnp.sum(_windows(rho, window), axis=2) / safe)
    a = jnp.sum(_windows(advantage * mask, window), axis=2) / safe
    term = jnp.minimum(s * a, jnp.clip(s, 1.0 - clip, 1.0 + clip) * a)
    total = jnp.maximum(jnp.sum(n), 1.0)
    objective = jnp.sum(n * term) / total
    outside = (jnp.abs(s - 1.0) > clip).astype(jnp.float32)
    stats = Stats(-objective, jnp.sum(n * outside) / total, approx_kl(logp_new, logp_old, mask),
                  jnp.sum(n * s) / total)
    return objective, stats


def batch_logp(policy, min_std: float = 0.0) -> Callable:
    """(params, obs (E, T, ...), actions (E, T, ...), std_scale=1) -> (E, T) log-densities of
    the draws under the distribution RL samples from: the policy's means and, for every
    action, max(std, min_std) * std_scale (`polc.runtime.acting`, as `collect` draws them)."""
    from ..acting import acting, episodes_log_prob, with_min_std, with_std_scale

    floored = with_min_std(acting(policy), min_std)
    return lambda params, obs, actions, std_scale=1.0: episodes_log_prob(with_std_scale(floored, std_scale), params,
                                                                        obs, actions)


def approx_kl(logp_new, logp_old, mask):
    """(E, T) arrays -> () mean over real steps of (r - 1) - log r, r = exp(logp_new - logp_old)."""
    import jax.numpy as jnp

    rho = (logp_new - logp_old) * mask
    return jnp.sum((jnp.exp(rho) - 1.0 - rho) * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def rl_loss(policy, clip: float, window: int, min_std: float = 0.0) -> Callable:
    """(params, Transitions, std_scale=1) -> (loss, Stats): the loss to minimise, -J."""
    logp = batch_logp(policy, min_std)

    def loss(params, batch: Transitions, std_scale=1.0):
        objective, stats = window_objective(logp(params, batch.obs, batch.actions, std_scale), batch.logp,
                                            batch.advantage, batch.mask, clip, window)
        return -objective, stats

    return loss

"""Collecting training episodes: sampled actions and their log-densities, in N
environments at once with ONE batched policy call per step.

The jitted step takes the observations of every environment packed in one
(N, O) float32 array (`TraceLayout.pack_obs`, as rollouts do) and returns one
(N, 2A + 1) array: [draws (A), executed actions (A), log-density]. A draw is
mean + std * noise with std = max(policy std, min_std) * std_scale (the floor and
the annealing scale of `RLConfig`; 0 and 1 sample the policy's own noise), the
Gaussian sample BEFORE clipping to the action's range;
the environment executes the clipped draw and the log-density is that of the
draw (the unclipped Gaussian). The step is `polc.runtime.acting`'s, as every
rollout's and learner's is. Clipping is then part of the
environment, so the score function of the draw is exact; the log-density of
the clipped action would put a density where the policy has a point mass.

Keys and seeds. The noise of step t of episode k of an update is drawn with
fold_in(fold_in(key, k), t): an episode's data depend only on its seed, the
params and the update's key, never on N or on which slot ran it.

Resets. Every training episode starts with exactly one `reset` of its slot,
and `Episodes.resets` counts them: the paper's count (episodes used for
training). A slot left without an episode near the end of an update cannot
just wait: gymnasium's vector envs step every slot and refuse to step a
finished one. It restarts its last seed and its steps are discarded, unused;
those restarts (at most n_envs - 1 per update) are counted apart, in
`Episodes.idle_resets`, and never as training episodes.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np

from ..trace.rollout import Segment, TraceLayout, verify_compatible


class RLError(Exception):
    """RL cannot proceed; the message says why and what to change."""


class Episodes(NamedTuple):
    """The episodes of one update, padded to T = the environment's max steps."""

    seeds: np.ndarray    # (E,) int64
    obs: np.ndarray      # (E, T, O) float32, packed observations (`TraceLayout.obs`)
    draws: np.ndarray    # (E, T, A) float32, the Gaussian draws, actions flattened in declaration order
    logp: np.ndarray     # (E, T) float32, log-density of the draws under the acting params
    rewards: np.ndarray  # (E, T) float64
    mask: np.ndarray     # (E, T) float32, 1 for a real step
    returns: np.ndarray  # (E,) float64, undiscounted
    lengths: np.ndarray  # (E,) int64
    resets: int          # training episodes started: one reset each
    idle_resets: int     # restarts of idle slots whose steps were discarded


def verify_stochastic(tp) -> None:
    """Raise `RLError` naming the actions without noise: RL samples every action."""
    plain = [a for a in tp.actions if a.std is None]
    if not plain:
        return
    names = ", ".join(f'"{a.name}"' for a in plain)
    example = plain[0].name
    raise RLError(
        f'policy "{tp.name}" ({tp.file}) cannot be trained by RL: action{"s" if len(plain) > 1 else ""} '
        f"{names} {'have' if len(plain) > 1 else 'has'} no noise. RL samples every action and needs its "
        f"likelihood; declare one, e.g. `action {example} : ... = ... ~ normal(std = s_{example})` with "
        f"`weight s_{example} : real in [0.01, 0.5] = 0.05`.")


def action_segments(tp) -> tuple[Segment, ...]:
    """Where each action sits in a flattened (A,) action row."""
    out, start = [], 0
    for a in tp.actions:
        seg = Segment(a.name, start, tuple(a.type.shape), "float32")
        out.append(seg)
        start += seg.size
    return tuple(out)


def make_sample_step(policy, layout: TraceLayout, min_std: float = 0.0) -> Callable:
    """Jitted (params, key, flat obs (N, O), episode (N,) int32, step (N,) int32, std_scale (), state)
    -> ((N, 2A + 1) float32, next state): `polc.runtime.acting.act` under
    `with_std_scale(with_min_std(acting(policy), min_std), std_scale)`, the policy state
    (one per environment) reset where an episode starts (its step is 0)."""
    import jax
    import jax.numpy as jnp

    from ..acting import act, acting, clip_actions, gaussian_log_prob, step_key, with_min_std, with_std_scale

    tp = policy.program
    obs_names = [o.name for o in tp.obs]
    floored = with_min_std(acting(policy), min_std)

    def one(params, key, flat, episode, step, std_scale, state):
        obs = unflatten(flat, layout.obs, obs_names)
        s = act(with_std_scale(floored, std_scale), params, obs, state, step_key(key, episode, step), fresh=step == 0)
        executed = clip_actions(tp, s.actions)
        parts = ([s.actions[a.name] for a in tp.actions] + [executed[a.name] for a in tp.actions]
                 + [gaussian_log_prob(s.mean, s.std, s.actions)])
        return jnp.concatenate([jnp.ravel(jnp.asarray(p, jnp.float32)) for p in parts]), s.state

    return jax.jit(jax.vmap(one, in_axes=(None, None, 0, 0, 0, None, 0)))


@functools.lru_cache(maxsize=8)
def _cached_step(policy, schema: Any, min_std: float) -> Callable:
    """One compiled step per (policy, environment, floor), shared by the runs of a process."""
    return make_sample_step(policy, TraceLayout(policy.program, schema), min_std)


def unflatten(flat, segments: Sequence[Segment], names: Sequence[str]) -> dict:
    """A packed row (..., D) -> dict name -> (..., *shape) for `names`; a segment's
    name is its column without the prefix ("obs.speed" -> "speed")."""
    by_name = {s.column.split(".", 1)[-1]: s for s in segments}
    lead = flat.shape[:-1]
    return {n: flat[..., by_name[n].start:by_name[n].start + by_name[n].size].reshape(lead + by_name[n].shape)
            for n in names}


class Collector:
    """A policy compiled for sampling in one environment; its vector env is kept
    across updates.

        with Collector(policy, spec, n_envs=2) as c:
            episodes = c.run(params, key, seeds, on_episode)
    """

    def __init__(self, policy, spec: Any, n_envs: int = 1, asynchronous: Optional[bool] = None,
                 min_std: float = 0.0):
        verify_stochastic(policy.program)
        verify_compatible(policy.program, spec.schema)
        self.policy, self.spec = policy, spec
        self.layout = TraceLayout(policy.program, spec.schema)
        self.actions = action_segments(policy.program)
        self.a_size = sum(s.size for s in self.actions)
        # where the executed (clipped) actions sit in the step's output row: after the draws
        self._executed = tuple((s.column, self.a_size + s.start, s.size, s.shape) for s in self.actions)
        self.step_fn = _cached_step(policy, spec.schema, float(min_std))
        self.n_envs = max(1, n_envs)
        self.asynchronous = bool(asynchronous)  # in-process by default: measured faster (`polc.runtime.trace.vector`)
        self._envs = None
        self._n = 0

    def _vector_env(self, n: int):
        from ..trace.vector import make_packed_env

        if self._envs is not None and self._n != n:
            self.close()
        if self._envs is None:
            self._envs, self._n = make_packed_env(self.spec, n, self.asynchronous, self.layout.obs_fields), n
        return self._envs

    def run(self, params, key, seeds: Sequence[int],
            on_episode: Optional[Callable[[int, int, float, int], None]] = None, std_scale: float = 1.0) -> Episodes:
        """One episode per seed, sampled with `key` (std floored at the collector's
        `min_std`, times `std_scale`); `on_episode(index, seed, return, length)` is
        called as each finishes."""
        seeds = [int(s) for s in seeds]
        n = min(self.n_envs, len(seeds))
        envs = self._vector_env(n)
        try:
            return self._run(envs, n, params, key, seeds, on_episode, np.float32(std_scale))
        except BaseException:
            with warnings.catch_warnings():  # "close while waiting for a pending step": that is the point
                warnings.simplefilter("ignore")
                self._envs.close(terminate=True)  # interrupted: do not wait for workers to finish a step
            self._envs = None
            raise

    def _run(self, envs, n: int, params, key, seeds: list[int], on_episode, std_scale) -> Episodes:
        e, t_max, a = len(seeds), int(self.spec.max_steps), self.a_size
        buf = Episodes(np.asarray(seeds, np.int64), np.zeros((e, t_max, self.layout.obs_size), np.float32),
                       np.zeros((e, t_max, a), np.float32), np.zeros((e, t_max), np.float32),
                       np.zeros((e, t_max), np.float64), np.zeros((e, t_max), np.float32),
                       np.zeros(e), np.zeros(e, np.int64), 0, 0)
        episode = np.arange(n, dtype=np.int32)   # the episode each slot runs; -1: idle
        steps = np.zeros(n, np.int32)
        nxt, resets, idle, done = n, n, 0, 0
        flat = envs.reset(seeds[:n])  # packed (n, O)
        state = self._initial_states(n)  # the policy state of each slot, reset by the step at its step 0
        while done < e:
            out, state = self.step_fn(params, key, flat, np.maximum(episode, 0), steps, std_scale, state)
            out = np.asarray(out)
            live = np.flatnonzero(episode >= 0)
            if not np.isfinite(out[live]).all():
                raise RLError(self._nonfinite(out[live]))
            k, t = episode[live], steps[live]
            if np.any(t >= t_max):
                j = int(np.argmax(t >= t_max))
                raise RLError(f"episode {k[j]} (seed {seeds[k[j]]}) ran past the environment's {t_max} steps")
            # the step's rows, recorded before the envs step (they are what the policy saw)
            buf.obs[k, t], buf.draws[k, t], buf.logp[k, t] = flat[live], out[live, :a], out[live, 2 * a]
            flat, reward, terminated, truncated = envs.step(out, self._executed)
            buf.rewards[k, t], buf.mask[k, t] = reward[live], 1.0
            steps += 1
            ended = np.flatnonzero(terminated | truncated)
            if not len(ended):
                continue
            mask, reset_seeds, started = np.zeros(n, bool), [None] * n, 0
            for i in ended:
                k = episode[i]
                mask[i], reset_seeds[i] = True, seeds[max(k, 0)]
                if k >= 0:
                    buf.lengths[k] = steps[i]
                    buf.returns[k] = float(np.sum(buf.rewards[k, :steps[i]]))
                    done += 1
                    if on_episode is not None:
                        on_episode(int(k), seeds[k], float(buf.returns[k]), int(steps[i]))
                episode[i], steps[i] = -1, 0
                if nxt < e:
                    episode[i], reset_seeds[i], nxt, started = nxt, seeds[nxt], nxt + 1, started + 1
            if done < e:  # the other ended slots are idle: they rerun a seed, unrecorded
                flat = envs.reset(reset_seeds, mask)
                resets, idle = resets + started, idle + int(mask.sum()) - started
        return buf._replace(resets=resets, idle_resets=idle)

    def _initial_states(self, n: int):
        from ..acting import acting, initial_states

        return initial_states(acting(self.policy), n)

    def _nonfinite(self, out: np.ndarray) -> str:
        bad = [s.column for s in self.actions if not np.all(np.isfinite(out[:, s.start:s.start + s.size]))]
        what = ", ".join(f'"{b}"' for b in bad) or "the log-density"
        return (f"the policy's sampled actions are not finite ({what}): its mean or noise std is NaN or "
                f"infinite on an observation it met")

    def transitions(self, episodes: Episodes, advantage: np.ndarray):
        """`Episodes` -> `losses.Transitions` (observations and draws by name)."""
        from .losses import Transitions

        tp = self.policy.program
        obs = unflatten(episodes.obs, self.layout.obs, [o.name for o in tp.obs])
        draws = unflatten(episodes.draws, self.actions, [x.name for x in tp.actions])
        return Transitions(obs, draws, episodes.logp, np.asarray(advantage, np.float32), episodes.mask)

    def close(self) -> None:
        if self._envs is not None:
            self._envs.close()
            self._envs = None

    def __enter__(self) -> "Collector":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

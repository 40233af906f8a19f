"""Rollouts: run a compiled policy in N environments at once, optionally tracing
everything it computes into a step table (see `polc.runtime.io.table`).

One step of all N environments makes ONE call of a jitted, vmapped function.
Traced or not, that call takes the observations of every environment packed in
one (N, O) float32 array and returns one packed (N, D) float32 array:

    untraced  D = the actions, flattened and concatenated
    traced    D = [obs (all the env's), latents, states, means, actions]

so a traced step moves one slightly wider array from the device instead of
dozens of small ones; the host keeps each step's rows and splits an episode's
into columns once, when it ends (`TraceLayout`). The weights, the same in every
row, are constrained once per run (not in every step, where they took a third of
the traced step's XLA compile) and become their columns then too.

Episodes and seeds. Episode k runs with environment seed `seeds[k]`; slots of
the vector env take the next episode as they finish. Sampled actions use the
key fold_in(fold_in(PRNGKey(noise_seed), seed), step), so an episode's data
depend only on its seed and the policy, not on N or on which slot ran it.
Finished episodes are handed over in episode order.

The environments run in this process (SyncVectorEnv; measured faster here,
see `polc.runtime.trace.vector`). With `asynchronous=True` they run in spawned
processes (AsyncVectorEnv; not forked, since the parent runs JAX's threads).
Spawning re-imports the main module, so such a script needs the usual
`if __name__ == "__main__":` guard (the `polc` command has it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np

from polc.check import typed as T
from polc.messages import PolError
from polc.check.typed import TypedProgram

from ..io.table import ColumnSpec, step_columns


@dataclass(frozen=True)
class RolloutConfig:
    n_envs: int = 1                    # environments stepped together (one batched policy call per step)
    sample: bool = False               # sampled actions (the policy's noise) instead of the means
    noise_seed: int = 0                # the key of the sampled actions
    trace: bool = True                 # collect the step table of every episode
    asynchronous: Optional[bool] = None  # AsyncVectorEnv (a process per env); default: in-process
    backend: str = "jax"               # "c": the policy's generated C (polc.backend.emit_c), means only


class Episode(NamedTuple):
    index: int                      # position in the seed list
    seed: int
    ret: float                      # undiscounted return
    length: int                     # steps
    columns: Optional[dict]         # traced: step-table columns, each (length, *shape); else None


class RolloutResult(NamedTuple):
    seeds: np.ndarray    # (E,) int64
    returns: np.ndarray  # (E,) float64
    lengths: np.ndarray  # (E,) int64


class Segment(NamedTuple):
    column: str            # table column, e.g. "latent.slip"
    start: int             # offset in the packed row
    shape: tuple[int, ...]
    dtype: str             # "float32" or "bool"

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def fields_of(segments: Sequence[Segment], prefix: int = 0) -> tuple[tuple[str, int, int, tuple[int, ...]], ...]:
    """`(name, start, size, shape)` of each segment (the packed layout
    `polc.runtime.trace.vector` steps environments with); `prefix` characters are cut from each column
    ("obs.speed" -> "speed" with 4). Sizes are computed once here, not per step."""
    return tuple((s.column[prefix:], int(s.start), s.size, tuple(s.shape)) for s in segments)


def verify_compatible(tp: TypedProgram, schema: Any) -> None:
    """Raise `PolError` when the program's obs/actions do not fit the environment."""
    from ..envs.schema import check_program_against

    errors = [d for d in check_program_against(tp, schema) if d.is_error]
    if errors:
        raise PolError(errors, tp.source)


def _segments(items: Sequence[tuple[str, tuple[int, ...], str]], start: int = 0) -> tuple[Segment, ...]:
    out = []
    for column, shape, dtype in items:
        seg = Segment(column, start, tuple(shape), dtype)
        out.append(seg)
        start += seg.size
    return tuple(out)


def _proved_ranges(tp: TypedProgram) -> dict[str, tuple[float, float]]:
    """Column -> the hull of the interval `polc check` proves, for latents, states and action means."""
    from polc.analysis.program import analyze_program

    intervals = analyze_program(tp).intervals
    out = {}
    for x in tp.latents:
        if x.name in intervals:
            iv = intervals[x.name]
            out["latent." + x.name] = (float(np.min(iv.lo)), float(np.max(iv.hi)))
    for st in tp.states:
        if st.name in intervals and st.type.base != T.BOOL:
            iv = intervals[st.name]
            out["state." + st.name] = (float(np.min(iv.lo)), float(np.max(iv.hi)))
    for a in tp.actions:  # the mean column is clipped to the declared range
        iv = intervals.get(a.name + ".mean")
        lo, hi = (-np.inf, np.inf) if iv is None else (float(np.min(iv.lo)), float(np.max(iv.hi)))
        out["mean." + a.name] = (max(lo, a.lo), min(hi, a.hi))
    return out


class TraceLayout:
    """Where each value sits in the packed obs input and the packed output row,
    and the table columns it becomes."""

    def __init__(self, tp: TypedProgram, schema: Any):
        self.tp = tp
        self.schema = schema
        self.obs = _segments([("obs." + f.name, f.shape, "float32") for f in schema.obs])
        self.obs_size = sum(s.size for s in self.obs)
        latents = _segments([("latent." + lat.name, lat.type.shape, "bool" if lat.type.base == T.BOOL else "float32")
                             for lat in tp.latents], self.obs_size)
        # a state's value at the start of each step (docs/language.md, "Memory"); none without memory
        states = _segments([("state." + st.name, st.type.shape, "bool" if st.type.base == T.BOOL else "float32")
                            for st in tp.states], self.obs_size + sum(s.size for s in latents))
        means = _segments([("mean." + a.name, a.type.shape, "float32") for a in tp.actions],
                          self.obs_size + sum(s.size for s in latents + states))
        self.values = latents + states + means  # after the obs in a traced row
        # not in the row: the same at every step, filled in from the run's constrained weights
        self.weights = _segments([("weight." + w.name, w.type.shape, "float32") for w in tp.weights])
        self.actions = _segments([("action." + a.name, a.type.shape, "float32") for a in tp.actions])
        self.traced_actions = _segments([(s.column, s.shape, s.dtype) for s in self.actions],
                                        self.obs_size + sum(s.size for s in self.values))
        # every column in table order: obs, latents, states, weights, means, actions
        self._table = self.obs + latents + states + self.weights + means + self.actions

        # (name, start, size, shape) of the obs and of the actions in the untraced and
        # traced rows, computed once (a Segment's size is an np.prod)
        self.obs_fields = fields_of(self.obs, len("obs."))
        self.action_fields = {False: fields_of(self.actions, len("action.")),
                              True: fields_of(self.traced_actions, len("action."))}

    def pack_obs(self, obs: dict[str, np.ndarray], n: int) -> np.ndarray:
        """The vector env's obs dict (each (n, *shape)) -> (n, O) float32."""
        return np.concatenate([np.reshape(obs[name], (n, size)) for name, _, size, _ in self.obs_fields], axis=1,
                              dtype=np.float32)

    def env_actions(self, out: np.ndarray, traced: bool) -> dict[str, np.ndarray]:
        """The packed output (n, D) -> the action dict for the vector env."""
        n = out.shape[0]
        return {name: out[:, start:start + size].reshape((n,) + shape)
                for name, start, size, shape in self.action_fields[traced]}

    def columns(self) -> tuple[ColumnSpec, ...]:
        """Every column of a trace, with the doc and range the program declares
        (the environment's for what the program leaves open or does not read),
        for latents, states and action means the range the analysis proved, and for a
        state machine's state its named modes (`polc.check.typed.state_modes`)."""
        from polc.check.typed import state_modes

        tp = self.tp
        proved = _proved_ranges(tp)
        modes = {"state." + st.name: state_modes(tp, st) for st in tp.states}
        decls = {**{"obs." + o.name: o for o in tp.obs}, **{"latent." + x.name: x for x in tp.latents},
                 **{"state." + st.name: st for st in tp.states},
                 **{"weight." + w.name: w for w in tp.weights},
                 **{"mean." + a.name: a for a in tp.actions}, **{"action." + a.name: a for a in tp.actions}}
        fields = {"obs." + f.name: f for f in self.schema.obs}
        body = []
        for s in self._table:
            d, f = decls.get(s.column), fields.get(s.column)
            doc = getattr(d, "doc", None) or getattr(f, "doc", None)
            lo, hi = getattr(d, "lo", -np.inf), getattr(d, "hi", np.inf)
            if f is not None and (d is None or (lo, hi) == (-np.inf, np.inf)):
                lo, hi = f.lo, f.hi
            body.append(ColumnSpec(s.column, s.shape, s.dtype, doc, lo, hi, proved.get(s.column),
                                   getattr(f, "units", None), modes.get(s.column) or ()))
        return step_columns(body)

    def unpack(self, rows: np.ndarray, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """(T, D) packed rows of one episode and the constrained `weights` (name -> value) ->
        columns obs.*, latent.*, state.*, weight.*, mean.*, action.* (each (T, *shape), in table order)."""
        t = rows.shape[0]
        out = {}
        in_row = {s.column: s for s in self.obs + self.values + self.traced_actions}
        for s in self._table:
            if s.column.startswith("weight."):
                w = np.asarray(weights[s.column[len("weight."):]], np.float32).reshape(s.shape)
                out[s.column] = np.ascontiguousarray(np.broadcast_to(w, (t,) + s.shape))
                continue
            s = in_row[s.column]
            v = rows[:, s.start:s.start + s.size].reshape((t,) + s.shape)
            out[s.column] = v.astype(bool) if s.dtype == "bool" else np.ascontiguousarray(v)
        return out


def make_step_fn(policy, layout: TraceLayout, config: RolloutConfig) -> Callable:
    """The jitted batched step: (params, flat_obs (N, O), state, seeds (N,), steps (N,)) ->
    (packed (N, D), next state): `polc.runtime.acting.act` in every environment, the policy
    state reset where a slot's episode starts (its step is 0)."""
    import jax
    import jax.numpy as jnp

    from ..acting import act, acting, clip_actions, step_key

    tp = policy.program
    offsets = {s.column[4:]: s for s in layout.obs}
    base = jax.random.PRNGKey(config.noise_seed)
    policy_act = acting(policy)

    def one(params, flat, state, seed, step):
        obs = {o.name: flat[offsets[o.name].start:offsets[o.name].start + offsets[o.name].size]
               .reshape(o.type.shape) for o in tp.obs}
        key = step_key(base, seed, step) if config.sample else None
        s = act(policy_act, params, obs, state, key, fresh=step == 0)
        actions = clip_actions(tp, s.actions) if config.sample else s.mean
        parts = [actions[a.name] for a in tp.actions]
        if config.trace:
            parts = ([flat] + [s.latents[x.name] for x in tp.latents] + [s.latents[st.name] for st in tp.states]
                     + [s.mean[a.name] for a in tp.actions] + parts)
        return jnp.concatenate([jnp.ravel(jnp.asarray(p, jnp.float32)) for p in parts]), s.state

    return jax.jit(jax.vmap(one, in_axes=(None, 0, 0, 0, 0)))


def make_c_step_fn(policy, layout: TraceLayout, config: RolloutConfig) -> Callable:
    """`make_step_fn`'s step computed by the policy's generated C (`polc.backend.emit_c`), built once
    with the system C compiler and called through ctypes: the same packed rows, the actions
    being the means (C has no sampling). The weights are those of `params`, constrained by
    the policy as `apply` constrains them, packed once per params object."""
    import tempfile

    from polc.backend.emit_c import weight_values
    from ..io.c_policy import build, pack_weights

    if config.sample:
        raise ValueError("the C back end computes the mean actions only: it cannot sample")
    tp = policy.program
    offsets = {s.column[4:]: s for s in layout.obs}
    take = np.concatenate([np.arange(offsets[o.name].start, offsets[o.name].start + offsets[o.name].size)
                           for o in tp.obs] or [np.zeros(0, np.int64)])
    lib = build(tp, weight_values(tp, policy.init(_key0()), "init", policy), tempfile.mkdtemp(prefix="polc_c_"))
    packed: dict = {}
    fresh = lib.initial_states(1)  # (1, words): the state an episode starts from (none without memory)

    def step(params, flat, state, seed, steps):
        if packed.get("params") is not params:
            packed.update(params=params, weights=pack_weights(tp, weight_values(tp, params, "params", policy)))
        flat = np.asarray(flat, np.float32)
        if tp.states:  # the C states, (n, words), a copy advanced in place; a slot at its step 0 starts afresh
            state = np.where(np.asarray(steps)[:, None] == 0, fresh, state).astype(np.uint32)
        actions, latents = lib.step_batch(flat[:, take], latents=config.trace, weights=packed["weights"],
                                          state=state if tp.states else None)
        if config.trace:  # C's latents row ends with the states' values at the start of the step
            return np.concatenate([flat, latents, actions, actions], 1), state
        return actions, state

    step.initial_states = lib.initial_states  # the policy state of n environments, as the C code holds it
    return step


def _key0():
    import jax

    return jax.random.PRNGKey(0)


class _Compiled(NamedTuple):
    policy: Any             # held, so its id is not reused while the entry lives
    step: Callable          # `make_step_fn`'s jitted step
    constrain: Callable     # the jitted `policy.constrain`
    states: Callable        # n -> the policy state of n environments (`acting.initial_states`)


_compiled: "OrderedDict[tuple, _Compiled]" = OrderedDict()
_compiled_lock = threading.Lock()  # rollouts run from several threads share it
_COMPILED_KEPT = 16


def compiled_for(policy, layout: TraceLayout, config: RolloutConfig) -> _Compiled:
    """The jitted step and weight constraint of `policy` for `layout` and `config`, made
    once per process and reused by every later `Rollout` of the same policy object. A
    jitted function keeps its compiles, but each `Rollout` made its own, so every
    evaluation traced and compiled its step again: `keep="best"`'s held-out check at each
    checkpoint of an RL run, each of `polc experiment`'s evaluations, each round of
    refinement. The last `_COMPILED_KEPT` (policy, layout, config) are kept."""
    import jax

    key = (id(policy), layout.obs_fields, config.sample, config.trace, config.noise_seed, config.backend)
    with _compiled_lock:
        hit = _compiled.get(key)
        if hit is not None and hit.policy is policy:
            _compiled.move_to_end(key)
            return hit
        from ..acting import acting, initial_states

        if config.backend == "c":
            step = make_c_step_fn(policy, layout, config)
        else:  # a registered policy's step loaded from disk when compiled before (io/executables.py)
            from ..io.executables import cached

            step = cached(make_step_fn(policy, layout, config), policy, "rollout.step",
                          (layout.obs, config.sample, config.trace, config.noise_seed))
        made = _Compiled(policy, step, jax.jit(policy.constrain),
                         getattr(step, "initial_states", None) or partial(initial_states, acting(policy)))
        _compiled[key] = made
        while len(_compiled) > _COMPILED_KEPT:
            _compiled.popitem(last=False)
        return made


class _Slots:
    """Per-environment bookkeeping of the running episodes. Traced, each vector step's
    packed output, rewards and ends are kept once for all slots (`history`, one append per
    step rather than three per env); a finished episode takes its slot's rows from the
    steps it ran, which are consecutive, and the steps no running episode needs are dropped."""

    def __init__(self, n: int, trace: bool):
        self.episode = np.full(n, -1, np.int64)  # -1: idle (no episode left to run)
        self.seed = np.zeros(n, np.int64)
        self.steps = np.zeros(n, np.int32)
        self.returns = np.zeros(n, np.float64)
        self.trace = trace
        self.history: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.dropped = 0                   # vector steps dropped from the front of `history`
        self.first = np.zeros(n, np.int64)  # the vector step each slot's episode started at

    def start(self, i: int, index: int, seed: int) -> None:
        self.episode[i], self.seed[i] = index, seed
        self.steps[i], self.returns[i] = 0, 0.0
        self.first[i] = self.dropped + len(self.history)

    def record(self, out: np.ndarray, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> None:
        active = self.episode >= 0
        self.returns += np.where(active, reward, 0.0)
        self.steps += 1
        if self.trace:
            self.history.append((out, reward, terminated, truncated))

    def finish(self, i: int, layout: TraceLayout, weights: Optional[dict] = None) -> Episode:
        index, seed, length = int(self.episode[i]), int(self.seed[i]), int(self.steps[i])
        columns = None
        if self.trace:
            at = int(self.first[i]) - self.dropped
            steps = self.history[at:at + length]
            columns = {"episode": np.full(length, index, np.int32), "step": np.arange(length, dtype=np.int32),
                       "seed": np.full(length, seed, np.int64),
                       **layout.unpack(np.stack([h[0][i] for h in steps]), weights),
                       "reward": np.array([h[1][i] for h in steps], np.float32),
                       "terminated": np.array([h[2][i] for h in steps], bool),
                       "truncated": np.array([h[3][i] for h in steps], bool)}
        self.episode[i] = -1
        if self.trace:  # drop the steps before every running episode's first
            running = self.first[self.episode >= 0]
            keep = int(running.min()) if len(running) else self.dropped + len(self.history)
            del self.history[:keep - self.dropped]
            self.dropped = keep
        return Episode(index, seed, float(self.returns[i]), length, columns)


class Rollout:
    """A policy compiled for one environment: run it on any params and seeds,
    reusing the compiled step and the vector env across runs (the compiled step also
    across Rollouts of the same policy object: `compiled_for`).

        with Rollout(policy, spec, RolloutConfig(n_envs=2)) as r:
            result = r.run(params, seeds, on_episode)
    """

    def __init__(self, policy, spec: Any, config: RolloutConfig = RolloutConfig()):
        verify_compatible(policy.program, spec.schema)
        self.spec, self.config = spec, config
        self.layout = TraceLayout(policy.program, spec.schema)
        compiled = compiled_for(policy, self.layout, config)
        self.step_fn = compiled.step
        self.initial_states = compiled.states
        self.n = max(1, config.n_envs)
        self._envs = None
        # traced, the weights' columns: constrained once per run
        self._constrain = compiled.constrain if config.trace else None

    def run(self, params, seeds: Sequence[int], on_episode: Optional[Callable[[Episode], None]] = None,
            on_steps: Optional[Callable[[int], None]] = None) -> RolloutResult:
        """One episode per seed; `on_episode` receives each finished `Episode` in
        seed-list order (with its step-table columns when `config.trace`); `on_steps`, if
        given, the number of recorded environment steps after each vector step."""
        from .vector import make_packed_env

        seeds = [int(s) for s in seeds]
        if not seeds:
            return RolloutResult(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
        if self._envs is None:
            asynchronous = bool(self.config.asynchronous)
            self._envs = make_packed_env(self.spec, self.n, asynchronous, self.layout.obs_fields)
        weights = None
        if self._constrain is not None:
            weights = {k: np.asarray(v, np.float32) for k, v in self._constrain(params).items()}
        try:
            return _run(self._envs, self.n, seeds, self.layout, partial(self.step_fn, params), self.config,
                        on_episode, on_steps, weights, self.initial_states(self.n))
        except BaseException:
            self._envs.close(terminate=True)  # interrupted: do not wait for worker processes to finish a step
            self._envs = None
            raise

    def close(self) -> None:
        if self._envs is not None:
            self._envs.close()
            self._envs = None

    def __enter__(self) -> "Rollout":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def rollout(policy, params, spec: Any, seeds: Sequence[int], config: RolloutConfig = RolloutConfig(),
            on_episode: Optional[Callable[[Episode], None]] = None,
            on_steps: Optional[Callable[[int], None]] = None) -> RolloutResult:
    """Run one episode per seed (see `Rollout.run`), with at most one env per seed."""
    n = max(1, min(config.n_envs, len(seeds)))
    with Rollout(policy, spec, replace(config, n_envs=n)) as r:
        return r.run(params, seeds, on_episode, on_steps)


def _run(envs, n: int, seeds: list[int], layout: TraceLayout, step_fn, config: RolloutConfig,
         on_episode: Optional[Callable[[Episode], None]],
         on_steps: Optional[Callable[[int], None]] = None, weights: Optional[dict] = None,
         state: Any = None) -> RolloutResult:
    """`step_fn(obs, state, seeds, steps) -> (out, state)`; `state`: the policy state of the
    n slots (`{}` without memory), reset by the step where a slot's episode starts."""
    state = {} if state is None else state
    slots = _Slots(n, config.trace)
    queue = iter(enumerate(seeds))
    for i in range(n):
        slots.start(i, *next(queue))
    obs = envs.reset([int(s) for s in slots.seed])  # packed (n, O)
    returns, lengths = np.zeros(len(seeds)), np.zeros(len(seeds), np.int64)
    pending: dict[int, Episode] = {}
    emitted = 0
    actions = layout.action_fields[config.trace]
    # Envs that can step a subset (`PackedEnvs`) leave a slot idle, unstepped and not reset,
    # once no episode is left for it: resets = episodes. Others rerun its last seed.
    subsets = getattr(envs, "steps_subsets", False)
    while emitted < len(seeds):
        out, state = step_fn(obs, state, slots.seed.astype(np.int32), slots.steps)
        out = np.asarray(out)
        if subsets:
            obs, reward, terminated, truncated = envs.step(out, actions, slots.episode >= 0)
        else:
            obs, reward, terminated, truncated = envs.step(out, actions)
        if on_steps is not None:
            on_steps(int(np.count_nonzero(slots.episode >= 0)))  # idle slots rerun a seed, unrecorded
        slots.record(out, reward, terminated, truncated)
        ended = np.flatnonzero(terminated | truncated)
        if not len(ended):
            continue
        reset_seeds: list = [None] * n
        for i in ended:
            if slots.episode[i] >= 0:
                ep = slots.finish(i, layout, weights)
                returns[ep.index], lengths[ep.index] = ep.ret, ep.length
                pending[ep.index] = ep
            nxt = next(queue, None)
            if nxt is not None:
                slots.start(i, *nxt)
            if nxt is not None or not subsets:
                reset_seeds[i] = int(slots.seed[i])  # an idle slot reruns its last seed, unrecorded
        while emitted in pending:
            ep = pending.pop(emitted)
            if on_episode is not None:
                on_episode(ep)
            emitted += 1
        mask = np.array([s is not None for s in reset_seeds])
        if emitted < len(seeds) and mask.any():
            obs = envs.reset(reset_seeds, mask)
    return RolloutResult(np.asarray(seeds, np.int64), returns, lengths)

"""Counterexamples to intents over values computed from states, searched along sequences of steps.

A value computed from a state depends on the observations of earlier steps, so a witness that it
breaks an intent is a sequence of observations from the initial state (every state at its declared
initial value, as at every episode's start), run with the reference interpreter. `search` is the
entry for every intent: a target that reads no state goes to `counterexample.search` (one step),
unchanged.

Deterministic: the random generator is seeded from the intent's text.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple, Optional

import numpy as np

from . import reference
from ..check import typed as T
from ..errors import fmt_num
from . import counterexample
from .counterexample import (N_SAMPLES, _canonical_obs, _round2, _show, _var_pair, ancestors, obs_bounds, sample_obs,
                             sample_weight, sub_program, wrong_way)
from .intervals import Interval


def reads_state(tp: T.TypedProgram, target: str) -> bool:
    """Whether `target` is computed from a state (its value then depends on earlier steps)."""
    states = {st.name for st in tp.states}
    return target in states or bool(states & ancestors(tp, target))


def search(tp: T.TypedProgram, intent: T.Intent, var_iv: Optional[Interval] = None,
           samples: int = N_SAMPLES) -> Optional[str]:
    """A sentence describing a counterexample to `intent`, or None if none was found.

    var_iv: for a monotonicity intent, the (elementwise) interval the variable ranges over; its two
    values are kept inside it. A target that reads no state: `counterexample.search`, one step. A
    target computed from a state: a range intent is searched along random sequences of observations
    from the initial state (`search_sequence`); a monotonicity intent first at the first step of an
    episode, where every state holds its initial value (unless the variable is a state: it has only
    that one value there), then along sequences (`direction_witness`). Every state a witness uses is
    one its observations reach, never a value of the proved range no sequence reaches."""
    if not reads_state(tp, intent.target):
        return counterexample.search(tp, intent, var_iv, samples)
    if isinstance(intent, T.RangeIntent):
        return search_sequence(tp, intent, samples)
    if intent.var not in {st.name for st in tp.states}:
        found = counterexample.search(tp, intent, var_iv, samples)
        if found is not None:
            return found + " at the first step of an episode (every state at its initial value)"
    witness = direction_witness(tp, intent, var_iv, samples)
    return None if witness is None else witness.text


def budget(tp: T.TypedProgram, intent: T.Intent) -> str:
    """What `search` tried, for the sentence of an intent it neither proved nor refuted (W0407)."""
    if reads_state(tp, intent.target):
        return f"{N_SAMPLES} random sequences of {SEQUENCE_STEPS} steps from the initial state"
    return f"{N_SAMPLES} random samples"


SEQUENCE_STEPS = 24  # steps of each random sequence an intent over a stateful value is searched along


def _simulate(tp: T.TypedProgram, intent: T.RangeIntent, weights: dict, seq: list[dict], n: int, mlp: dict
              ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Run `n` sequences from the initial state: the violation mask of every step, (steps, n), and the
    target's values."""
    state = None
    masks, values = [], []
    for obs in seq:
        out = reference.run(tp, weights, obs, mlp, batch=n, state=state, step=True)
        t = np.asarray(out.values[intent.target], dtype=float).reshape(n, -1)
        with np.errstate(invalid="ignore"):
            below = (t <= intent.lo) if intent.lo_strict else (t < intent.lo)
            above = (t >= intent.hi) if intent.hi_strict else (t > intent.hi)
        masks.append((below | above).any(axis=1))
        values.append(t)
        state = out.next_state
    return np.stack(masks), values


def search_sequence(tp: T.TypedProgram, intent: T.RangeIntent, samples: int = N_SAMPLES,
                    steps: int = SEQUENCE_STEPS) -> Optional[str]:
    """A range intent over a value computed from states: `samples` random sequences of `steps`
    observations (weights drawn once per sequence) from the initial state; the first violation,
    shortened to its step and simplified (weights back to their initial values, observations
    rounded to two digits, where the violation survives), told as a sentence."""
    rng = np.random.default_rng(zlib.crc32(intent.text.encode()))
    mlp = reference.zero_mlp_params(tp)
    weights = {w.name: sample_weight(w, rng, samples) for w in tp.weights}
    seq = [{o.name: sample_obs(o, rng, samples) for o in tp.obs} for _ in range(steps)]
    masks, _ = _simulate(tp, intent, weights, seq, samples, mlp)
    hit = np.argwhere(masks)
    if hit.size == 0:
        return None
    k = int(hit[:, 0].min())
    i = int(hit[hit[:, 0] == k][0, 1])
    w1 = {name: v[i:i + 1] for name, v in weights.items()}
    s1 = [{name: v[i:i + 1] for name, v in obs.items()} for obs in seq[:k + 1]]

    def violates(w, s) -> bool:
        return bool(_simulate(tp, intent, w, s, 1, mlp)[0][-1, 0])

    at_init = {w.name: np.broadcast_to(np.asarray(w.init, float), (1,) + w.type.shape) for w in tp.weights}
    if violates(at_init, s1):
        w1 = at_init
    else:  # one weight at a time back to its initial value, where the violation survives
        for w in tp.weights:
            tried = {**w1, w.name: at_init[w.name]}
            if violates(tried, s1):
                w1 = tried
    rounded = [{name: _round2(v) for name, v in obs.items()} for obs in s1]
    if violates(w1, rounded):
        s1 = rounded
    value = _simulate(tp, intent, w1, s1, 1, mlp)[1][-1][0]
    bad = [j for j, x in enumerate(value)
           if (x <= intent.lo if intent.lo_strict else x < intent.lo) or (x >= intent.hi if intent.hi_strict
                                                                         else x > intent.hi)]
    j = bad[0] if bad else 0
    x = float(value[j])
    target = intent.target + (f"[{j}]" if value.size > 1 else "")
    moved = [w for w in tp.weights if not np.array_equal(w1[w.name], at_init[w.name])]
    head = ("with " + ", ".join(f"{w.name} = {_show(w1[w.name][0])}" for w in moved[:6]) + ", ") if moved else ""
    used = _closure(tp, intent.target)
    moved = [w for w in moved if w.name in used]
    head = ("with " + ", ".join(f"{w.name} = {_show(w1[w.name][0])}" for w in moved[:6]) + ", ") if moved else ""
    shown = [o for o in tp.obs if o.name in used][:4] or list(tp.obs[:4])
    obs_text = "; ".join(f"{o.name} = " + ", ".join(_show(step[o.name][0]) for step in s1) for o in shown)
    low_side = x < intent.lo or (intent.lo_strict and x <= intent.lo)
    bound = (f"{'<=' if intent.lo_strict else '<'} {fmt_num(intent.lo)}" if low_side
             else f"{'>=' if intent.hi_strict else '>'} {fmt_num(intent.hi)}")
    return (f"{head}from the initial state, the observations {obs_text} (steps 1 to {k + 1}) give "
            f"{target} = {fmt_num(x)} {bound} at step {k + 1}")


def _closure(tp: T.TypedProgram, *targets: str) -> set[str]:
    """Every name the targets depend on over the steps: their ancestors within a step and, through every
    state among them, what that state's `next` expression is computed from, transitively."""
    nodes = {n.name: n for n in tp.nodes}
    states = {st.name: st for st in tp.states}
    seen: set[str] = set()
    todo = list(targets)
    while todo:  # each name's direct reads once: linear in the program (its ancestors each time was quadratic)
        name = todo.pop()
        node = nodes.get(name)
        reads = T.refs(node.expr) if node is not None else set()
        if isinstance(node, T.Action) and node.std is not None:
            reads |= T.refs(node.std)
        if name in states:
            reads |= T.refs(states[name].update)
        for r in reads - seen:
            seen.add(r)
            todo.append(r)
    return seen


# ---- directions along sequences ----------------------------------------------------------------


class StepWitness(NamedTuple):
    """A direction intent broken at a state a sequence of observations reaches from the initial state.

    The observations of steps 1 to k (every state at its initial value at step 1) reach a state; at
    step k + 1, with that state, the observations of that step and the weights, the target moves
    against the claimed direction as the variable goes from `low` to `high` (the graph cut at the
    variable, as for every direction intent). When the variable is itself a state, both of its values
    are ones the sequence gives it: its value at the start of step `partner + 1` and at step k + 1."""

    weights: dict[str, np.ndarray]  # every weight the target depends on over the steps, each of its shape
    observations: tuple[dict[str, np.ndarray], ...]  # steps 1 to k + 1, each obs of its shape; the last is compared at
    low: np.ndarray  # the variable's two values at step k + 1, low <= high elementwise
    high: np.ndarray
    partner: Optional[int]  # a state variable: the step (from 0) where it held the value step k + 1's is compared with
    index: tuple[int, ...]  # the element of the target that moves the wrong way
    before: float  # the target's element with the variable at `low`
    after: float  # and at `high`
    text: str  # the witness as a sentence (no final period)


def direction_witness(tp: T.TypedProgram, intent: T.MonoIntent, var_iv: Optional[Interval] = None,
                      samples: int = N_SAMPLES, steps: int = SEQUENCE_STEPS) -> Optional[StepWitness]:
    """A direction intent over a value computed from states, searched along `samples` random sequences
    of `steps` observations from the initial state (weights drawn once per sequence). At every step
    of every sequence the variable takes two values: a state variable the value it had at an earlier
    step of the same sequence and its value now (each reached, so the pair is one the policy meets);
    any other variable two values inside `var_iv` around its value there, as at one step
    (`counterexample.search`). The first violation (earliest step), simplified (`_simplify`), replayed
    and told, or None."""
    progs = _programs(tp, intent.target)
    prog = progs.whole
    is_state = intent.var in {st.name for st in prog.states}
    rng = np.random.default_rng(zlib.crc32(intent.text.encode()))
    mlp = reference.zero_mlp_params(prog)
    # Drawn for every weight and observation in order: the stream (and the witness) is the whole program's.
    weights = {w.name: sample_weight(w, rng, samples) for w in tp.weights}
    seq = [{o.name: sample_obs(o, rng, samples) for o in tp.obs} for _ in range(steps)]
    weights = {w.name: weights[w.name] for w in prog.weights}
    seq = [{o.name: obs[o.name] for o in prog.obs} for obs in seq]
    starts = _starts(progs, weights, seq, samples, mlp)  # steps x {name: (samples,) + shape}
    n = steps * samples  # one row per (step, sequence), step major
    step_of, row_of = np.repeat(np.arange(steps), samples), np.tile(np.arange(samples), steps)
    rows_w = {k: np.concatenate([v] * steps) for k, v in weights.items()}
    rows_o = {k: np.concatenate([obs[k] for obs in seq]) for k in seq[0]} if seq else {}
    rows_s = {st.name: np.concatenate([s[st.name] for s in starts]) for st in progs.steps.states}
    if is_state:
        partner = np.floor(rng.random(n) * step_of).astype(int)  # an earlier step of the same sequence
        history = np.stack([s[intent.var] for s in starts])
        low, high, ok = _ordered(history[partner, row_of], history[step_of, row_of])
        ok &= step_of > 0
    else:
        partner = None
        natural = (rows_w | rows_o)[intent.var] if intent.var in rows_w or intent.var in rows_o else \
            reference.run(progs.cone, rows_w, rows_o, mlp, batch=n, state=rows_s).values[intent.var]
        low, high = _var_pair(prog, intent.var, natural, var_iv, rng, n)
        ok = np.ones(n, bool)
    mask, _, _ = _compare(progs, intent, rows_w, rows_o, rows_s, low, high, n, mlp)
    hits = np.flatnonzero(mask.reshape(n, -1).any(axis=1) & ok)
    if hits.size == 0:
        return None
    r = int(hits[0])
    k, i = int(step_of[r]), int(row_of[r])
    found = _Found({name: v[i] for name, v in weights.items()}, tuple({name: v[i] for name, v in obs.items()}
                                                                     for obs in seq[:k + 1]),
                   low[r], high[r], None if partner is None else int(partner[r]))
    if _replay(progs, intent, found, mlp)[0] is None:  # a row replays as it ran in the batch; never a false witness
        return None
    return _tell(progs, intent, _simplify(progs, intent, found, var_iv, mlp), mlp)


class _Programs(NamedTuple):
    """The parts of a program a direction search runs: what the target depends on over the steps
    (`whole`), what the states it reads depend on over the steps (`steps`, run from the initial state
    along a sequence) and the target's cone within one step (`cone`, run at the compared step)."""

    whole: T.TypedProgram
    steps: T.TypedProgram
    cone: T.TypedProgram


def _programs(tp: T.TypedProgram, target: str) -> _Programs:
    whole = _closure(tp, target)
    states = {st.name for st in tp.states if st.name in whole}
    return _Programs(sub_program(tp, whole | {target}), sub_program(tp, _closure(tp, *states) | states),
                     counterexample.cone_program(tp, target))


class _Found(NamedTuple):
    """A candidate witness, one sequence: what `StepWitness` holds before it is replayed and told."""

    weights: dict[str, np.ndarray]
    observations: tuple[dict[str, np.ndarray], ...]
    low: np.ndarray  # a state variable: ignored, its values are replayed from the sequence
    high: np.ndarray
    partner: Optional[int]


def _starts(progs: _Programs, weights: dict, seq: list[dict], n: int, mlp: dict) -> list[dict[str, np.ndarray]]:
    """Every state (and value its updates read) at every step of `n` sequences from the initial state
    (the states at the step's start)."""
    state, out = None, []
    for obs in seq:
        step = reference.run(progs.steps, weights, obs, mlp, batch=n, state=state, step=True)
        out.append(step.values)
        state = step.next_state
    return out


def _ordered(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's two values as (low, high), elementwise low <= high, and which rows are ordered so."""
    axes = tuple(range(1, a.ndim))
    le = np.all(a <= b, axis=axes) if axes else a <= b
    ge = np.all(b <= a, axis=axes) if axes else b <= a
    pick = le.reshape(le.shape + (1,) * (a.ndim - 1))
    return np.where(pick, a, b), np.where(pick, b, a), le | ge


def _compare(progs: _Programs, intent: T.MonoIntent, weights: dict, obs: dict, state: dict,
             low: np.ndarray, high: np.ndarray, n: int, mlp: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The target with the variable at `low` and at `high` (n rows, each with its own state), and
    where it moves the wrong way."""
    def at(v: np.ndarray) -> np.ndarray:
        out = reference.run(progs.cone, weights, obs, mlp, {intent.var: v}, batch=n, state=state)
        return np.asarray(out.values[intent.target], dtype=float)

    t_low, t_high = at(low), at(high)
    return wrong_way(intent, t_low, t_high), t_low, t_high


def _replay(progs: _Programs, intent: T.MonoIntent, f: _Found, mlp: dict):
    """Run one candidate from the initial state: (violation or None, low, high, the states at its last
    step). A violation is (element index, the target at low, at high)."""
    one = {k: v[None] for k, v in f.weights.items()}
    starts = _starts(progs, one, [{k: v[None] for k, v in obs.items()} for obs in f.observations], 1, mlp)
    last = {st.name: starts[-1][st.name] for st in progs.steps.states}
    low, high = f.low[None], f.high[None]
    if f.partner is not None:
        low, high, ok = _ordered(starts[f.partner][intent.var], starts[-1][intent.var])
        if not ok[0]:
            return None, low[0], high[0], last
    mask, t_low, t_high = _compare(progs, intent, one, {k: v[None] for k, v in f.observations[-1].items()}, last,
                                   low, high, 1, mlp)
    if not mask.any():
        return None, low[0], high[0], last
    idx = tuple(int(j) for j in np.argwhere(mask[0])[0]) if mask[0].ndim else ()
    return (idx, float(t_low[0][idx]), float(t_high[0][idx])), low[0], high[0], last


def _simplify(progs: _Programs, intent: T.MonoIntent, f: _Found, var_iv: Optional[Interval], mlp: dict) -> _Found:
    """Weights back to their initial values (all at once, else one by one), the observations before
    the compared step all as near 0 as their ranges allow, then each of the compared step's, then every
    observation rounded to two digits, then the variable's two values: each change kept if the
    violation survives."""
    def bad(g: _Found) -> bool:
        return _replay(progs, intent, g, mlp)[0] is not None

    prog = progs.whole
    init = {w.name: np.broadcast_to(np.asarray(w.init, float), w.type.shape) for w in prog.weights}
    tried = f._replace(weights=dict(init))
    if bad(tried):
        f = tried
    else:
        for w in prog.weights:
            tried = f._replace(weights={**f.weights, w.name: init[w.name]})
            if bad(tried):
                f = tried
    simplest = {o.name: _canonical_obs(o) for o in prog.obs}
    tried = f._replace(observations=tuple(dict(simplest) for _ in f.observations[:-1]) + f.observations[-1:])
    if len(f.observations) > 1 and bad(tried):  # the steps before only count the time (a timer)
        f = tried
    for o in prog.obs:  # the compared step's observations, each as near 0 as its range allows
        if o.name != intent.var:
            tried = f._replace(observations=f.observations[:-1] + ({**f.observations[-1], o.name: simplest[o.name]},))
            if bad(tried):
                f = tried
    bounds = {o.name: obs_bounds(o) for o in prog.obs}
    rounded = tuple({k: np.clip(_round2(v), *bounds[k]) for k, v in obs.items()} for obs in f.observations)
    if bad(f._replace(observations=rounded)):
        f = f._replace(observations=rounded)
    if f.partner is None and f.low.dtype != bool:
        for digits in (2, 3):  # two digits may make the two values one
            lo, hi = _round(f.low, digits), _round(f.high, digits)
            inside = var_iv is None or (var_iv.contains(lo) and var_iv.contains(hi))
            if inside and np.all(lo <= hi) and bad(f._replace(low=lo, high=hi)):
                return f._replace(low=lo, high=hi)
    return f


def _round(x: np.ndarray, digits: int) -> np.ndarray:
    """`digits` significant digits."""
    return np.vectorize(lambda v: float(f"{v:.{digits}g}") if np.isfinite(v) else v, otypes=[float])(x)


def _tell(progs: _Programs, intent: T.MonoIntent, f: _Found, mlp: dict) -> StepWitness:
    """The witness, replayed, as a sentence."""
    prog = progs.whole
    hit, low, high, last = _replay(progs, intent, f, mlp)
    if hit is None:  # _simplify keeps only violating candidates
        raise ValueError("a direction witness must break the intent")
    idx, a, b = hit
    k = len(f.observations) - 1
    read = ancestors(prog, intent.target)
    init = {w.name: np.broadcast_to(np.asarray(w.init, float), w.type.shape) for w in prog.weights}
    moved = [w for w in prog.weights if w.name != intent.var and not np.array_equal(f.weights[w.name], init[w.name])]
    head = ("with " + ", ".join(f"{w.name} = {_show(f.weights[w.name])}" for w in moved[:6]) + ", ") if moved else ""
    shown = progs.steps.obs[:4]  # those the states are computed from
    if shown:
        listed = "; ".join(f"{o.name} = " + ", ".join(_show(obs[o.name]) for obs in f.observations[:k]) for o in shown)
        before = f"the observations {listed} ({_steps(k)})"
    else:
        before = f"{k} step{'s' if k > 1 else ''} (whatever the observations)"
    now = [o for o in prog.obs if o.name in read and o.name != intent.var]
    at_now = "".join(f"{o.name} = {_show(f.observations[k][o.name])}, " for o in now[:4])
    at_now = ("at " + at_now) if now else ""
    with_now = "with" + at_now[2:] if now else ""
    target = intent.target + ("[" + ", ".join(map(str, idx)) + "]" if idx else "")
    change = (f"{target} {'rises' if b > a else 'falls'} from {fmt_num(a)} to {fmt_num(b)} when {intent.var} goes "
              f"from {_show(low)} to {_show(high)}")
    if f.partner is not None:
        then = _show(_replay_values(progs, f, mlp)[f.partner][intent.var][0])
        others = [st for st in prog.states if st.name in read and st.name != intent.var]
        text = (f"{head}from the initial state, {before} give {intent.var} = {then} "
                f"at step {f.partner + 1} and {intent.var} = {_show(last[intent.var][0])} at step {k + 1}; at step "
                f"{k + 1}, {with_now}{change}"
                + (f" (the other states as they are at step {k + 1}: "
                   + ", ".join(f"{st.name} = {_show(last[st.name][0])}" for st in others[:4]) + ")" if others else ""))
    elif k == 0:
        text = f"{head}at the first step of an episode (every state at its initial value), {at_now}{change}"
    else:
        states = [st for st in prog.states if st.name in read][:4] or list(prog.states[:4])
        reached = ", ".join(f"{st.name} = {_show(last[st.name][0])}" for st in states)
        text = (f"{head}from the initial state, {before} give {reached} at step "
                f"{k + 1}, where {at_now}{change}")
    return StepWitness(dict(f.weights), f.observations, np.asarray(low), np.asarray(high), f.partner, idx, a, b, text)


def _steps(k: int) -> str:
    return "step 1" if k == 1 else f"steps 1 to {k}"


def _replay_values(progs: _Programs, f: _Found, mlp: dict) -> list[dict[str, np.ndarray]]:
    one = {k: v[None] for k, v in f.weights.items()}
    return _starts(progs, one, [{k: v[None] for k, v in obs.items()} for obs in f.observations], 1, mlp)


__all__ = ["search", "search_sequence", "direction_witness", "StepWitness", "budget", "reads_state", "SEQUENCE_STEPS"]

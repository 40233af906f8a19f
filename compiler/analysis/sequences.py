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
from typing import Optional

import numpy as np

from . import reference
from ..check import typed as T
from ..errors import fmt_num
from .counterexample import N_SAMPLES, _round2, _search_step, _show, ancestors, sample_obs, sample_weight
from .intervals import Interval


def reads_state(tp: T.TypedProgram, target: str) -> bool:
    """Whether `target` is computed from a state (its value then depends on earlier steps)."""
    states = {st.name for st in tp.states}
    return target in states or bool(states & ancestors(tp, target))


def search(tp: T.TypedProgram, intent: T.Intent, var_iv: Optional[Interval] = None,
           samples: int = N_SAMPLES) -> Optional[str]:
    """A sentence describing a counterexample to `intent`, or None if none was found.

    var_iv: for a monotonicity intent, the (elementwise) interval the variable
    ranges over; its two values are kept inside it. A target computed from a state: a range
    intent is searched along random sequences of observations from the initial state
    (`search_sequence`); a monotonicity intent at the first step of an episode, where every
    state holds its initial value (a reachable state, so a violation there is a true one)."""
    stateful = reads_state(tp, intent.target)
    if stateful and isinstance(intent, T.RangeIntent):
        return search_sequence(tp, intent, samples)
    found = _search_step(tp, intent, var_iv, samples)
    if found is not None and stateful:
        if isinstance(intent, T.MonoIntent) and intent.var in {st.name for st in tp.states}:
            return found + (f" (within one step, {intent.var} ranging over its proved range, the other states at "
                            "their initial values)")
        return found + " at the first step of an episode (every state at its initial value)"
    return found


SEQUENCE_STEPS = 24  # steps of each random sequence a stateful range intent is searched along


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


def _closure(tp: T.TypedProgram, target: str) -> set[str]:
    """Every name `target` depends on over the steps: its ancestors within a step and, through every
    state among them, what that state's `next` expression is computed from, transitively."""
    states = {st.name: st for st in tp.states}
    seen: set[str] = set()
    todo = [target]
    while todo:
        name = todo.pop()
        reads = ancestors(tp, name) | (T.refs(states[name].update) if name in states else set())
        for r in reads - seen:
            seen.add(r)
            todo.append(r)
    return seen


__all__ = ["search", "search_sequence", "reads_state", "SEQUENCE_STEPS"]

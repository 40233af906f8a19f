"""Proved ranges of a program's states: abstract iteration to a fixpoint, with widening and narrowing.

    ranges, unbounded = state_ranges(tp)   # {state: Interval}, the real states with an infinite end

A state `s` starts at its initial value and then takes `F(s, obs)`, its `next` expression clipped
to its declared range. A range R is sound for every step of every episode when it holds the
initial value and the image of R (over every observation and weight in its range) lies in R: an
inductive invariant. Abstract interpreters of synchronous programs (Astrée on SCADE code) find one
by Kleene iteration on intervals:

1. start at the initial values and join the image of the current ranges (`abstract.run_pass` with
   the states as inputs, then each `next` expression; all states move together);
2. after `WIDEN_AFTER` rounds, widen: an end that still moves jumps to the next threshold, the
   declared bound first, then the rungs of `THRESHOLDS` (1, 2, 5, 10, ...), then infinity (so a leaky
   integrator `0.9 * x + u` settles at 10, where plain widening would give up at infinity);
   the ladder is finite, so this terminates;
3. then narrowing: `R := R meet (init join F(R))` a few times, which stays sound and takes back
   what widening overshot.

Bool states are intervals inside [0, 1] and settle at once. A real state that keeps an infinite
end after narrowing (and has no declared bound there) can grow without bound: W0411.
"""

from __future__ import annotations

import math
from ..check import typed as T
from ..util import floats as F
from . import intervals as I
from .abstract import run_pass
from .intervals import Interval

WIDEN_AFTER = 3  # plain joins first: most states (a latch, a clipped integrator) settle by then
NARROW_STEPS = 8
MAX_ROUNDS = 60  # a safety net: the threshold ladder makes every end settle well before
THRESHOLDS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1e3, 1e4, 1e6, 1e9, 1e15)  # the 1-2-5 series, then sparser


def initial(st: T.State) -> Interval:
    """The initial value of a state as a point interval (bools as 0 and 1) of its shape."""
    def conv(v):
        return tuple(conv(x) for x in v) if isinstance(v, tuple) else float(v)

    return Interval.point(conv(st.init)).broadcast_to(st.type.shape)


def image(tp: T.TypedProgram, ranges: dict[str, Interval]) -> dict[str, Interval]:
    """Each state's value at the next step when the states lie in `ranges` (one abstract pass)."""
    p = run_pass(tp, restrict=ranges)
    out = {}
    for st in tp.states:
        iv = p.expr(st.update, p.env).iv.broadcast_to(st.type.shape)
        if st.type.base == T.REAL:
            iv = I.clip(iv, Interval.point(st.lo), Interval.point(st.hi))
        out[st.name] = iv
    return out


def _up(x: float, bound: float) -> float:
    """The next rung of the ladder at or above `x`, capped at the declared bound."""
    if x >= bound:
        return bound
    for t in (-t for t in reversed(THRESHOLDS)):
        if x <= t:
            return min(t, bound)
    if x <= 0:
        return min(0.0, bound)
    for t in THRESHOLDS:
        if x <= t:
            return min(t, bound)
    return bound


def widen(old: Interval, new: Interval, st: T.State) -> Interval:
    """`new` (which holds `old`) with every end that moved pushed up the threshold ladder."""
    (ol, oh), (nl, nh) = old.flat_ends(), new.flat_ends()
    lo = [o if n >= o else -_up(-n, -st.lo) for o, n in zip(ol, nl)]
    hi = [o if n <= o else _up(n, st.hi) for o, n in zip(oh, nh)]
    return _make(lo, hi, st.type.shape)


def _make(lo, hi, shape) -> Interval:
    if not shape:
        return Interval(float(lo[0]), float(hi[0]))
    return Interval(F.Floats(tuple(lo), shape), F.Floats(tuple(hi), shape))


def state_ranges(tp: T.TypedProgram) -> tuple[dict[str, Interval], list[T.State]]:
    """The proved range of every state (an inductive invariant: it holds at every step of every
    episode), and the real states it leaves unbounded without a declared bound."""
    if not tp.states:
        return {}, []
    init = {st.name: initial(st) for st in tp.states}
    ranges = dict(init)
    settled = False
    for round_ in range(MAX_ROUNDS):
        img = image(tp, ranges)
        new = {}
        for st in tp.states:
            joined = I.join(ranges[st.name], img[st.name])
            new[st.name] = widen(ranges[st.name], joined, st) if round_ >= WIDEN_AFTER else joined
        if all(new[n] == ranges[n] for n in ranges):
            settled = True
            break
        ranges = new
    if not settled:  # never reached on the ladder; the declared ranges are always an invariant
        ranges = {st.name: (Interval.boolean(st.type.shape) if st.type.base == T.BOOL
                            else Interval(st.lo, st.hi).broadcast_to(st.type.shape)) for st in tp.states}
    for _ in range(NARROW_STEPS):
        img = image(tp, ranges)
        narrowed = {n: I.meet(ranges[n], I.join(init[n], img[n])) for n in ranges}
        if all(narrowed[n] == ranges[n] for n in ranges):
            break
        ranges = narrowed
    unbounded = [st for st in tp.states if st.type.base == T.REAL and _infinite(ranges[st.name])]
    return ranges, unbounded


def _infinite(iv: Interval) -> bool:
    lo, hi = iv.flat_ends()
    return any(math.isinf(x) for x in (*lo, *hi))


def holds(tp: T.TypedProgram, ranges: dict[str, Interval]) -> bool:
    """Whether `ranges` is an inductive invariant (for tests): the initial values and the image inside."""
    img = image(tp, ranges)
    return all(ranges[st.name].contains(_mid(initial(st))) and _inside(img[st.name], ranges[st.name])
               for st in tp.states)


def _mid(iv: Interval):
    return iv.lo


def _inside(a: Interval, b: Interval) -> bool:
    (al, ah), (bl, bh) = a.flat_ends(), b.flat_ends()
    return all(x >= y for x, y in zip(al, bl)) and all(x <= y for x, y in zip(ah, bh))


__all__ = ["state_ranges", "image", "initial", "holds", "THRESHOLDS"]

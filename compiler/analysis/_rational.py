"""Directions through rational forms: `(a + m*B) / (c + k*B)` in the variable.

The quotient rule of `abstract.py` orients `l / r` from each side's direction
and the other's sign, which fails when both move: `p / (1 + s * p)` (the paper's
round-3 slip compression) rises with `p` and so does its divisor. Such a
quotient is a Moebius map of the one moving quantity `B` it shares,

    f(B) = (a + m B) / (c + k B),     df/dB = (m c - a k) / (c + k B)^2,

with `a, m, c, k` constant in the variable (they range over intervals, but for
any one value of the other inputs they are fixed numbers). Where the divisor
keeps one sign over everything it can be (its interval excludes zero), every
reachable `B` lies on one side of the pole, so `f` is monotone in `B` with the
sign of `m c - a k`; that sign, bounded by interval arithmetic, orients `f` by
`B`'s own direction. The same moving expression is recognised in both places by
its structure (spans ignored): the typed tree is pure, so equal trees are equal
values.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from . import intervals as I
from ..check import typed as T
from ._directions import CONST, UNKNOWN, Abs, flip
from .intervals import Interval

Evaluate = Callable[[T.TExpr], Abs]
_ONE = Interval.point(1.0)
_ZERO = Interval.point(0.0)


def key(e: object) -> object:
    """A hashable structure of a typed expression, its spans left out."""
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        return (type(e).__name__,) + tuple(key(getattr(e, f.name)) for f in dataclasses.fields(e) if f.name != "span")
    if isinstance(e, tuple):
        return tuple(key(x) for x in e)
    return e


def _terms(e: T.TExpr, sign: float = 1.0) -> list[tuple[float, T.TExpr]]:
    """`e` as a signed sum of terms: `a - (b + c)` is [(+1, a), (-1, b), (-1, c)]."""
    if isinstance(e, T.Binary) and e.op in ("add", "sub"):
        return _terms(e.l, sign) + _terms(e.r, sign if e.op == "add" else -sign)
    if isinstance(e, T.Unary) and e.op == "neg":
        return _terms(e.x, -sign)
    return [(sign, e)]


def _multiple(e: T.TExpr, evaluate: Evaluate) -> Optional[tuple[Interval, T.TExpr]]:
    """(coefficient, base) with `e = coefficient * base`, the coefficient constant in the
    variable: `k * B`, `B * k`, `B / k`, `-B`; None when a factor that moves cannot be split off."""
    coef = _ONE
    while True:
        if isinstance(e, T.Unary) and e.op == "neg":
            coef, e = I.neg(coef), e.x
        elif isinstance(e, T.Binary) and e.op == "mul" and evaluate(e.l).dir == CONST:
            coef, e = I.mul(coef, evaluate(e.l).iv), e.r
        elif isinstance(e, T.Binary) and e.op == "mul" and evaluate(e.r).dir == CONST:
            coef, e = I.mul(coef, evaluate(e.r).iv), e.l
        elif isinstance(e, T.Binary) and e.op == "div" and evaluate(e.r).dir == CONST:
            inv, maybe_zero = I.div(_ONE, evaluate(e.r).iv)
            if maybe_zero:
                return None
            coef, e = I.mul(coef, inv), e.l
        else:
            return coef, e


def _affine(e: T.TExpr, evaluate: Evaluate, base: Optional[object]) -> Optional[tuple[Interval, Interval, T.TExpr]]:
    """(constant part, coefficient, B) with `e = constant + coefficient * B`, every moving term
    a multiple of one expression B (of structure `base` when given); None otherwise."""
    const, coef, found = _ZERO, _ZERO, None
    for sign, term in _terms(e):
        a = evaluate(term)
        if a.dir == CONST:
            const = I.add(const, a.iv) if sign > 0 else I.sub(const, a.iv)
            continue
        split = _multiple(term, evaluate)
        if split is None:
            return None
        m, b = split
        k = key(b)
        if base is None:
            base = k
        if k != base:
            return None
        found = b
        coef = I.add(coef, m) if sign > 0 else I.sub(coef, m)
    if found is None:
        return None
    return const, coef, found


def quotient_direction(e: T.Binary, evaluate: Evaluate) -> Optional[tuple[str, Optional[str]]]:
    """The direction of `e = l / r` when both sides move with one shared expression B (module
    docstring), or None when the form does not apply. The caller has checked that `r` is never
    zero (its interval excludes zero)."""
    num = _affine(e.l, evaluate, None)
    if num is None:
        return None
    den = _affine(e.r, evaluate, key(num[2]))
    if den is None:
        return None
    (a, m, b), (c, k, _) = num, den
    slope = I.sub(I.mul(m, c), I.mul(a, k))  # the sign of df/dB
    inner = evaluate(b)
    if inner.dir == UNKNOWN:
        return UNKNOWN, inner.why
    if slope.nonneg():
        return inner.dir, None
    if slope.nonpos():
        return flip(inner.dir), None
    return None


__all__ = ["quotient_direction", "key"]

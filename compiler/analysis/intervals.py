"""Interval arithmetic over the reals, elementwise, for the analysis phase.

An `Interval` is a closed range [lo, hi] held as two float64 arrays of one
shape: one range per element of a Pol value, so a vector literal like
`[0.1, -2]` keeps a range per item. A scalar's ends are plain Python floats
(shape `()`): most values of a program are scalars, and each operation on
them takes a float fast path. An array's ends are `floats.Floats`, small
arrays in plain Python (no NumPy: `polc check` runs this on every call),
and each elementwise rule is written once on floats and mapped over the
elements, so scalars and arrays get the same ends. Operations broadcast like
NumPy, mirroring the program's own broadcasting.

Conventions that keep it sound and nan-free:
- An infinite end means "unbounded": the values themselves are finite, so an
  unbounded end times exactly zero is zero (never nan), and `0 * inf` corners
  drop out of products.
- An end that would come out nan (inf - inf, inf / inf) is replaced by the
  widest answer: -inf for a lower end, +inf for an upper end.
- Ends are computed with the same float operations the program performs
  (IEEE rounding is monotone), so a float value computed from inputs inside
  the input intervals lands inside the output interval. That is the property
  `tests/compiler/analysis/test_intervals.py` checks. Sums add in NumPy's order (`floats.py`);
  where NumPy's exp, tanh, log, power or arctan2 may round unlike the C
  library's (which `math` calls), the end is widened by a few ulps
  (`element_rules.py`).
- Where a value is undefined (log or sqrt of a negative number, division by
  zero) the interval covers only the defined values; the analysis reports the
  undefined case separately (`div` answers whether the divisor may be zero).

Boolean values are intervals inside [0, 1]: [1, 1] is "surely true", [0, 0]
"surely false", [0, 1] "either".
"""

from __future__ import annotations

import math
import operator
from typing import Any, Optional, Sequence, Union

from ..util import floats as F
from .element_rules import RULES, atan2_rule, power_fractional, power_integer
from ..errors import fmt_num

INF = math.inf

ArrayLike = Union[float, int, bool, F.Floats, Sequence, Any]  # Any: anything with NumPy's tolist()


class Interval:
    """[lo, hi] elementwise; `lo` and `hi` are two Python floats for a scalar, else two
    `Floats` (float64 arrays in plain Python, `floats.py`) of one shape, at least one axis."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: ArrayLike, hi: ArrayLike):
        if type(lo) is float and type(hi) is float:
            self.lo = lo if lo == lo else -INF
            self.hi = hi if hi == hi else INF
            return
        lo_a, hi_a = F.asfloats(lo), F.asfloats(hi)
        if type(lo_a) is float and type(hi_a) is float:
            self.lo = lo_a if lo_a == lo_a else -INF
            self.hi = hi_a if hi_a == hi_a else INF
            return
        shape = F.broadcast_shapes(F.shape_of(lo_a), F.shape_of(hi_a))
        self.lo = F.Floats(tuple([v if v == v else -INF for v in F.flat_to(lo_a, shape)]), shape)
        self.hi = F.Floats(tuple([v if v == v else INF for v in F.flat_to(hi_a, shape)]), shape)

    # ---- construction --------------------------------------------------------------

    @staticmethod
    def point(x: ArrayLike) -> "Interval":
        return Interval(x, x)

    @staticmethod
    def everything(shape: tuple[int, ...] = ()) -> "Interval":
        if not shape:
            return _scalar(-INF, INF)
        return _array(F.full(shape, -INF).flat, F.full(shape, INF).flat, shape)

    @staticmethod
    def boolean(shape: tuple[int, ...] = ()) -> "Interval":
        """Either true or false."""
        if not shape:
            return _scalar(0.0, 1.0)
        return _array(F.full(shape, 0.0).flat, F.full(shape, 1.0).flat, shape)

    # ---- queries ---------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return () if type(self.lo) is float else self.lo.shape

    @property
    def scalar(self) -> bool:
        """Whether the ends are plain floats (shape `()`)."""
        return type(self.lo) is float

    def broadcast_to(self, shape: tuple[int, ...]) -> "Interval":
        if shape == self.shape:
            return self  # intervals are never changed in place
        return _array(F.flat_to(self.lo, shape), F.flat_to(self.hi, shape), shape)

    def hull(self) -> "Interval":
        """One scalar range covering every element."""
        if type(self.lo) is float:
            return self
        if not self.lo.flat:
            return Interval(INF, -INF)
        return _scalar(min(self.lo.flat), max(self.hi.flat))

    @property
    def min(self) -> float:
        return self.lo if type(self.lo) is float else min(self.lo.flat)

    @property
    def max(self) -> float:
        return self.hi if type(self.hi) is float else max(self.hi.flat)

    def contains(self, x: ArrayLike) -> bool:
        x = F.asfloats(x)
        shape = F.broadcast_shapes(self.shape, F.shape_of(x))
        return all(lo <= v <= hi for lo, v, hi in zip(F.flat_to(self.lo, shape), F.flat_to(x, shape),
                                                       F.flat_to(self.hi, shape)))

    def flat_ends(self) -> tuple:
        """(lo, hi) as two sequences of floats."""
        if type(self.lo) is float:
            return (self.lo,), (self.hi,)
        return self.lo.flat, self.hi.flat

    def contains_zero(self) -> bool:
        """Whether any element may be exactly zero."""
        if type(self.lo) is float:
            return self.lo <= 0 <= self.hi
        return any(lo <= 0 <= hi for lo, hi in zip(self.lo.flat, self.hi.flat))

    def nonneg(self) -> bool:
        return self.lo >= 0 if type(self.lo) is float else all(v >= 0 for v in self.lo.flat)

    def nonpos(self) -> bool:
        return self.hi <= 0 if type(self.lo) is float else all(v <= 0 for v in self.hi.flat)

    def positive(self) -> bool:
        return self.lo > 0 if type(self.lo) is float else all(v > 0 for v in self.lo.flat)

    def negative(self) -> bool:
        return self.hi < 0 if type(self.lo) is float else all(v < 0 for v in self.hi.flat)

    def within(self, lo: float, hi: float) -> bool:
        if type(self.lo) is float:
            return self.lo >= lo and self.hi <= hi
        return all(v >= lo for v in self.lo.flat) and all(v <= hi for v in self.hi.flat)

    def is_point(self) -> bool:
        return self.lo == self.hi if type(self.lo) is float else self.lo.flat == self.hi.flat

    def surely(self) -> bool:
        """A boolean interval that is true for every element."""
        return self.lo >= 1 if type(self.lo) is float else all(v >= 1 for v in self.lo.flat)

    def never(self) -> bool:
        return self.hi <= 0 if type(self.lo) is float else all(v <= 0 for v in self.hi.flat)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Interval):
            return NotImplemented
        return _same(self.lo, other.lo) and _same(self.hi, other.hi)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        h = self.hull()
        return f"[{fmt_num(h.lo)}, {fmt_num(h.hi)}]"

    def to_json(self):
        """[lo, hi] with null for an open end; for an array, one pair per element (nested lists)."""
        def pairs(lo, hi):
            if isinstance(lo, list):
                return [pairs(a, b) for a, b in zip(lo, hi)]
            return [None if math.isinf(lo) else lo, None if math.isinf(hi) else hi]

        if type(self.lo) is float:
            return pairs(self.lo, self.hi)
        return pairs(self.lo.tolist(), self.hi.tolist())

    def __repr__(self) -> str:
        if type(self.lo) is float:
            return f"Interval({self.lo!r}, {self.hi!r})"
        return f"Interval({self.lo.tolist()!r}, {self.hi.tolist()!r})"

    # Operators, so tests and callers can write `a + b`.
    def __add__(self, other: "Interval") -> "Interval":
        return add(self, other)

    def __sub__(self, other: "Interval") -> "Interval":
        return sub(self, other)

    def __mul__(self, other: "Interval") -> "Interval":
        return mul(self, other)

    def __neg__(self) -> "Interval":
        return neg(self)


def _same(a, b) -> bool:
    """NumPy's array_equal on two ends: the same shape and the same values."""
    if type(a) is float or type(b) is float:
        return type(a) is type(b) and a == b
    return a.shape == b.shape and a.flat == b.flat


def _scalar(lo: float, hi: float) -> Interval:
    """A scalar interval from two Python floats (nan ends widened), without the checks of `Interval()`."""
    iv = object.__new__(Interval)
    iv.lo = lo if lo == lo else -INF
    iv.hi = hi if hi == hi else INF
    return iv


def _array(lo: Sequence[float], hi: Sequence[float], shape: tuple[int, ...]) -> Interval:
    """An interval of `shape` from its ends flat in C order (nan ends widened)."""
    if not shape:
        return _scalar(lo[0], hi[0])
    iv = object.__new__(Interval)
    iv.lo = F.Floats(tuple([v if v == v else -INF for v in lo]), shape)
    iv.hi = F.Floats(tuple([v if v == v else INF for v in hi]), shape)
    return iv


def _pairs(a: Interval, shape: tuple[int, ...]) -> tuple[tuple, tuple]:
    return F.flat_to(a.lo, shape), F.flat_to(a.hi, shape)


def _per_element(rule, a: Interval, b: Interval) -> Interval:
    """`rule(a_lo, a_hi, b_lo, b_hi) -> (lo, hi)` on every element, broadcasting: one rule
    written on floats serves scalars and arrays alike."""
    if type(a.lo) is float and type(b.lo) is float:
        return _scalar(*rule(a.lo, a.hi, b.lo, b.hi))
    shape = F.broadcast_shapes(a.shape, b.shape)
    (al, ah), (bl, bh) = _pairs(a, shape), _pairs(b, shape)
    out = [rule(w, x, y, z) for w, x, y, z in zip(al, ah, bl, bh)]
    return _array([o[0] for o in out], [o[1] for o in out], shape)


def join(a: Interval, b: Interval) -> Interval:
    """The smallest interval holding both, elementwise."""
    if type(a.lo) is float and type(b.lo) is float:
        return _scalar(min(a.lo, b.lo), max(a.hi, b.hi))
    return _per_element(lambda al, ah, bl, bh: (min(al, bl), max(ah, bh)), a, b)


def _meet(al: float, ah: float, bl: float, bh: float) -> tuple[float, float]:
    lo, hi = max(al, bl), min(ah, bh)
    return (al, ah) if lo > hi else (lo, hi)


def meet(a: Interval, b: Interval) -> Interval:
    """The intersection, elementwise; where it would be empty `a` is kept
    (an unreachable case: any range is sound for it)."""
    if type(a.lo) is float and type(b.lo) is float:
        lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
        return a if lo > hi else _scalar(lo, hi)
    return _per_element(_meet, a, b)


# ---- arithmetic ---------------------------------------------------------------------


def neg(a: Interval) -> Interval:
    if type(a.lo) is float:
        return _scalar(-a.hi, -a.lo)
    return _array([-v for v in a.hi.flat], [-v for v in a.lo.flat], a.shape)


def add(a: Interval, b: Interval) -> Interval:
    if type(a.lo) is float and type(b.lo) is float:
        return _scalar(a.lo + b.lo, a.hi + b.hi)  # inf - inf is nan, widened by _scalar
    shape = F.broadcast_shapes(a.shape, b.shape)
    (al, ah), (bl, bh) = _pairs(a, shape), _pairs(b, shape)
    return _array(list(map(operator.add, al, bl)), list(map(operator.add, ah, bh)), shape)


def sub(a: Interval, b: Interval) -> Interval:
    if type(a.lo) is float and type(b.lo) is float:
        return _scalar(a.lo - b.hi, a.hi - b.lo)
    shape = F.broadcast_shapes(a.shape, b.shape)
    (al, ah), (bl, bh) = _pairs(a, shape), _pairs(b, shape)
    return _array(list(map(operator.sub, al, bh)), list(map(operator.sub, ah, bl)), shape)


def _mul(al: float, ah: float, bl: float, bh: float) -> tuple[float, float]:
    # 0 * unbounded: the values are finite, so the product is 0 (never nan)
    cs = [c if c == c else 0.0 for c in (al * bl, al * bh, ah * bl, ah * bh)]
    return min(cs), max(cs)


def mul(a: Interval, b: Interval) -> Interval:
    if type(a.lo) is float and type(b.lo) is float:
        return _scalar(*_mul(a.lo, a.hi, b.lo, b.hi))
    return _per_element(_mul, a, b)


def div(a: Interval, b: Interval) -> tuple[Interval, bool]:
    """a / b, and whether the divisor may be zero somewhere.

    Where the divisor may be zero the answer covers the quotients by nonzero
    divisors only (division by zero itself is reported by the caller)."""
    if type(a.lo) is float and type(b.lo) is float:
        lo, hi, zero = _div(a.lo, a.hi, b.lo, b.hi)
        return _scalar(lo, hi), zero
    shape = F.broadcast_shapes(a.shape, b.shape)
    (al, ah), (bl, bh) = _pairs(a, shape), _pairs(b, shape)
    out = [_div(w, x, y, z) for w, x, y, z in zip(al, ah, bl, bh)]
    return _array([o[0] for o in out], [o[1] for o in out], shape), any(o[2] for o in out)


def _fdiv(x: float, y: float) -> float:
    """x / y as IEEE (and NumPy) divides: a zero divisor gives a signed inf, or nan for 0 / 0."""
    if y == 0.0:
        return math.nan if x == 0.0 or x != x else math.copysign(INF, x) * math.copysign(1.0, y)
    return x / y


def _div(a_lo: float, a_hi: float, b_lo: float, b_hi: float) -> tuple[float, float, bool]:
    """`div` of one element: (lo, hi, whether the divisor may be zero), case by case."""
    if (b_lo < 0 < b_hi) or (b_lo == 0 and b_hi == 0):  # straddles zero, or is zero
        return -INF, INF, True
    if b_lo == 0 and b_hi > 0:  # b in (0, hi]: a >= 0 gives [a.lo / hi, inf); a <= 0 gives (-inf, a.hi / hi]
        return a_lo / b_hi if a_lo >= 0 else -INF, a_hi / b_hi if a_hi <= 0 else INF, True
    if b_hi == 0 and b_lo < 0:  # b in [lo, 0): a >= 0 gives (-inf, a.lo / lo]; a <= 0 gives [a.hi / lo, inf)
        return a_hi / b_lo if a_hi <= 0 else -INF, a_lo / b_lo if a_lo >= 0 else INF, True
    # inf / inf corners never hold the extreme of a/b over a box whose divisor
    # keeps one sign (it is monotone in each argument), so they are skipped.
    cs = [c for c in (_fdiv(a_lo, b_lo), _fdiv(a_lo, b_hi), _fdiv(a_hi, b_lo), _fdiv(a_hi, b_hi)) if c == c]
    return min(cs, default=INF), max(cs, default=-INF), False


def _constant_exponent(b: Interval) -> Optional[float]:
    if type(b.lo) is float:
        return b.lo if b.lo == b.hi and math.isfinite(b.lo) else None
    f = b.lo.flat
    if f and b.is_point() and all(v == f[0] for v in f) and math.isfinite(f[0]):
        return f[0]
    return None


def power_may_be_nan(a: Interval, b: Interval) -> bool:
    """Whether a ^ b may be nan somewhere: a negative base with an exponent
    that is not a whole-number constant (elementwise, broadcasting)."""
    shape = F.broadcast_shapes(a.shape, b.shape)
    (al, _), (bl, bh) = _pairs(a, shape), _pairs(b, shape)
    return any(x < 0 and not (lo == hi and math.isfinite(lo) and lo.is_integer()) for x, lo, hi in zip(al, bl, bh))


def power(a: Interval, b: Interval) -> Interval:
    """a ^ b (NumPy `power`). Tight for a constant exponent; for a variable
    one, only a positive base is bounded (as exp(b * log a), widened)."""
    shape = F.broadcast_shapes(a.shape, b.shape)
    p = _constant_exponent(b)
    if p is None:
        if a.positive():
            e = apply("exp", mul(b, apply("log", a)))
            # exp(b * log(a)) and pow(a, b) round differently: widen by a margin.
            lo, hi = e.flat_ends()
            return _array([v * (1 - 1e-12) for v in lo], [v * (1 + 1e-12) for v in hi],
                          e.shape).broadcast_to(shape)
        return Interval.everything(shape)
    a = a.broadcast_to(shape)
    if p == 0:
        return Interval.point(F.full(shape, 1.0) if shape else 1.0)
    rule = power_integer if p.is_integer() else power_fractional
    if type(a.lo) is float:
        return _scalar(*rule(a.lo, a.hi, p))
    out = [rule(lo, hi, p) for lo, hi in zip(a.lo.flat, a.hi.flat)]
    return _array([o[0] for o in out], [o[1] for o in out], shape)


# ---- functions ------------------------------------------------------------------------


def apply(fn: str, x: Interval) -> Interval:
    """One of `typed.ELEMENTWISE` applied to every element (the rules, and how they
    allow for NumPy's rounding, are `element_rules.py`)."""
    rule = RULES.get(fn)
    if rule is None:
        raise ValueError(f"no interval rule for function {fn!r}")
    if type(x.lo) is float:
        return _scalar(*rule(x.lo, x.hi))
    out = [rule(lo, hi) for lo, hi in zip(x.lo.flat, x.hi.flat)]
    return _array([o[0] for o in out], [o[1] for o in out], x.shape)


def apply2(fn: str, a: Interval, b: Interval) -> Interval:
    """One of `typed.BINARY_FUNCS`: atan2(a, b) (a is y), min(a, b), max(a, b)."""
    if fn == "min":
        if type(a.lo) is float and type(b.lo) is float:
            return _scalar(min(a.lo, b.lo), min(a.hi, b.hi))
        return _per_element(lambda al, ah, bl, bh: (min(al, bl), min(ah, bh)), a, b)
    if fn == "max":
        if type(a.lo) is float and type(b.lo) is float:
            return _scalar(max(a.lo, b.lo), max(a.hi, b.hi))
        return _per_element(lambda al, ah, bl, bh: (max(al, bl), max(ah, bh)), a, b)
    if fn == "atan2":
        return _per_element(atan2_rule, a, b)
    raise ValueError(f"no interval rule for function {fn!r}")


def clip(x: Interval, lo: Interval, hi: Interval) -> Interval:
    """clip(x, lo, hi) = min(max(x, lo), hi), as NumPy and JAX compute it."""
    return apply2("min", apply2("max", x, lo), hi)


# ---- reductions -------------------------------------------------------------------


def reduce(fn: str, x: Interval, axis: Optional[int] = None) -> Interval:
    """One of `typed.REDUCTIONS` over `axis` (None: every element, giving a scalar).

    The element count comes from the array shape; for a hull (one range for
    `n` elements) broadcast it first: `reduce("sum", x.broadcast_to((n,)))`.
    Sums add in NumPy's order (`floats.reduce`)."""
    if type(x.lo) is float:
        if axis is not None:
            raise ValueError("a scalar has no axis to reduce")
        x = x.broadcast_to((1,))  # a scalar reduces like a one-element vector
    if fn in ("sum", "mean", "max", "min"):
        return Interval(F.reduce(fn, x.lo, axis), F.reduce(fn, x.hi, axis))
    if fn == "norm":
        sq = apply("square", x)
        lo, hi = F.reduce("sum", sq.lo, axis), F.reduce("sum", sq.hi, axis)
        return Interval(F.map1(math.sqrt, lo), F.map1(math.sqrt, hi))
    raise ValueError(f"no interval rule for reduction {fn!r}")


# ---- comparisons, logic, selection ----------------------------------------------------


def _bool(true: bool, false: bool) -> tuple[float, float]:
    """A boolean range from 'surely true' and 'surely false'."""
    return 1.0 if true else 0.0, 0.0 if false else 1.0


_COMPARE = {
    "lt": lambda al, ah, bl, bh: _bool(ah < bl, al >= bh),
    "le": lambda al, ah, bl, bh: _bool(ah <= bl, al > bh),
    "eq": lambda al, ah, bl, bh: _bool(al == ah and bl == bh and al == bl, ah < bl or bh < al),
    "ne": lambda al, ah, bl, bh: _bool(ah < bl or bh < al, al == ah and bl == bh and al == bl),
}


def compare(op: str, a: Interval, b: Interval) -> Interval:
    """eq ne lt le gt ge as boolean intervals."""
    if op == "gt":
        return compare("lt", b, a)
    if op == "ge":
        return compare("le", b, a)
    rule = _COMPARE.get(op)
    if rule is None:
        raise ValueError(f"no interval rule for comparison {op!r}")
    return _per_element(rule, a, b)


def logic(op: str, a: Interval, b: Optional[Interval] = None) -> Interval:
    """and, or (two boolean intervals) and not (one)."""
    if op == "not":
        if type(a.lo) is float:
            return _scalar(1.0 - a.hi, 1.0 - a.lo)
        return _array([1.0 - v for v in a.hi.flat], [1.0 - v for v in a.lo.flat], a.shape)
    if b is None:
        raise ValueError(f"{op} needs two operands")
    if op == "and":
        return apply2("min", a, b)
    if op == "or":
        return apply2("max", a, b)
    raise ValueError(f"no interval rule for {op!r}")


def select(cond: Interval, a: Interval, b: Interval) -> Interval:
    """where(cond, a, b): the taken branch where cond is sure, else both."""
    if type(cond.lo) is float and type(a.lo) is float and type(b.lo) is float:
        return a if cond.lo >= 1 else b if cond.hi <= 0 else join(a, b)
    shape = F.broadcast_shapes(cond.shape, a.shape, b.shape)
    (cl, ch), (al, ah), (bl, bh) = _pairs(cond, shape), _pairs(a, shape), _pairs(b, shape)
    lo, hi = [], []
    for c_lo, c_hi, a_lo, a_hi, b_lo, b_hi in zip(cl, ch, al, ah, bl, bh):
        if c_lo >= 1:
            lo.append(a_lo), hi.append(a_hi)
        elif c_hi <= 0:
            lo.append(b_lo), hi.append(b_hi)
        else:
            lo.append(min(a_lo, b_lo)), hi.append(max(a_hi, b_hi))
    return _array(lo, hi, shape)


# ---- structure ----------------------------------------------------------------------------


def index(x: Interval, items: Sequence[Union[int, tuple[int, int]]]) -> Interval:
    """x[items]: ints take (dropping the axis), (start, stop) pairs slice."""
    if type(x.lo) is float:
        raise IndexError("a scalar cannot be indexed")
    return Interval(F.index(x.lo, items), F.index(x.hi, items))


def stack(items: Sequence[Interval]) -> Interval:
    return Interval(F.stack([i.lo for i in items]), F.stack([i.hi for i in items]))

"""Interval arithmetic over the reals, elementwise, for the analysis phase.

An `Interval` is a closed range [lo, hi] held as two float64 arrays of one
shape: one range per element of a Pol value, so a vector literal like
`[0.1, -2]` keeps a range per item. A scalar's ends are plain Python floats
(shape `()`): most values of a program are scalars, and each operation on
them takes a float fast path that computes exactly what the array path
would (+ - * / are IEEE operations either way; exp, log and the like still
go through NumPy's own functions). Operations broadcast like NumPy,
mirroring the program's own broadcasting.

Conventions that keep it sound and nan-free:
- An infinite end means "unbounded": the values themselves are finite, so an
  unbounded end times exactly zero is zero (never nan), and `0 * inf` corners
  drop out of products.
- An end that would come out nan (inf - inf, inf / inf) is replaced by the
  widest answer: -inf for a lower end, +inf for an upper end.
- Ends are computed with the same float operations the program performs
  (IEEE rounding is monotone), so a float value computed from inputs inside
  the input intervals lands inside the output interval. That is the property
  `tests/test_intervals.py` checks.
- Where a value is undefined (log or sqrt of a negative number, division by
  zero) the interval covers only the defined values; the analysis reports the
  undefined case separately (`div` answers whether the divisor may be zero).

Boolean values are intervals inside [0, 1]: [1, 1] is "surely true", [0, 0]
"surely false", [0, 1] "either".
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import numpy as np

from .errors import fmt_num

INF = math.inf
_TWO_PI = 2.0 * math.pi
# Slack when testing whether an interval reaches a peak of sin/cos: a little
# too wide is sound, a rounding error the other way is not.
_PEAK_SLACK = 1e-9

ArrayLike = Union[float, int, bool, np.ndarray, Sequence]


class Interval:
    """[lo, hi] elementwise; `lo` and `hi` are float64 arrays of one shape
    (at least one axis), or two Python floats for a scalar."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: ArrayLike, hi: ArrayLike):
        if type(lo) is float and type(hi) is float:
            self.lo = lo if lo == lo else -INF
            self.hi = hi if hi == hi else INF
            return
        lo_a, hi_a = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        if lo_a.ndim == 0 and hi_a.ndim == 0:
            lo, hi = float(lo_a), float(hi_a)
            self.lo = lo if lo == lo else -INF
            self.hi = hi if hi == hi else INF
            return
        if lo_a.shape != hi_a.shape:
            lo_a, hi_a = np.broadcast_arrays(lo_a, hi_a)
        self.lo = np.where(np.isnan(lo_a), -INF, lo_a)
        self.hi = np.where(np.isnan(hi_a), INF, hi_a)

    # ---- construction --------------------------------------------------------------

    @staticmethod
    def point(x: ArrayLike) -> "Interval":
        return Interval(x, x)

    @staticmethod
    def everything(shape: tuple[int, ...] = ()) -> "Interval":
        if not shape:
            return _scalar(-INF, INF)
        return Interval(np.full(shape, -INF), np.full(shape, INF))

    @staticmethod
    def boolean(shape: tuple[int, ...] = ()) -> "Interval":
        """Either true or false."""
        if not shape:
            return _scalar(0.0, 1.0)
        return Interval(np.zeros(shape), np.ones(shape))

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
        return Interval(np.broadcast_to(self.lo, shape), np.broadcast_to(self.hi, shape))

    def hull(self) -> "Interval":
        """One scalar range covering every element."""
        if type(self.lo) is float:
            return self
        if self.lo.size == 0:
            return Interval(INF, -INF)
        return Interval(np.min(self.lo), np.max(self.hi))

    @property
    def min(self) -> float:
        return float(np.min(self.lo))

    @property
    def max(self) -> float:
        return float(np.max(self.hi))

    def contains(self, x: ArrayLike) -> bool:
        x = np.asarray(x, dtype=float)
        return bool(np.all((self.lo <= x) & (x <= self.hi)))

    def contains_zero(self) -> bool:
        """Whether any element may be exactly zero."""
        if type(self.lo) is float:
            return self.lo <= 0 <= self.hi
        return bool(np.any((self.lo <= 0) & (self.hi >= 0)))

    def nonneg(self) -> bool:
        return self.lo >= 0 if type(self.lo) is float else bool(np.all(self.lo >= 0))

    def nonpos(self) -> bool:
        return self.hi <= 0 if type(self.lo) is float else bool(np.all(self.hi <= 0))

    def positive(self) -> bool:
        return self.lo > 0 if type(self.lo) is float else bool(np.all(self.lo > 0))

    def negative(self) -> bool:
        return self.hi < 0 if type(self.lo) is float else bool(np.all(self.hi < 0))

    def within(self, lo: float, hi: float) -> bool:
        if type(self.lo) is float:
            return self.lo >= lo and self.hi <= hi
        return bool(np.all(self.lo >= lo) and np.all(self.hi <= hi))

    def is_point(self) -> bool:
        return self.lo == self.hi if type(self.lo) is float else bool(np.all(self.lo == self.hi))

    def surely(self) -> bool:
        """A boolean interval that is true for every element."""
        return self.lo >= 1 if type(self.lo) is float else bool(np.all(self.lo >= 1))

    def never(self) -> bool:
        return self.hi <= 0 if type(self.lo) is float else bool(np.all(self.hi <= 0))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Interval):
            return NotImplemented
        return bool(np.array_equal(self.lo, other.lo) and np.array_equal(self.hi, other.hi))

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        h = self.hull()
        return f"[{fmt_num(float(h.lo))}, {fmt_num(float(h.hi))}]"

    def to_json(self):
        """[lo, hi] with null for an open end; for an array, one pair per element (nested lists)."""
        def pairs(lo, hi):
            if isinstance(lo, list):
                return [pairs(a, b) for a, b in zip(lo, hi)]
            return [None if math.isinf(lo) else lo, None if math.isinf(hi) else hi]

        return pairs(np.asarray(self.lo).tolist(), np.asarray(self.hi).tolist())

    def __repr__(self) -> str:
        if type(self.lo) is float:
            return f"Interval({float(self.lo)!r}, {float(self.hi)!r})"
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


def _scalar(lo: float, hi: float) -> Interval:
    """A scalar interval from two Python floats (nan ends widened), without the checks of `Interval()`."""
    iv = object.__new__(Interval)
    iv.lo = lo if lo == lo else -INF
    iv.hi = hi if hi == hi else INF
    return iv


def _quiet():
    return np.errstate(all="ignore")


def join(a: Interval, b: Interval) -> Interval:
    """The smallest interval holding both, elementwise."""
    if type(a.lo) is float and type(b.lo) is float:
        return _scalar(min(a.lo, b.lo), max(a.hi, b.hi))
    return Interval(np.minimum(a.lo, b.lo), np.maximum(a.hi, b.hi))


def meet(a: Interval, b: Interval) -> Interval:
    """The intersection, elementwise; where it would be empty `a` is kept
    (an unreachable case: any range is sound for it)."""
    if type(a.lo) is float and type(b.lo) is float:
        lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
        return a if lo > hi else _scalar(lo, hi)
    lo, hi = np.maximum(a.lo, b.lo), np.minimum(a.hi, b.hi)
    empty = lo > hi
    return Interval(np.where(empty, a.lo, lo), np.where(empty, a.hi, hi))


# ---- arithmetic ---------------------------------------------------------------------


def neg(a: Interval) -> Interval:
    if type(a.lo) is float:
        return _scalar(-a.hi, -a.lo)
    return Interval(-a.hi, -a.lo)


def add(a: Interval, b: Interval) -> Interval:
    if type(a.lo) is float and type(b.lo) is float:
        return _scalar(a.lo + b.lo, a.hi + b.hi)  # inf - inf is nan, widened by _scalar
    with _quiet():
        return Interval(a.lo + b.lo, a.hi + b.hi)


def sub(a: Interval, b: Interval) -> Interval:
    if type(a.lo) is float and type(b.lo) is float:
        return _scalar(a.lo - b.hi, a.hi - b.lo)
    with _quiet():
        return Interval(a.lo - b.hi, a.hi - b.lo)


def _corners(f, a: Interval, b: Interval) -> tuple[np.ndarray, np.ndarray]:
    with _quiet():
        cs = np.stack(np.broadcast_arrays(f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)))
    return cs, np.isnan(cs)


def mul(a: Interval, b: Interval) -> Interval:
    if type(a.lo) is float and type(b.lo) is float:
        cs = [c if c == c else 0.0 for c in (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)]
        return _scalar(min(cs), max(cs))
    cs, bad = _corners(np.multiply, a, b)
    cs = np.where(bad, 0.0, cs)  # 0 * unbounded: the values are finite, so the product is 0
    return Interval(np.min(cs, axis=0), np.max(cs, axis=0))


def div(a: Interval, b: Interval) -> tuple[Interval, bool]:
    """a / b, and whether the divisor may be zero somewhere.

    Where the divisor may be zero the answer covers the quotients by nonzero
    divisors only (division by zero itself is reported by the caller)."""
    if type(a.lo) is float and type(b.lo) is float:
        return _div_scalar(a.lo, a.hi, b.lo, b.hi)
    cs, bad = _corners(np.divide, a, b)
    # inf / inf corners never hold the extreme of a/b over a box whose divisor
    # keeps one sign (it is monotone in each argument), so they are skipped.
    lo = np.min(np.where(bad, INF, cs), axis=0)
    hi = np.max(np.where(bad, -INF, cs), axis=0)
    lo, hi = np.broadcast_arrays(lo, hi)
    b_lo, b_hi = np.broadcast_to(b.lo, lo.shape), np.broadcast_to(b.hi, lo.shape)
    a_lo, a_hi = np.broadcast_to(a.lo, lo.shape), np.broadcast_to(a.hi, lo.shape)
    zero_lo = (b_lo == 0) & (b_hi > 0)  # b in (0, hi]
    zero_hi = (b_hi == 0) & (b_lo < 0)  # b in [lo, 0)
    straddle = ((b_lo < 0) & (b_hi > 0)) | ((b_lo == 0) & (b_hi == 0))
    with _quiet():
        # b in (0, hi]: a >= 0 gives [a.lo / hi, inf); a <= 0 gives (-inf, a.hi / hi].
        lo = np.where(zero_lo, np.where(a_lo >= 0, a_lo / b_hi, -INF), lo)
        hi = np.where(zero_lo, np.where(a_hi <= 0, a_hi / b_hi, INF), hi)
        # b in [lo, 0): a >= 0 gives (-inf, a.lo / lo]; a <= 0 gives [a.hi / lo, inf).
        new_lo = np.where(a_hi <= 0, a_hi / b_lo, -INF)
        new_hi = np.where(a_lo >= 0, a_lo / b_lo, INF)
        lo = np.where(zero_hi, new_lo, lo)
        hi = np.where(zero_hi, new_hi, hi)
    lo = np.where(straddle, -INF, lo)
    hi = np.where(straddle, INF, hi)
    return Interval(lo, hi), bool(np.any(zero_lo | zero_hi | straddle))


def _fdiv(x: float, y: float) -> float:
    """x / y as IEEE (and NumPy) divides: a zero divisor gives a signed inf, or nan for 0 / 0."""
    if y == 0.0:
        return math.nan if x == 0.0 or x != x else math.copysign(INF, x) * math.copysign(1.0, y)
    return x / y


def _div_scalar(a_lo: float, a_hi: float, b_lo: float, b_hi: float) -> tuple[Interval, bool]:
    """`div` on scalars, case by case as the array code does it with masks."""
    if (b_lo < 0 < b_hi) or (b_lo == 0 and b_hi == 0):  # straddles zero, or is zero
        return _scalar(-INF, INF), True
    if b_lo == 0 and b_hi > 0:  # b in (0, hi]
        return _scalar(a_lo / b_hi if a_lo >= 0 else -INF, a_hi / b_hi if a_hi <= 0 else INF), True
    if b_hi == 0 and b_lo < 0:  # b in [lo, 0)
        return _scalar(a_hi / b_lo if a_hi <= 0 else -INF, a_lo / b_lo if a_lo >= 0 else INF), True
    cs = [c for c in (_fdiv(a_lo, b_lo), _fdiv(a_lo, b_hi), _fdiv(a_hi, b_lo), _fdiv(a_hi, b_hi)) if c == c]
    return _scalar(min(cs, default=INF), max(cs, default=-INF)), False


def _constant_exponent(b: Interval) -> Optional[float]:
    if type(b.lo) is float:
        return b.lo if b.lo == b.hi and math.isfinite(b.lo) else None
    if b.is_point() and b.lo.size and np.all(b.lo == b.lo.flat[0]) and math.isfinite(b.lo.flat[0]):
        return float(b.lo.flat[0])
    return None


def power_may_be_nan(a: Interval, b: Interval) -> bool:
    """Whether a ^ b may be nan somewhere: a negative base with an exponent
    that is not a whole-number constant (elementwise, broadcasting)."""
    with _quiet():
        whole = np.logical_and.reduce([b.lo == b.hi, np.isfinite(b.lo), b.lo == np.round(b.lo)])
    return bool(np.any(np.logical_and(a.lo < 0, np.logical_not(whole))))


def power(a: Interval, b: Interval) -> Interval:
    """a ^ b (NumPy `power`). Exact for a constant exponent; for a variable
    one, only a positive base is bounded (as exp(b * log a), widened)."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    p = _constant_exponent(b)
    if p is None:
        if a.positive():
            e = apply("exp", mul(b, apply("log", a)))
            # exp(b * log(a)) and pow(a, b) round differently: widen by a margin.
            with _quiet():
                return Interval(e.lo * (1 - 1e-12), e.hi * (1 + 1e-12)).broadcast_to(shape)
        return Interval.everything(shape)
    a = a.broadcast_to(shape)
    with _quiet():
        if p == 0:
            return Interval.point(np.ones(shape))
        if p.is_integer():
            # x^n is monotone on each side of zero: the extremes are at the ends,
            # or at zero (0 or +-inf) when the range holds it. The ends are used
            # as they are, not through abs: pow(-x, n) can round unlike pow(x, n).
            n = int(p)
            vl, vh = np.power(a.lo, p), np.power(a.hi, p)
            lo, hi = np.minimum(vl, vh), np.maximum(vl, vh)
            has_zero = (a.lo <= 0) & (a.hi >= 0)
            if n > 0 and n % 2 == 0:
                lo = np.where(has_zero, 0.0, lo)
            elif n < 0 and n % 2 == 0:
                hi = np.where(has_zero, INF, hi)
            elif n < 0:
                lo, hi = np.where(has_zero, -INF, lo), np.where(has_zero, INF, hi)
            return Interval(lo, hi)
        # Fractional exponent: defined for a >= 0 only; negative bases give nan.
        lo_c, hi_c = np.maximum(a.lo, 0.0), np.maximum(a.hi, 0.0)
        lo, hi = (np.power(lo_c, p), np.power(hi_c, p)) if p > 0 else (np.power(hi_c, p), np.power(lo_c, p))
        undefined = a.hi < 0
        return Interval(np.where(undefined, -INF, lo), np.where(undefined, INF, hi))


# ---- functions ------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    from .transforms import sigmoid

    return sigmoid(x, np)


# Nondecreasing functions map [lo, hi] to [f(lo), f(hi)].
_MONOTONE = {
    "exp": np.exp,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "softplus": lambda x: np.logaddexp(0.0, x),
    "relu": lambda x: np.maximum(x, 0.0),
    "sign": np.sign,
}


def _monotone_scalar(f):
    def run(lo: float, hi: float) -> Interval:
        with _quiet():
            return _scalar(float(f(lo)), float(f(hi)))
    return run


def _abs_scalar(lo: float, hi: float) -> Interval:
    return _scalar(lo if lo >= 0 else (-hi if hi <= 0 else 0.0), max(-lo, hi))


def _square_scalar(lo: float, hi: float) -> Interval:
    m = _abs_scalar(lo, hi)
    return _scalar(m.lo * m.lo, m.hi * m.hi)  # np.square is x * x


# The float fast paths of `apply` (sin, cos, log and sqrt take the array path: they are rare).
_SCALAR = {**{fn: _monotone_scalar(f) for fn, f in _MONOTONE.items() if fn != "relu"},
           "relu": lambda lo, hi: _scalar(max(lo, 0.0), max(hi, 0.0)),
           "abs": _abs_scalar, "square": _square_scalar}


def _peak_inside(lo: np.ndarray, hi: np.ndarray, at: float) -> np.ndarray:
    """Whether some at + 2 k pi lies in [lo, hi] (with a little slack)."""
    k = np.ceil((lo - at) / _TWO_PI - _PEAK_SLACK)
    return at + _TWO_PI * k <= hi + _PEAK_SLACK * (1 + np.abs(hi))


def _periodic(f, x: Interval, max_at: float, min_at: float) -> Interval:
    with _quiet():
        a, b = f(x.lo), f(x.hi)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        wide = ~np.isfinite(x.lo) | ~np.isfinite(x.hi) | (x.hi - x.lo >= _TWO_PI)
        hi = np.where(wide | _peak_inside(x.lo, x.hi, max_at), 1.0, hi)
        lo = np.where(wide | _peak_inside(x.lo, x.hi, min_at), -1.0, lo)
    return Interval(lo, hi)


def apply(fn: str, x: Interval) -> Interval:
    """One of `typed.ELEMENTWISE` applied to every element."""
    if type(x.lo) is float and fn in _SCALAR:
        return _SCALAR[fn](x.lo, x.hi)
    with _quiet():
        if fn in _MONOTONE:
            f = _MONOTONE[fn]
            return Interval(f(x.lo), f(x.hi))
        if fn == "abs":
            lo = np.where(x.lo >= 0, x.lo, np.where(x.hi <= 0, -x.hi, 0.0))
            return Interval(lo, np.maximum(-x.lo, x.hi))
        if fn == "square":
            m = apply("abs", x)
            return Interval(np.square(m.lo), np.square(m.hi))
        if fn in ("log", "sqrt"):
            f = np.log if fn == "log" else np.sqrt
            # Defined on [0, inf) only: cover the defined part; all-negative has none.
            undefined = x.hi < 0
            lo, hi = f(np.maximum(x.lo, 0.0)), f(np.maximum(x.hi, 0.0))
            return Interval(np.where(undefined, -INF, lo), np.where(undefined, INF, hi))
        if fn == "sin":
            return _periodic(np.sin, x, math.pi / 2, -math.pi / 2)
        if fn == "cos":
            return _periodic(np.cos, x, 0.0, math.pi)
    raise ValueError(f"no interval rule for function {fn!r}")


def _atan2(y: Interval, x: Interval) -> Interval:
    shape = np.broadcast_shapes(y.shape, x.shape)
    y, x = y.broadcast_to(shape), x.broadcast_to(shape)
    with _quiet():
        cs = np.stack([np.arctan2(y.lo, x.lo), np.arctan2(y.lo, x.hi),
                       np.arctan2(y.hi, x.lo), np.arctan2(y.hi, x.hi)])
        lo, hi = np.min(cs, axis=0), np.max(cs, axis=0)
    # atan2 is monotone in each argument (hence extreme at the corners) when
    # the box avoids the branch cut on the negative x axis and the origin:
    # x > 0, or y of one strict sign.
    corners_ok = (x.lo > 0) | (y.lo > 0) | (y.hi < 0)
    return Interval(np.where(corners_ok, lo, -math.pi), np.where(corners_ok, hi, math.pi))


def apply2(fn: str, a: Interval, b: Interval) -> Interval:
    """One of `typed.BINARY_FUNCS`: atan2(a, b) (a is y), min(a, b), max(a, b)."""
    if type(a.lo) is float and type(b.lo) is float and fn != "atan2":
        f = min if fn == "min" else max
        return _scalar(f(a.lo, b.lo), f(a.hi, b.hi))
    if fn == "min":
        return Interval(np.minimum(a.lo, b.lo), np.minimum(a.hi, b.hi))
    if fn == "max":
        return Interval(np.maximum(a.lo, b.lo), np.maximum(a.hi, b.hi))
    if fn == "atan2":
        return _atan2(a, b)
    raise ValueError(f"no interval rule for function {fn!r}")


def clip(x: Interval, lo: Interval, hi: Interval) -> Interval:
    """clip(x, lo, hi) = min(max(x, lo), hi), as NumPy and JAX compute it."""
    return apply2("min", apply2("max", x, lo), hi)


# ---- reductions -------------------------------------------------------------------


def reduce(fn: str, x: Interval, axis: Optional[int] = None) -> Interval:
    """One of `typed.REDUCTIONS` over `axis` (None: every element, giving a scalar).

    The element count comes from the array shape; for a hull (one range for
    `n` elements) broadcast it first: `reduce("sum", x.broadcast_to((n,)))`."""
    if type(x.lo) is float and axis is None:
        x = x.broadcast_to((1,))  # a scalar reduces like a one-element vector
    ax = tuple(range(x.lo.ndim)) if axis is None else axis
    with _quiet():
        if fn == "sum":
            return Interval(np.sum(x.lo, axis=ax), np.sum(x.hi, axis=ax))
        if fn == "mean":
            return Interval(np.mean(x.lo, axis=ax), np.mean(x.hi, axis=ax))
        if fn == "max":
            return Interval(np.max(x.lo, axis=ax), np.max(x.hi, axis=ax))
        if fn == "min":
            return Interval(np.min(x.lo, axis=ax), np.min(x.hi, axis=ax))
        if fn == "norm":
            sq = apply("square", x)
            return Interval(np.sqrt(np.sum(sq.lo, axis=ax)), np.sqrt(np.sum(sq.hi, axis=ax)))
    raise ValueError(f"no interval rule for reduction {fn!r}")


# ---- comparisons, logic, selection ----------------------------------------------------


def _bool(true: np.ndarray, false: np.ndarray) -> Interval:
    """A boolean interval from masks of 'surely true' and 'surely false'."""
    if type(true) is bool:
        return _scalar(1.0 if true else 0.0, 0.0 if false else 1.0)
    return Interval(np.where(true, 1.0, 0.0), np.where(false, 0.0, 1.0))


def compare(op: str, a: Interval, b: Interval) -> Interval:
    """eq ne lt le gt ge as boolean intervals."""
    if op == "gt":
        return compare("lt", b, a)
    if op == "ge":
        return compare("le", b, a)
    if op == "lt":
        return _bool(a.hi < b.lo, a.lo >= b.hi)
    if op == "le":
        return _bool(a.hi <= b.lo, a.lo > b.hi)
    if op in ("eq", "ne"):
        if type(a.lo) is float and type(b.lo) is float:
            same = a.lo == a.hi and b.lo == b.hi and a.lo == b.lo
            apart = a.hi < b.lo or b.hi < a.lo
        else:
            same = (a.lo == a.hi) & (b.lo == b.hi) & (a.lo == b.lo)
            apart = (a.hi < b.lo) | (b.hi < a.lo)
        return _bool(same, apart) if op == "eq" else _bool(apart, same)
    raise ValueError(f"no interval rule for comparison {op!r}")


def logic(op: str, a: Interval, b: Optional[Interval] = None) -> Interval:
    """and, or (two boolean intervals) and not (one)."""
    if op == "not":
        return Interval(1.0 - a.hi, 1.0 - a.lo)
    if b is None:
        raise ValueError(f"{op} needs two operands")
    if type(a.lo) is float and type(b.lo) is float and op in ("and", "or"):
        f = min if op == "and" else max
        return _scalar(f(a.lo, b.lo), f(a.hi, b.hi))
    if op == "and":
        return Interval(np.minimum(a.lo, b.lo), np.minimum(a.hi, b.hi))
    if op == "or":
        return Interval(np.maximum(a.lo, b.lo), np.maximum(a.hi, b.hi))
    raise ValueError(f"no interval rule for {op!r}")


def select(cond: Interval, a: Interval, b: Interval) -> Interval:
    """where(cond, a, b): the taken branch where cond is sure, else both."""
    if type(cond.lo) is float and type(a.lo) is float and type(b.lo) is float:
        return a if cond.lo >= 1 else b if cond.hi <= 0 else join(a, b)
    shape = np.broadcast_shapes(cond.shape, a.shape, b.shape)
    c, a, b = cond.broadcast_to(shape), a.broadcast_to(shape), b.broadcast_to(shape)
    both = join(a, b)
    lo = np.where(c.lo >= 1, a.lo, np.where(c.hi <= 0, b.lo, both.lo))
    hi = np.where(c.lo >= 1, a.hi, np.where(c.hi <= 0, b.hi, both.hi))
    return Interval(lo, hi)


# ---- structure ----------------------------------------------------------------------------


def index(x: Interval, items: Sequence[Union[int, tuple[int, int]]]) -> Interval:
    """x[items]: ints take (dropping the axis), (start, stop) pairs slice."""
    key = tuple(i if isinstance(i, int) else slice(i[0], i[1]) for i in items)
    return Interval(x.lo[key], x.hi[key])


def stack(items: Sequence[Interval]) -> Interval:
    return Interval(np.stack([i.lo for i in items]), np.stack([i.hi for i in items]))

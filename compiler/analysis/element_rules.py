"""The interval rules of Pol's elementwise functions, atan2 and `^` with a constant
exponent, on one element: each maps the ends of one element's range (two floats) to the
ends of the result; `intervals.py` maps them over an array's elements.

The analysis bounds what the reference interpreter computes, and that is NumPy, while
these rules compute with `math` (the C library). NumPy's exp, tanh, log, power and
arctan2 are its own SIMD code on this kind of machine and round differently in the last
bits (measured with numpy 2.4.6 on AVX-512, 1 M inputs each: exp, log, power and arctan2
by at most 1 ulp, on 4%, 0.07%, 5% and 2% of inputs; tanh by up to 3 ulps, on 15%). So
each of those ends is widened outward by `_ULPS` (`_TANH_ULPS` for tanh), then clamped to
the function's true range (exp >= 0, tanh in [-1, 1], sigmoid in [0, 1], atan2 in
[-pi, pi], an even power >= 0), except where the result is exact (exp(0) = 1, tanh(0) = 0,
log(1) = 0, the infinities, a power that is a float exactly), which every implementation
within an ulp returns as it is. sin, cos, sqrt and logaddexp (softplus, and inside
sigmoid) agree with NumPy bit for bit (NumPy calls the C library for them, or they are
IEEE operations), and abs, sign, relu and square (x * x) are exact: none of those is
widened. tests/compiler/analysis/test_intervals.py holds NumPy's value at the ends of every rule.
"""

from __future__ import annotations

import math

INF = math.inf
_TWO_PI = 2.0 * math.pi
# Slack when testing whether an interval reaches a peak of sin/cos: a little
# too wide is sound, a rounding error the other way is not.
_PEAK_SLACK = 1e-9
_ULPS = 2
_TANH_ULPS = 4
_LOG2 = 0.6931471805599453  # NumPy's NPY_LOGE2 as a double


def _down(v: float, n: int) -> float:
    for _ in range(n):
        v = math.nextafter(v, -INF)
    return v


def _up(v: float, n: int) -> float:
    for _ in range(n):
        v = math.nextafter(v, INF)
    return v


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def _logaddexp(x: float, y: float) -> float:
    """NumPy's `npy_logaddexp`, step by step (it calls the C library's exp and log1p)."""
    if x == y:
        return x + _LOG2
    tmp = x - y
    if tmp > 0:
        return x + math.log1p(_exp(-tmp))
    if tmp <= 0:
        return y + math.log1p(_exp(tmp))
    return tmp  # nan


def _exp_ends(x: float) -> tuple[float, float]:
    """A range for NumPy's exp(x)."""
    v = _exp(x)
    if x == 0 or math.isinf(x) or x != x:
        return v, v
    return max(_down(v, _ULPS), 0.0), _up(v, _ULPS)


def _tanh_ends(x: float) -> tuple[float, float]:
    v = math.tanh(x)
    if x == 0 or math.isinf(x) or x != x:
        return v, v
    return max(_down(v, _TANH_ULPS), -1.0), min(_up(v, _TANH_ULPS), 1.0)


def _sigmoid_ends(x: float) -> tuple[float, float]:
    # transforms.sigmoid under NumPy: exp(-logaddexp(0, -x)); logaddexp is exact here.
    lo, hi = _exp_ends(-_logaddexp(0.0, -x))
    return lo, min(hi, 1.0)


def _log_ends(x: float) -> tuple[float, float]:
    """A range for NumPy's log(x), x >= 0."""
    if x == 0:
        return -INF, -INF
    v = math.log(x)
    if x == 1 or math.isinf(x):
        return v, v
    return _down(v, _ULPS), _up(v, _ULPS)


def _monotone(ends):
    """The interval rule of a nondecreasing function whose value at x lies in ends(x)."""
    def rule(lo: float, hi: float) -> tuple[float, float]:
        return ends(lo)[0], ends(hi)[1]
    return rule


def _exact(f):
    def rule(lo: float, hi: float) -> tuple[float, float]:
        return f(lo), f(hi)
    return rule


def _sign(x: float) -> float:
    return 1.0 if x > 0 else -1.0 if x < 0 else 0.0 if x == 0 else x


def _abs(lo: float, hi: float) -> tuple[float, float]:
    return lo if lo >= 0 else (-hi if hi <= 0 else 0.0), max(-lo, hi)


def _square(lo: float, hi: float) -> tuple[float, float]:
    m_lo, m_hi = _abs(lo, hi)
    return m_lo * m_lo, m_hi * m_hi  # np.square is x * x


def _log(lo: float, hi: float) -> tuple[float, float]:
    # Defined on [0, inf) only: cover the defined part; all-negative has none.
    if hi < 0:
        return -INF, INF
    return _log_ends(max(lo, 0.0))[0], _log_ends(max(hi, 0.0))[1]


def _sqrt(lo: float, hi: float) -> tuple[float, float]:
    if hi < 0:
        return -INF, INF
    return math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0))


def _peak_inside(lo: float, hi: float, at: float) -> bool:
    """Whether some at + 2 k pi lies in [lo, hi] (with a little slack)."""
    k = math.ceil((lo - at) / _TWO_PI - _PEAK_SLACK)
    return at + _TWO_PI * k <= hi + _PEAK_SLACK * (1 + abs(hi))


def _periodic(f, max_at: float, min_at: float):
    def rule(lo: float, hi: float) -> tuple[float, float]:
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi - lo >= _TWO_PI:
            return -1.0, 1.0
        a, b = f(lo), f(hi)
        return (-1.0 if _peak_inside(lo, hi, min_at) else min(a, b),
                1.0 if _peak_inside(lo, hi, max_at) else max(a, b))
    return rule


# fn -> rule(lo, hi) -> (lo, hi), on floats; `apply` maps it over an array's elements.
RULES = {
    "exp": _monotone(_exp_ends),
    "tanh": _monotone(_tanh_ends),
    "sigmoid": _monotone(_sigmoid_ends),
    "softplus": _exact(lambda x: _logaddexp(0.0, x)),
    "relu": lambda lo, hi: (max(lo, 0.0), max(hi, 0.0)),
    "sign": _exact(_sign),
    "abs": _abs,
    "square": _square,
    "log": _log,
    "sqrt": _sqrt,
    "sin": _periodic(math.sin, math.pi / 2, -math.pi / 2),
    "cos": _periodic(math.cos, 0.0, math.pi),
}




def _atan2_corner(y: float, x: float) -> tuple[float, float]:
    v = math.atan2(y, x)
    if y == 0 or (x == INF and math.isfinite(y)):  # 0 or +-pi: exact (pi is clamped below)
        return v, v
    return _down(v, _ULPS), _up(v, _ULPS)


def atan2_rule(y_lo: float, y_hi: float, x_lo: float, x_hi: float) -> tuple[float, float]:
    # atan2 is monotone in each argument (hence extreme at the corners) when
    # the box avoids the branch cut on the negative x axis and the origin:
    # x > 0, or y of one strict sign.
    if not (x_lo > 0 or y_lo > 0 or y_hi < 0):
        return -math.pi, math.pi
    cs = [_atan2_corner(y_lo, x_lo), _atan2_corner(y_lo, x_hi), _atan2_corner(y_hi, x_lo),
          _atan2_corner(y_hi, x_hi)]
    return max(min(c[0] for c in cs), -math.pi), min(max(c[1] for c in cs), math.pi)



# ---- power with a constant exponent ------------------------------------------------------


def _odd(p: float) -> bool:
    return p.is_integer() and p % 2 == 1


def _pow(x: float, p: float) -> float:
    """x ^ p as C's pow (and NumPy's power) gives it: inf where it overflows or at a pole,
    nan for a negative base and a fractional exponent."""
    try:
        return math.pow(x, p)
    except OverflowError:
        return -INF if x < 0 and _odd(p) else INF
    except ValueError:
        if x == 0:  # a negative exponent
            return math.copysign(INF, x) if _odd(p) else INF
        return math.nan


def _pow_exact(x: float, p: float, v: float) -> bool:
    """Whether v is x ^ p exactly, which every pow rounding to within an ulp returns as it is."""
    if p == 1 or x == 0 or x == 1 or math.isinf(x):
        return True
    if v == 0 or not math.isfinite(v):  # underflowed or overflowed
        return False
    from fractions import Fraction  # rarely needed: not worth its import on every check

    f = Fraction(p)
    if f.denominator > 4 or abs(f.numerator) > 64:
        return False
    return Fraction(v) ** f.denominator == Fraction(x) ** f.numerator


def _pow_ends(x: float, p: float, sign: int) -> tuple[float, float]:
    """A range for NumPy's x ^ p: C's pow widened by `_ULPS` unless exact, kept on the
    result's side of zero (`sign` 1: nonnegative, -1: nonpositive)."""
    v = _pow(x, p)
    if v != v or _pow_exact(x, p, v):
        return v, v
    lo, hi = _down(v, _ULPS), _up(v, _ULPS)
    return (max(lo, 0.0), hi) if sign > 0 else (lo, min(hi, 0.0))


def power_integer(lo: float, hi: float, p: float) -> tuple[float, float]:
    # x^n is monotone on each side of zero: the extremes are at the ends,
    # or at zero (0 or +-inf) when the range holds it. The ends are used
    # as they are, not through abs: pow(-x, n) can round unlike pow(x, n).
    n = int(p)
    even = n % 2 == 0
    l_lo, l_hi = _pow_ends(lo, p, 1 if even or lo >= 0 else -1)
    h_lo, h_hi = _pow_ends(hi, p, 1 if even or hi >= 0 else -1)
    r_lo, r_hi = min(l_lo, h_lo), max(l_hi, h_hi)
    if lo <= 0 <= hi:
        if n > 0 and even:
            r_lo = 0.0
        elif n < 0 and even:
            r_hi = INF
        elif n < 0:
            r_lo, r_hi = -INF, INF
    return r_lo, r_hi


def power_fractional(lo: float, hi: float, p: float) -> tuple[float, float]:
    # Defined for a >= 0 only; negative bases give nan.
    if hi < 0:
        return -INF, INF
    lo_c, hi_c = max(lo, 0.0), max(hi, 0.0)
    if p > 0:
        return _pow_ends(lo_c, p, 1)[0], _pow_ends(hi_c, p, 1)[1]
    return _pow_ends(hi_c, p, 1)[0], _pow_ends(lo_c, p, 1)[1]


__all__ = ["RULES", "atan2_rule", "power_integer", "power_fractional"]

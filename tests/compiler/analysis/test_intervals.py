"""Interval arithmetic: sound (random points inside the inputs land inside the
output, computed with the reference interpreter's own NumPy functions),
nan-free, and as tight as the analysis needs on the cases that matter."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from polc.analysis import intervals as I
from polc.check import typed as T
from polc.analysis.intervals import Interval
from polc.analysis.reference import _BINARY, _BINARY_FUNCS, _REDUCE, _UNARY_FUNCS
from tiers import examples

INF = math.inf
finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False)
special = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, math.pi, -math.pi / 2, 1e-300, 700.0, -750.0])
ends = st.one_of(finite, special)


@st.composite
def interval_and_point(draw, lo_inf=True, hi_inf=True):
    a, b = sorted([draw(ends) + 0.0, draw(ends) + 0.0])  # + 0.0: bounds are never -0.0
    lo = -INF if lo_inf and draw(st.booleans()) and draw(st.booleans()) else a
    hi = INF if hi_inf and draw(st.booleans()) and draw(st.booleans()) else b
    x = draw(st.one_of(
        st.floats(min_value=None if lo == -INF else lo, max_value=None if hi == INF else hi,
                  allow_nan=False, allow_infinity=False),
        st.sampled_from([v for v in (a, b, -0.0) if lo <= v <= hi] or [a])))
    assume(lo <= x <= hi)
    return Interval(lo, hi), x


def inside(iv: Interval, value) -> bool:
    v = np.asarray(value, dtype=float)
    ok = np.isnan(v) | ((iv.lo <= v) & (v <= iv.hi))
    return bool(np.all(ok))


def quiet(f, *args):
    with np.errstate(all="ignore"):
        return f(*args)


# ---- soundness -------------------------------------------------------------------------


@settings(max_examples=examples(400))
@given(interval_and_point(), interval_and_point(), st.sampled_from(["add", "sub", "mul"]))
def test_arithmetic_is_sound(a, b, op):
    (ia, x), (ib, y) = a, b
    out = {"add": I.add, "sub": I.sub, "mul": I.mul}[op](ia, ib)
    assert not np.isnan(out.lo).any() and not np.isnan(out.hi).any()
    assert inside(out, quiet(_BINARY[op], x, y)), (ia, ib, x, y, out)


@settings(max_examples=examples(400))
@given(interval_and_point(), interval_and_point())
def test_division_is_sound_and_flags_zero(a, b):
    (ia, x), (ib, y) = a, b
    out, maybe_zero = I.div(ia, ib)
    if ib.contains_zero():
        assert maybe_zero
    if y == 0:
        return  # division by zero itself is what the flag reports
    assert inside(out, quiet(np.divide, x, y)), (ia, ib, x, y, out)


@settings(max_examples=examples(400))
@given(interval_and_point(), st.sampled_from([0.0, 1.0, 2.0, 3.0, -1.0, -2.0, -3.0, 0.5, 1.5, -0.5]))
def test_power_with_a_constant_exponent_is_sound(a, p):
    ia, x = a
    out = I.power(ia, Interval.point(p))
    assert inside(out, quiet(np.power, x, p)), (ia, x, p, out)


@settings(max_examples=examples(300))
@given(interval_and_point(), interval_and_point())
def test_power_with_a_variable_exponent_is_sound(a, b):
    (ia, x), (ib, y) = a, b
    assert inside(I.power(ia, ib), quiet(np.power, x, y))


@settings(max_examples=examples(300))
@given(interval_and_point(), st.sampled_from(T.ELEMENTWISE))
def test_every_elementwise_function_is_sound(a, fn):
    ia, x = a
    out = I.apply(fn, ia)
    assert not np.isnan(out.lo).any() and not np.isnan(out.hi).any()
    assert inside(out, quiet(_UNARY_FUNCS[fn], x)), (fn, ia, x, out)


@settings(max_examples=examples(400))
@given(interval_and_point(), interval_and_point(), st.sampled_from(T.BINARY_FUNCS))
def test_binary_functions_are_sound(a, b, fn):
    (ia, x), (ib, y) = a, b
    assert inside(I.apply2(fn, ia, ib), quiet(_BINARY_FUNCS[fn], x, y)), (fn, ia, ib, x, y)


@given(interval_and_point(), interval_and_point(), interval_and_point())
def test_clip_is_sound(a, b, c):
    (ia, x), (ib, lo), (ic, hi) = a, b, c
    assert inside(I.clip(ia, ib, ic), np.minimum(np.maximum(x, lo), hi))


@given(st.lists(interval_and_point(), min_size=1, max_size=6), st.sampled_from(T.REDUCTIONS))
def test_reductions_are_sound(items, fn):
    iv = I.stack([i for i, _ in items])
    xs = np.array([x for _, x in items])
    assert inside(I.reduce(fn, iv), quiet(lambda v: _REDUCE[fn](v, axis=(0,)), xs))


@given(interval_and_point(), interval_and_point(), st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]))
def test_comparisons_are_sound(a, b, op):
    (ia, x), (ib, y) = a, b
    assert inside(I.compare(op, ia, ib), float(_BINARY[op](x, y)))


@given(st.booleans(), st.booleans(), st.sampled_from(["and", "or"]))
def test_logic_is_sound(p, q, op):
    known = lambda v: Interval.point(float(v))  # noqa: E731
    assert inside(I.logic(op, known(p), Interval.boolean()), float(_BINARY[op](p, q)))
    assert inside(I.logic("not", known(p)), float(not p))


@given(interval_and_point(), interval_and_point(), st.booleans())
def test_select_is_sound(a, b, c):
    (ia, x), (ib, y) = a, b
    assert inside(I.select(Interval.boolean(), ia, ib), x if c else y)
    assert I.select(Interval.point(1.0), ia, ib) == ia


# ---- precision and conventions -----------------------------------------------------------


def test_zero_times_unbounded_is_zero_not_nan():
    assert I.mul(Interval.point(0.0), Interval.everything()) == Interval.point(0.0)
    out = I.mul(Interval(0, 1), Interval(-INF, INF))
    assert out == Interval(-INF, INF)


def test_unbounded_difference_has_no_nan():
    out = I.sub(Interval(-INF, INF), Interval(-INF, INF))
    assert out == Interval.everything()


def test_division_by_a_positive_range_is_exact():
    out, maybe_zero = I.div(Interval(0, 3), Interval(1, INF))
    assert out == Interval(0, 3) and not maybe_zero


def test_division_by_a_range_touching_zero_keeps_the_sign():
    out, maybe_zero = I.div(Interval(1, 2), Interval(0, 4))
    assert maybe_zero and out == Interval(0.25, INF)
    out, _ = I.div(Interval(1, 2), Interval(-4, 0))
    assert out == Interval(-INF, -0.25)


def test_exp_of_an_unbounded_value_may_underflow_to_zero():
    assert not I.apply("exp", Interval(-INF, 3)).positive()
    assert I.add(I.apply("exp", Interval(-INF, 3)), Interval.point(1e-3)).positive()
    assert I.add(I.apply("softplus", Interval.everything()), Interval.point(0.01)).positive()


def test_saturating_functions_stay_in_their_range():
    assert I.apply("tanh", Interval.everything()) == Interval(-1, 1)
    assert I.apply("sigmoid", Interval.everything()) == Interval(0, 1)
    assert I.apply("relu", Interval(-2, 3)) == Interval(0, 3)


def test_abs_and_square_use_the_sign():
    assert I.apply("abs", Interval(-3, 2)) == Interval(0, 3)
    assert I.apply("abs", Interval(-3, -2)) == Interval(2, 3)
    assert I.apply("square", Interval(-3, 2)) == Interval(0, 9)
    assert I.power(Interval(-3, 2), Interval.point(2)) == Interval(0, 9)


def test_sin_and_cos_find_their_peaks():
    assert I.apply("sin", Interval(0, 1)) == Interval(0, math.sin(1))
    assert I.apply("sin", Interval(0, 3)).hi == 1
    assert I.apply("cos", Interval(-1, 1)).hi == 1
    assert I.apply("cos", Interval(-INF, 0)) == Interval(-1, 1)


def test_atan2_across_the_branch_cut_is_the_full_circle():
    assert I.apply2("atan2", Interval(-1, 1), Interval(-2, -1)) == Interval(-math.pi, math.pi)
    right = I.apply2("atan2", Interval(-1, 1), Interval(1, 2))
    assert right.lo == pytest.approx(-math.pi / 4) and right.hi == pytest.approx(math.pi / 4)


def test_log_and_sqrt_cover_only_the_defined_part():
    assert I.apply("log", Interval(0, 1)) == Interval(-INF, 0)
    assert I.apply("sqrt", Interval(-4, 9)) == Interval(0, 3)


def test_comparisons_decide_when_ranges_are_apart():
    assert I.compare("lt", Interval(0, 1), Interval(2, 3)).surely()
    assert I.compare("ge", Interval(0, 1), Interval(2, 3)).never()
    assert I.compare("lt", Interval(0, 2), Interval(1, 3)) == Interval.boolean()


def test_elementwise_ranges_broadcast_and_reduce():
    v = I.stack([Interval(0, 1), Interval(2, 3)])
    assert v.shape == (2,)
    assert I.add(v, Interval.point(1.0)) == Interval([1, 3], [2, 4])
    assert I.reduce("sum", v) == Interval(2, 4)
    assert I.reduce("mean", v) == Interval(1, 2)
    assert I.reduce("norm", I.stack([Interval(3, 3), Interval(-4, 4)])) == Interval(3, 5)
    m = Interval(np.zeros((2, 3)), np.arange(6.0).reshape(2, 3))
    assert I.reduce("max", m, axis=1) == Interval([0, 0], [2, 5])
    assert I.index(m, (1, (0, 2))) == Interval([0, 0], [3, 4])
    assert v.hull() == Interval(0, 3)


def test_hull_to_count_reduces_like_repeated_elements():
    assert I.reduce("sum", Interval(-1, 2).broadcast_to((4,))) == Interval(-4, 8)


def test_meet_keeps_the_original_where_empty():
    assert I.meet(Interval(0, 5), Interval(2, 9)) == Interval(2, 5)
    assert I.meet(Interval(0, 1), Interval(2, 3)) == Interval(0, 1)


# ---- ends computed with `math`, checked against NumPy's own functions --------------------------
#
# The analysis computes with `math` (the C library), the reference interpreter with NumPy,
# whose exp, tanh, log, power and arctan2 round differently in the last bits here. Each
# point below is an interval [x, x], so its ends are exactly the inputs NumPy is run on.


def _points(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([
        rng.uniform(-3, 3, n), rng.uniform(-40, 40, n), rng.standard_normal(n) * 1e-3,
        np.exp(rng.uniform(-700, 700, n)) * rng.choice([-1.0, 1.0], n), rng.uniform(-800, 800, n),
        [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 709.78, 710.0, -745.1, -746.0, 19.0, -19.0, 1e-300, INF, -INF]])


def _inside_each(iv: Interval, want: np.ndarray) -> np.ndarray:
    return np.isnan(want) | ((np.asarray(iv.lo) <= want) & (want <= np.asarray(iv.hi)))


@pytest.mark.parametrize("fn", T.ELEMENTWISE)
def test_every_function_holds_numpys_value_at_its_ends(fn):
    x = _points(0, examples(20000))
    out = I.apply(fn, Interval(x, x))
    want = quiet(_UNARY_FUNCS[fn], x)
    ok = _inside_each(out, want)
    assert ok.all(), (fn, x[~ok][:5], want[~ok][:5])


@pytest.mark.parametrize("fn", ["abs", "relu", "sign", "square", "sqrt", "softplus", "sin", "cos"])
def test_functions_numpy_computes_as_math_does_are_not_widened(fn):
    """Exact in IEEE (abs, relu, sign, square, sqrt), or the C library's own in NumPy too
    (sin, cos, and softplus's logaddexp): the ends are NumPy's values, bit for bit."""
    x = _points(1, examples(20000))
    out = I.apply(fn, Interval(x, x))
    want = quiet(_UNARY_FUNCS[fn], x)
    defined = ~np.isnan(want)
    if fn in ("sin", "cos"):  # a point within 1e-9 (relative) of a peak is rounded up to the peak
        defined &= (np.asarray(out.lo) > -1) & (np.asarray(out.hi) < 1)
        assert defined.sum() > x.size / 2
    assert np.array_equal(np.asarray(out.lo)[defined], want[defined])
    assert np.array_equal(np.asarray(out.hi)[defined], want[defined])


def test_widened_functions_stay_in_their_true_range_and_exact_points_stay_points():
    x = _points(2, examples(5000))
    for fn, lo, hi in [("exp", 0, INF), ("tanh", -1, 1), ("sigmoid", 0, 1), ("softplus", 0, INF)]:
        out = I.apply(fn, Interval(x, x))
        assert out.within(lo, hi), fn
    assert I.apply("exp", Interval.point(0.0)) == Interval.point(1.0)
    assert I.apply("tanh", Interval.point(0.0)) == Interval.point(0.0)
    assert I.apply("log", Interval.point(1.0)) == Interval.point(0.0)
    assert I.apply("exp", Interval(-INF, 0)) == Interval(0, 1)
    assert I.apply("sigmoid", Interval(-INF, INF)) == Interval(0, 1)
    assert I.apply("tanh", Interval(-30, 30)) == Interval(-1, 1)
    assert I.apply("log", Interval(0, 1)) == Interval(-INF, 0)
    e = I.apply("exp", Interval(0, 1))  # widened: NumPy's exp(1) may be the next float
    assert e.lo == 1 and math.e < e.hi <= math.nextafter(math.nextafter(math.e, INF), INF)


@pytest.mark.parametrize("p", [2.0, 3.0, 4.0, 7.0, -1.0, -2.0, -3.0, 0.5, 1.5, -0.5, 0.25, 2.5, 1.0, 0.0])
def test_power_holds_numpys_value_at_its_ends(p):
    x = _points(3, examples(20000))
    out = I.power(Interval(x, x), Interval.point(p))
    want = quiet(np.power, x, p)
    ok = _inside_each(out, want)
    assert ok.all(), (p, x[~ok][:5], want[~ok][:5])


def test_an_exact_power_is_not_widened():
    assert I.power(Interval(-1, 1), Interval.point(2.0)) == Interval(0, 1)
    assert I.power(Interval(0.5, 3), Interval.point(2.0)) == Interval(0.25, 9)
    assert I.power(Interval(-2, 3), Interval.point(3.0)) == Interval(-8, 27)
    assert I.power(Interval(4, 9), Interval.point(0.5)) == Interval(2, 3)
    assert I.power(Interval(4, 16), Interval.point(-1.5)) == Interval(1 / 64, 1 / 8)
    third = I.power(Interval.point(3.0), Interval.point(0.5))  # sqrt(3) is not a float: widened
    assert third.lo < math.sqrt(3) < third.hi


def test_atan2_holds_numpys_value_at_its_ends():
    y, x = _points(4, examples(8000)), _points(5, examples(8000))
    rng = np.random.default_rng(6)
    y, x = y[rng.permutation(y.size)], x[rng.permutation(x.size)]
    out = I.apply2("atan2", Interval(y, y), Interval(x, x))
    want = np.arctan2(y, x)
    ok = _inside_each(out, want)
    assert ok.all(), (y[~ok][:5], x[~ok][:5])
    assert out.within(-math.pi, math.pi)
    assert I.apply2("atan2", Interval.point(0.0), Interval(1, 2)) == Interval.point(0.0)


def test_json_form_has_null_for_open_ends():
    assert Interval(-INF, 0.5).to_json() == [None, 0.5]
    assert I.stack([Interval(0, 1), Interval(2, INF)]).to_json() == [[0.0, 1.0], [2.0, None]]


def test_string_form():
    assert str(Interval(-INF, 0.5)) == "[-inf, 0.5]"
    assert str(I.stack([Interval(0, 1), Interval(2, 3)])) == "[0, 3]"


# ---- the float fast path of scalars is the array path -------------------------------------


def _as_array(iv: Interval) -> Interval:
    return iv.broadcast_to((1,))


def _same(scalar: Interval, array: Interval) -> bool:
    return scalar.scalar and array.shape == (1,) and scalar.lo == array.lo[0] and scalar.hi == array.hi[0]


_TWO = {"add": I.add, "sub": I.sub, "mul": I.mul, "join": I.join, "meet": I.meet, "power": I.power,
        "div": lambda a, b: I.div(a, b)[0],
        **{f: (lambda f: lambda a, b: I.apply2(f, a, b))(f) for f in T.BINARY_FUNCS},
        **{op: (lambda op: lambda a, b: I.compare(op, a, b))(op) for op in ["eq", "ne", "lt", "le", "gt", "ge"]}}


@settings(max_examples=examples(400))
@given(interval_and_point(), interval_and_point(), st.sampled_from(sorted(_TWO)))
def test_scalar_operations_compute_what_their_array_form_computes(a, b, op):
    (ia, _), (ib, _) = a, b
    assert _same(_TWO[op](ia, ib), _TWO[op](_as_array(ia), _as_array(ib))), (op, ia, ib)
    if op == "div":
        assert I.div(ia, ib)[1] == I.div(_as_array(ia), _as_array(ib))[1]


_ONE = {"neg": I.neg, "not": lambda x: I.logic("not", x),
        **{fn: (lambda fn: lambda x: I.apply(fn, x))(fn) for fn in T.ELEMENTWISE}}


@settings(max_examples=examples(300))
@given(interval_and_point(), st.sampled_from(sorted(_ONE)))
def test_scalar_functions_compute_what_their_array_form_computes(a, fn):
    ia, _ = a
    assert _same(_ONE[fn](ia), _ONE[fn](_as_array(ia))), (fn, ia)


@given(interval_and_point(), st.sampled_from(T.REDUCTIONS))
def test_a_scalar_reduces_like_a_one_element_vector(a, fn):
    ia, _ = a
    out = I.reduce(fn, ia)
    assert out.scalar and out == I.reduce(fn, I.stack([ia]))


@given(interval_and_point(), interval_and_point(), interval_and_point(), st.sampled_from([0.0, 0.5, 1.0]))
def test_scalar_clip_and_select_compute_what_their_array_form_computes(a, b, c, cond):
    (ia, _), (ib, _), (ic, _) = a, b, c
    assert _same(I.clip(ia, ib, ic), I.clip(_as_array(ia), _as_array(ib), _as_array(ic)))
    k = Interval(min(cond, 0.5), max(cond, 0.5)) if cond != 0.5 else Interval.boolean()
    assert _same(I.select(k, ia, ib), I.select(_as_array(k), _as_array(ia), _as_array(ib)))
    assert _same(I.logic("and", k, Interval.boolean()), I.logic("and", _as_array(k), _as_array(Interval.boolean())))


@pytest.mark.parametrize("source,found", [
    ("obs x : real in [1, 2]\naction a : real = x * 1e308 * 10\n", "1e308"),
    ("obs x : real\naction a : real = x / 4.9e-324\n", "4.9e-324"),
    ("obs x : real in [0, 1e30]\naction a : real = x * x\n", "x * x"),
    ("obs x : real in [0, 100]\naction a : real = exp(x)\n", "exp(x)"),
])
def test_float32_overflow_and_underflow_warn_naming_the_expression(source, found):
    import polc

    warned = [d for d in polc.loads(source).warnings if d.code == "W0410"]
    assert len(warned) == 1 and warned[0].message.startswith(f"`{found}`"), warned


@pytest.mark.parametrize("source", [
    "obs x : real\naction a : real = x * 1e30 + 1e-30\n",  # unbounded input: no claim about overflow
    "obs x : real in [-1, 1]\naction a : real = exp(x) * 1e38 / 10\n",
    "obs x : real in [0, 1]\naction a : real = x / 1e-37\n",
])
def test_float32_safe_programs_do_not_warn(source):
    import polc

    assert not [d for d in polc.loads(source).warnings if d.code == "W0410"]


def test_constants_written_out_are_numpys():
    """The analysis does not import numpy, so these are written out where they are used."""
    from polc.analysis import abstract, element_rules

    assert abstract._F32_MAX == float(np.finfo(np.float32).max)
    assert abstract._F32_TINY == float(np.finfo(np.float32).tiny)
    assert element_rules._LOG2 == float(np.logaddexp(0.0, 0.0))

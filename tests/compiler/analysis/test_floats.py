"""The analysis' plain-Python arrays (`polc.util.floats`) compute what NumPy computes, bit for
bit: sums and means in NumPy's order (pairwise along a trailing run of reduced axes,
one after another along the others), on random shapes and axes, and laid out as the
reference interpreter lays its values out (a leading batch axis, broadcast views);
and the structural operations (broadcasting, indexing, stacking) give NumPy's
elements and shapes."""

import itertools

import numpy as np
import pytest

from polc.util import floats as F
from tiers import examples

SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 64, 127, 128, 129, 200, 257]


def _values(rng, shape):
    """Magnitudes over many decades, and sometimes round numbers, so rounding order shows."""
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, shape)
    return np.round(x, 1) if rng.random() < 0.3 else x


def _all_axes(nd):
    return [None] + list(range(nd)) + [c for r in range(2, nd + 1) for c in itertools.combinations(range(nd), r)]


def _bits_equal(got, want) -> bool:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return got.shape == want.shape and np.array_equal(got.view(np.int64), want.view(np.int64))


def test_sum_and_mean_equal_numpys_bit_for_bit_on_random_shapes_and_axes():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(examples(400)):
        shape = tuple(int(d) for d in rng.choice(SIZES, rng.integers(1, 4)))
        if np.prod(shape) > 20000:
            continue
        x = _values(rng, shape)
        fx = F.asfloats(x)
        for axis in _all_axes(len(shape)):
            for fn in ("sum", "mean"):
                want = getattr(np, fn)(x, axis=axis)
                assert _bits_equal(F.reduce(fn, fx, axis), want), (fn, shape, axis)
                checked += 1
    assert checked > examples(400)


def test_a_sum_of_negative_zeros_is_positive_zero_as_in_numpy():
    assert _bits_equal(F.reduce("sum", F.asfloats([-0.0] * 9)), np.sum(np.full(9, -0.0)))
    assert _bits_equal(F.reduce("sum", F.asfloats([[-0.0, -0.0]] * 3), 0), np.sum(np.full((3, 2), -0.0), axis=0))


def test_pairwise_sum_follows_numpys_blocks():
    # 8 accumulators: which terms share one decides the result. Left to right every
    # 1 is lost (2**53 + 1 rounds back to 2**53); in 8 accumulators 14 of them survive.
    x = [2.0 ** 53] + [1.0] * 15
    assert F.pairwise_sum(x) == np.sum(np.array(x)) == 2.0 ** 53 + 14
    assert sum(x) == 2.0 ** 53


@pytest.mark.parametrize("broadcast", [False, True])
def test_sums_match_the_reference_interpreters_batched_layout(broadcast):
    """The reference interpreter reduces (B,) + shape arrays over the axes after the batch,
    some of them broadcast views (stride 0): each row sums as the analysis sums one value."""
    rng = np.random.default_rng(1)
    B = 64
    for _ in range(examples(150)):
        shape = tuple(int(d) for d in rng.choice(SIZES[:14], rng.integers(1, 4)))
        row = _values(rng, shape)
        batch = np.broadcast_to(row, (B,) + shape) if broadcast else np.stack([row] * B)
        for axis in _all_axes(len(shape)):
            ax = tuple(range(1, len(shape) + 1)) if axis is None else (
                axis + 1 if isinstance(axis, int) else tuple(a + 1 for a in axis))
            for fn in ("sum", "mean"):
                want = getattr(np, fn)(batch, axis=ax)
                got = F.reduce(fn, F.asfloats(row), axis)
                assert all(_bits_equal(got, w) for w in want), (fn, shape, axis, broadcast)


def test_max_and_min_reduce_like_numpy():
    """Equal values; between 0.0 and -0.0 either may come out, as from Python's max
    (the scalar path always did so): the sign of a zero end changes no range."""
    rng = np.random.default_rng(2)
    for _ in range(examples(100)):
        shape = tuple(int(d) for d in rng.choice(SIZES[:12], rng.integers(1, 4)))
        x = _values(rng, shape)
        for axis in _all_axes(len(shape)):
            for fn in ("max", "min"):
                got, want = F.reduce(fn, F.asfloats(x), axis), getattr(np, fn)(x, axis=axis)
                assert np.shape(got) == np.shape(want) and np.array_equal(np.asarray(got), want), (fn, shape, axis)


def test_broadcasting_indexing_and_stacking_give_numpys_elements():
    rng = np.random.default_rng(3)
    for _ in range(examples(200)):
        shape = tuple(int(d) for d in rng.integers(1, 5, rng.integers(1, 4)))
        x = rng.standard_normal(shape)
        fx = F.asfloats(x)
        assert fx.shape == x.shape and fx.tolist() == x.tolist() and _bits_equal(np.asarray(fx), x)
        # broadcast to a shape with more axes and some size-1 axes stretched
        target = tuple(int(d) for d in rng.integers(1, 4, rng.integers(0, 2))) + tuple(
            int(rng.integers(2, 4)) if d == 1 and rng.random() < 0.5 else d for d in shape)
        assert F.broadcast_shapes(shape, target) == np.broadcast_shapes(shape, target)
        assert F.broadcast_to(fx, target).tolist() == np.broadcast_to(x, target).tolist()
        # ints take, (start, stop) pairs slice
        items = []
        for d in shape[: rng.integers(1, len(shape) + 1)]:
            if rng.random() < 0.5:
                items.append(int(rng.integers(0, d)))
            else:
                a = int(rng.integers(0, d))
                items.append((a, int(rng.integers(a + 1, d + 1))))
        key = tuple(i if isinstance(i, int) else slice(*i) for i in items)
        got, want = F.index(fx, items), x[key]
        assert np.shape(got) == want.shape and np.asarray(got).tolist() == want.tolist(), (shape, items)
        assert F.stack([fx, fx]).tolist() == np.stack([x, x]).tolist()
    with pytest.raises(ValueError):
        F.broadcast_shapes((2, 3), (4,))
    assert F.stack([1.0, 2.0]).shape == (2,)

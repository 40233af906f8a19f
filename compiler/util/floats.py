"""Small float64 arrays in plain Python, for the interval analysis: no NumPy.

`polc check` runs the analysis on every call, and NumPy's import alone took
about a quarter of a whole check's time, while the arrays the analysis holds
are small (a Pol value has a few dozen elements at most: a 12x4 observation).
So an array end of an `Interval` is a `Floats`: a flat tuple of Python floats
in C order and a shape. The few NumPy operations the analysis needs are here,
with NumPy's meaning: broadcasting, indexing with ints and (start, stop)
pairs, stacking, and reductions over one axis or all of them.

`sum` adds in NumPy's order, not just to NumPy's precision: the analysis
bounds the values the reference interpreter (NumPy) computes, and float
addition is monotone only for one fixed order. NumPy reduces a run of
contiguous trailing axes with pairwise summation (`pairwise_sum` in
numpy/_core/src/umath/loops_utils.h.src: fewer than 8 terms one by one; up
to 128 with 8 accumulators; above that, recursively in two halves) and adds
the results for each index of the other reduced axes one after the other,
in C order. tests/compiler/analysis/test_floats.py checks this against the installed NumPy bit
for bit on random shapes and axes.

A `Floats` converts to a NumPy array where NumPy is about (`np.asarray(iv.lo)`,
`iv.lo <= values`): NumPy calls its `__array__`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterable, Optional, Sequence, Union

Shape = tuple[int, ...]
Item = Union[int, tuple[int, int]]


class Floats:
    """A float64 array: `flat`, a tuple of floats in C order, and `shape` (at least one axis).
    Never changed after it is made."""

    __slots__ = ("flat", "shape")

    def __init__(self, flat: tuple, shape: Shape):
        self.flat = flat
        self.shape = shape

    @property
    def size(self) -> int:
        return len(self.flat)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def tolist(self) -> list:
        """Nested lists, as `numpy.ndarray.tolist` gives them."""
        return _nest(self.flat, self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, i: int) -> Union[float, "Floats"]:
        """One index along the first axis (what a caller reading one element needs)."""
        if not isinstance(i, int):
            raise TypeError("Floats takes one int index; use floats.index for more")
        n = self.shape[0]
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis 0 with size {n}")
        return index(self, [i % n])

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np  # only ever called by NumPy, which is imported already

        return np.array(self.flat, dtype=dtype or float).reshape(self.shape)

    def __repr__(self) -> str:
        return f"Floats({self.tolist()!r})"


def _nest(flat: Sequence[float], shape: Shape) -> Any:
    if len(shape) <= 1:
        return list(flat)
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def asfloats(x: Any) -> Union[float, Floats]:
    """A Python float (for anything 0-d) or a `Floats`, from a number, nested lists or tuples,
    a `Floats`, or anything with NumPy's `tolist()` (an array)."""
    if type(x) is float:
        return x
    if isinstance(x, Floats):
        return x
    if hasattr(x, "tolist") and not isinstance(x, (list, tuple)):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        shape: list[int] = []
        probe: Any = x
        while isinstance(probe, (list, tuple)):
            shape.append(len(probe))
            if not probe:
                break
            probe = probe[0]
        flat: list[float] = []
        _flatten(x, tuple(shape), flat)
        return Floats(tuple(flat), tuple(shape))
    return float(x)


def _flatten(x: Any, shape: Shape, out: list) -> None:
    if not shape:
        if isinstance(x, (list, tuple)):
            raise ValueError("setting an array element with a sequence: the nested lists are ragged")
        out.append(float(x))
        return
    if not isinstance(x, (list, tuple)) or len(x) != shape[0]:
        raise ValueError("the nested lists are ragged")
    for item in x:
        _flatten(item, shape[1:], out)


def full(shape: Shape, value: float) -> Floats:
    n = 1
    for d in shape:
        n *= d
    return Floats((float(value),) * n, tuple(shape))


def shape_of(x: Union[float, Floats]) -> Shape:
    return () if type(x) is float else x.shape


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy's broadcasting of shapes; ValueError if they do not broadcast."""
    nd = max(map(len, shapes), default=0)
    out = []
    for axis in range(-nd, 0):
        d = 1
        for s in shapes:
            if len(s) >= -axis:
                k = s[axis]
                if k != 1:
                    if d != 1 and d != k:
                        raise ValueError(f"shape mismatch: objects cannot be broadcast to a single shape: "
                                         f"{' '.join(map(str, shapes))}")
                    d = k
        out.append(d)
    return tuple(out)


@lru_cache(maxsize=512)
def _gather(src: Shape, dst: Shape) -> tuple[int, ...]:
    """For each element of `dst` (C order), its position in a `src` array broadcast to `dst`."""
    if broadcast_shapes(src, dst) != dst:
        raise ValueError(f"cannot broadcast an array of shape {src} to {dst}")
    full_src = (1,) * (len(dst) - len(src)) + src
    strides, step = [], 1
    for d in reversed(full_src):
        strides.append(step if d != 1 else 0)
        step *= d
    strides.reverse()
    idx = [0]
    for d, s in zip(dst, strides):
        idx = [i + j * s for i in idx for j in range(d)]
    return tuple(idx)


def flat_to(x: Union[float, Floats], shape: Shape) -> tuple:
    """The elements of `x` broadcast to `shape`, flat in C order."""
    if type(x) is float:
        n = 1
        for d in shape:
            n *= d
        return (x,) * n
    if x.shape == shape:
        return x.flat
    f = x.flat
    return tuple([f[i] for i in _gather(x.shape, shape)])


def broadcast_to(x: Union[float, Floats], shape: Shape) -> Union[float, Floats]:
    if type(x) is not float and x.shape == shape:
        return x
    if not shape:
        if type(x) is float:
            return x
        raise ValueError(f"cannot broadcast an array of shape {x.shape} to ()")
    return Floats(flat_to(x, shape), shape)


def map1(f: Callable[[float], float], x: Union[float, Floats]) -> Union[float, Floats]:
    if type(x) is float:
        return f(x)
    return Floats(tuple(map(f, x.flat)), x.shape)


# ---- structure -------------------------------------------------------------------------------


@lru_cache(maxsize=512)
def positions(shape: Shape, items: tuple) -> tuple[tuple[int, ...], Shape]:
    """Flat positions and shape of x[items] for x of `shape`: ints take (dropping the axis),
    (start, stop) pairs slice; axes past the items are kept whole."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    strides.reverse()
    idx, out = [0], []
    for axis, d in enumerate(shape):
        it = items[axis] if axis < len(items) else (0, d)
        if isinstance(it, int):
            if not -d <= it < d:
                raise IndexError(f"index {it} is out of bounds for axis {axis} with size {d}")
            idx = [i + (it % d) * strides[axis] for i in idx]
        else:
            start, stop, _ = slice(it[0], it[1]).indices(d)
            js = range(start, max(start, stop))
            idx = [i + j * strides[axis] for i in idx for j in js]
            out.append(len(js))
    return tuple(idx), tuple(out)


def index(x: Floats, items: Sequence[Item]) -> Union[float, Floats]:
    """x[items], NumPy's basic indexing: a float when every axis is taken by an int."""
    if len(items) > x.ndim:
        raise IndexError(f"too many indices for an array of {x.ndim} axes")
    idx, shape = positions(x.shape, tuple(i if isinstance(i, int) else tuple(i) for i in items))
    f = x.flat
    if not shape:
        return f[idx[0]]
    return Floats(tuple([f[i] for i in idx]), shape)


def stack(items: Sequence[Union[float, Floats]]) -> Floats:
    """NumPy's `stack` along a new first axis: every item of one shape."""
    shapes = {shape_of(i) for i in items}
    if len(shapes) != 1:
        raise ValueError("all input arrays must have the same shape")
    (shape,) = shapes
    flat: list[float] = []
    for i in items:
        if type(i) is float:
            flat.append(i)
        else:
            flat.extend(i.flat)
    return Floats(tuple(flat), (len(items),) + shape)


# ---- reductions ----------------------------------------------------------------------------------

_BLOCK = 128  # numpy's PW_BLOCKSIZE


def pairwise_sum(a: Sequence[float], start: int = 0, n: Optional[int] = None) -> float:
    """a[start:start + n] summed in the order of NumPy's `pairwise_sum` (the sum of one
    contiguous run): one by one under 8 terms, 8 accumulators up to 128, halves above."""
    if n is None:
        n = len(a) - start
    if n < 8:
        res = 0.0
        for i in range(start, start + n):
            res += a[i]
        return res
    if n <= _BLOCK:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[start: start + 8]
        end = start + n - n % 8
        for i in range(start + 8, end, 8):
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for i in range(end, start + n):
            res += a[i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_sum(a, start, n2) + pairwise_sum(a, start + n2, n - n2)


@lru_cache(maxsize=512)
def _plan(shape: Shape, axes: tuple[int, ...]) -> tuple[Shape, tuple[tuple[int, ...], ...], int]:
    """How NumPy walks a reduction of a C-contiguous array of `shape` over `axes`: the result's
    shape; for each result element, the flat starts of its runs, in the order NumPy adds them;
    and the length of a run (the trailing reduced axes, which are contiguous)."""
    # Axes of length 1 change no order (NumPy's iterator drops them): plan without them.
    kept = [a for a in range(len(shape)) if shape[a] != 1]
    out_shape = tuple(shape[a] for a in range(len(shape)) if a not in axes)
    red = {kept.index(a) for a in axes if a in kept}
    shape = tuple(shape[a] for a in kept)
    nd = len(shape)
    run_axes = 0
    while run_axes < nd and (nd - 1 - run_axes) in red:
        run_axes += 1
    run = 1
    for d in shape[nd - run_axes:]:
        run *= d
    outer = shape[:nd - run_axes]  # axes walked one index at a time
    strides, step = [], run
    for d in reversed(outer):
        strides.append(step)
        step *= d
    strides.reverse()
    out_axes = [a for a in range(len(outer)) if a not in red]
    red_axes = [a for a in range(len(outer)) if a in red]

    def positions(axs: list[int]) -> list[int]:
        idx = [0]
        for a in axs:
            idx = [i + j * strides[a] for i in idx for j in range(outer[a])]
        return idx

    starts = positions(red_axes)
    plan = tuple(tuple(o + s for s in starts) for o in positions(out_axes))
    return out_shape, plan, run


def _axes(ndim: int, axis: Union[None, int, Iterable[int]]) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axs = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axs:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of bounds for an array of {ndim} axes")
        out.append(a % ndim)
    return tuple(sorted(set(out)))


def reduce(fn: str, x: Floats, axis: Union[None, int, Iterable[int]] = None) -> Union[float, Floats]:
    """`sum`, `mean`, `max` or `min` over `axis` (an int, several, or None: all), as NumPy
    computes them; a float when no axis is left."""
    shape, plan, run = _plan(x.shape, _axes(x.ndim, axis))
    f = x.flat
    if fn in ("sum", "mean"):
        if run == 1:  # no trailing reduced axis: NumPy adds the elements one after another
            vals = []
            for starts in plan:
                s = 0.0  # NumPy starts from add's identity: a sum of -0.0 is 0.0
                for i in starts:
                    s += f[i]
                vals.append(s)
        else:
            vals = []
            for starts in plan:
                s = 0.0  # NumPy starts from add's identity: a sum of -0.0 is 0.0
                for i in starts:
                    s += pairwise_sum(f, i, run)
                vals.append(s)
        if fn == "mean":
            count = len(plan[0]) * run if plan else 0
            vals = [v / count if count else float("nan") for v in vals]
    elif fn in ("max", "min"):
        pick = max if fn == "max" else min
        vals = [pick(f[j] for i in starts for j in range(i, i + run)) for starts in plan]
    else:
        raise ValueError(f"no reduction {fn!r}")
    if not shape:
        return vals[0]
    return Floats(tuple(vals), shape)


__all__ = ["Floats", "asfloats", "full", "shape_of", "broadcast_shapes", "broadcast_to", "flat_to", "map1",
           "positions", "index", "stack", "pairwise_sum", "reduce"]

"""Ranges of parts of a vector observation: `obs state : real[6] {[0] in [0, 1.5], [2:6] in [0, 3]}`.

Real observation layouts pack fields of different kinds into one vector (speed,
yaw rate, wheel speeds). Each part of the `{...}` block selects elements by
index or slice of the leading axes, as an expression's subscript does (integer
literals or constants, negative ones from the end), and gives them a range. An
element no part selects keeps the observation's own range (unbounded when it
has none); a part's range must lie inside that range (`E0314`), and no element
may be given two (`E0315`). The result is one lower and one upper bound per
element, which the interval analysis starts from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..frontend import ast
from .. import errors
from ..util.floats import positions
from ..util.text import brackets
from .typed import Type

if TYPE_CHECKING:  # pragma: no cover
    from .program import _Checker


def element_bounds(checker: "_Checker", d: ast.ObsDecl, typ: Type, lo: float, hi: float
                   ) -> Optional[tuple[tuple[float, ...], tuple[float, ...]]]:
    """(lower bounds, upper bounds) of every element of observation `d`, flat in C order, or
    None after reporting an error in its `{...}` block."""
    from .expr import _Poison

    shape = typ.shape
    size = 1
    for n in shape:
        size *= n
    lows, highs = [float(lo)] * size, [float(hi)] * size  # flat, in C order
    owner = [-1] * size  # which part gave each element its range
    whole = errors.interval_text(lo, hi)
    ok = True
    for k, part in enumerate(d.parts):
        try:
            items, _ = checker.resolve_items(part.items, shape, part.span)
        except _Poison:
            ok = False
            continue
        flat, part_shape = positions(shape, tuple(i if isinstance(i, int) else tuple(i) for i in items))
        text = errors.part_index(items)
        before = len(checker.errors)
        p_lo, p_hi = checker.range_of(part.range, d.name, typ)
        if len(checker.errors) > before:  # an empty range (E0301)
            ok = False
            continue
        if p_lo < lo or p_hi > hi:
            checker.error(errors.elem_range_outside(part.range.span, d.name, errors.part_named(text), p_lo, p_hi, whole))
            ok = False
            continue
        taken = [owner[i] for i in flat]
        if max(taken, default=-1) >= 0:
            first = d.parts[max(taken)]
            element = _element_text(items, shape, _unravel(next(j for j, t in enumerate(taken) if t >= 0),
                                                           part_shape))
            where = part.items[0].span.to(part.items[-1].span)
            checker.error(errors.elem_range_overlap(where, d.name, errors.the_part(text), element,
                                                    first.items[0].span.to(first.items[-1].span)))
            ok = False
            continue
        for i in flat:
            owner[i], lows[i], highs[i] = k, float(p_lo), float(p_hi)
    if not ok:
        return None
    return tuple(lows), tuple(highs)


def _unravel(j: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index (one per axis of `shape`) of the j-th element in C order."""
    out = []
    for n in reversed(shape):
        j, r = divmod(j, n)
        out.append(r)
    return tuple(reversed(out))


def _element_text(items, shape: tuple[int, ...], at) -> str:
    """The index of one element, written as a subscript: the position `at` inside the part."""
    full, j = [], 0
    for axis in range(len(shape)):
        i = items[axis] if axis < len(items) else (0, shape[axis])
        if isinstance(i, int):
            full.append(i)
        else:
            full.append(i[0] + int(at[j]) if j < len(at) else i[0])
            j += 1
    return brackets(full)


__all__ = ["element_bounds"]

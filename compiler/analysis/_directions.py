"""Directions of change, the algebra the abstract interpreter (`abstract.py`) computes in.

A value's direction in a variable is constant, increasing, decreasing or
unknown (non-strict: "increasing" means never falls as the variable rises).
An unknown direction carries why it was lost: the first place, as a sentence
for the W0407 message. Reasons are passed around unwritten (`Reason`, a
function writing the sentence) and written only when a direction is lost.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional, Union

from .intervals import Interval

CONST, INC, DEC, UNKNOWN = "constant", "increasing", "decreasing", "unknown"


class Abs(NamedTuple):
    """What the analysis knows about one value."""

    iv: Interval
    dir: str = CONST
    why: Optional[str] = None  # when dir is UNKNOWN: the first place the direction was lost


# Why a direction was lost: the sentence, or a function writing it (called only if it is needed).
Reason = Union[str, Callable[[], str]]
_FLIP = {INC: DEC, DEC: INC}


def flip(d: str) -> str:
    return _FLIP.get(d, d)


def flipped(a: Abs) -> tuple[str, Optional[str]]:
    return flip(a.dir), a.why


def _say(why: Reason) -> str:
    return why if isinstance(why, str) else why()


def combine(parts: list[tuple[str, Optional[str]]], conflict: Reason) -> tuple[str, Optional[str]]:
    """The direction of a value that is nondecreasing in each part (each part
    already oriented): unknown if any part is, or if parts move both ways."""
    for d, why in parts:
        if d == UNKNOWN:
            return UNKNOWN, why
    moving = {d for d, _ in parts if d != CONST}
    if not moving:
        return CONST, None
    if len(moving) == 1:
        return moving.pop(), None
    return UNKNOWN, _say(conflict)


def scaled(a: Abs, factor: Interval, why: Reason) -> tuple[str, Optional[str]]:
    """The direction of a * c where c is constant in the variable and lies in `factor`."""
    if a.dir in (CONST, UNKNOWN):
        return a.dir, a.why
    if factor.nonneg():
        return a.dir, None
    if factor.nonpos():
        return flip(a.dir), None
    return UNKNOWN, _say(why)


def still(*args: Abs) -> bool:
    """Whether every argument is constant in the variable (then so is the result, for every rule)."""
    return all(a.dir == CONST for a in args)


def trig_direction(fn: str, iv: Interval) -> Optional[str]:
    """INC or DEC if sin/cos is monotone over all of `iv`, else None."""
    h = iv.hull()
    lo, hi = float(h.lo), float(h.hi)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    start = -math.pi / 2 if fn == "sin" else -math.pi  # an increasing stretch begins here, every 2 pi
    for base, d in ((start, INC), (start + math.pi, DEC)):
        k = float(math.floor((lo - base) / (2 * math.pi)))
        seg = base + 2 * math.pi * k
        if lo >= seg + 1e-9 and hi <= seg + math.pi - 1e-9:
            return d
    return None


__all__ = ["CONST", "INC", "DEC", "UNKNOWN", "Abs", "Reason", "flip", "flipped", "combine", "scaled", "still",
           "trig_direction"]

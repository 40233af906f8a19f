"""How the language's values read as text: a number, a range (an intent's claim: polc.text).

One home for each so that the checker's messages, `polc graph`, the generated code's
comments, the language server's hovers, the reports and the prompts write a range the
same way. A range is written as a Pol declaration writes it (`in [0, 1.5]`, `>= 0`,
`<= 2`), so a reader can copy it back into a program; an interval that a sentence puts
after "in" or "outside" is `[lo, hi]`, with `inf` for an open end.

It imports nothing of polc, so every room of the compiler (the checker's messages
included), the runtime and the language server can use it; `polc.text` re-exports it.
"""

from __future__ import annotations

import math

UNBOUNDED = "unbounded"  # a range with neither end bounded, where an empty string would read as missing


def brackets(ints) -> str:
    """Integers in Pol's brackets, as a shape or an index is written (`[12, 4]`, `[0, 1]`);
    nothing for none (a scalar's shape, no index), so `"real" + brackets(shape)` is a type."""
    return "" if not ints else "[" + ", ".join(map(str, ints)) + "]"


def number(x: float, digits: int = 6) -> str:
    """A number as people read it: a whole number below 1e15 in full (`3`, `1500000`),
    any other with `digits` significant digits (`0.142857`), `inf`, `-inf` and `nan` as words."""
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.{digits}g}"


def interval(lo: float, hi: float) -> str:
    """`[lo, hi]`, an open end as `-inf` or `inf`: for a sentence that reads "in" or "outside" before it."""
    return f"[{number(lo)}, {number(hi)}]"


def bounds(lo: float, hi: float) -> str:
    """The range as a declaration writes it: `in [lo, hi]`, `>= lo`, `<= hi`, or '' when neither
    end is bounded (so `real` + ' ' + bounds reads as the declaration)."""
    if math.isinf(lo) and math.isinf(hi):
        return ""
    if math.isinf(hi):
        return f">= {number(lo)}"
    if math.isinf(lo):
        return f"<= {number(hi)}"
    return f"in {interval(lo, hi)}"


def constraint(lo: float, hi: float) -> str:
    """`bounds` for a table cell or a sentence, where '' would read as missing: `unbounded` then."""
    return bounds(lo, hi) or UNBOUNDED

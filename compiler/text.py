"""How the language's values read as text: a number, a range, an intent's claim.

The one home of this text (docs/language.md): `polc.util.text` has the numbers and ranges
(every room of the compiler uses them, so they import nothing of polc); this module adds an
intent's claim, which needs the syntax tree, and re-exports the rest for the runtime and the
language server.
"""

from __future__ import annotations

from typing import Union

from .frontend import ast
from .util.text import UNBOUNDED, bounds, brackets, constraint, interval, number

__all__ = ["UNBOUNDED", "bounds", "brackets", "claim", "constraint", "interval", "number"]


def claim(c: Union[ast.MonoClaim, ast.RangeClaim]) -> str:
    """An intent's claim as the source writes it: `steer increasing in dist`, `v in [0, 2]`, `v >= 0`."""
    if isinstance(c, ast.MonoClaim):
        return f"{c.target.id} {c.direction} in {c.var.id}"
    if c.op == "in":
        return f"{c.target.id} in [{c.lo.text}, {c.hi.text}]"
    bound = c.lo if c.op in (">=", ">") else c.hi
    return f"{c.target.id} {c.op} {bound.text}"

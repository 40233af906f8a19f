"""Stan's constraint transforms, written once over an array module `xp`.

A weight declared with a constraint is fitted in an unconstrained space; these
maps go between the two (Stan reference manual, "Constraint transforms"):

    constraint      constrain(u)                     unconstrain(x)
    none            x = u                            u = x
    >= a            x = a + exp(u)                   u = log(x - a)
    <= b            x = b - exp(u)                   u = log(b - x)
    in [a, b]       x = a + (b - a) * sigmoid(u)     u = logit((x - a) / (b - a))
                                                       = log(x - a) - log(b - x)

`xp` is `numpy` (the reference interpreter) or `jax.numpy` (the lowering); the
bounds `lo`/`hi` are static Python floats, +-inf meaning "open". Both maps are
elementwise, so any shape goes in and the same shape comes out. Nothing here
imports jax: `polc check` loads this module through the reference interpreter.
"""

from __future__ import annotations

import math
from typing import Any


def kind(lo: float, hi: float) -> str:
    """Which transform a constraint uses: "none", "lower", "upper" or "interval"."""
    has_lo, has_hi = lo > -math.inf, hi < math.inf
    if has_lo and has_hi:
        return "interval"
    if has_lo:
        return "lower"
    if has_hi:
        return "upper"
    return "none"


def sigmoid(u: Any, xp: Any) -> Any:
    """1 / (1 + exp(-u)): jax's own logistic under jax (what hand-written JAX uses), and
    exp(-log(1 + exp(-u))) under numpy, which does not overflow (or warn) for large |u|."""
    if getattr(xp, "__name__", "") == "jax.numpy":
        import jax  # only ever reached from the lowering, which has imported jax already

        return jax.nn.sigmoid(u)
    return xp.exp(-xp.logaddexp(0.0, -u))


def constrain(u: Any, lo: float, hi: float, xp: Any) -> Any:
    """Unconstrained `u` -> a value inside (lo, hi). Same shape as `u`.

    A zero bound or a unit width adds no operation (0 + exp(u) is exp(u) exactly),
    so the lowered program is the one a person would write."""
    k = kind(lo, hi)
    if k == "interval":
        x = sigmoid(u, xp)
        x = x if hi - lo == 1 else (hi - lo) * x
        return x if lo == 0 else lo + x
    if k == "lower":
        return xp.exp(u) if lo == 0 else lo + xp.exp(u)
    if k == "upper":
        return -xp.exp(u) if hi == 0 else hi - xp.exp(u)
    return u


def unconstrain(x: Any, lo: float, hi: float, xp: Any) -> Any:
    """A value strictly inside (lo, hi) -> its unconstrained `u`. Same shape as `x`.

    A value on a bound maps to -inf/+inf (and numpy warns): `check` only lets
    weights start strictly inside, and fitting never reaches the boundary."""
    k = kind(lo, hi)
    if k == "interval":
        # log(x - a) - log(b - x) keeps full precision near both ends, where
        # forming p = (x - a) / (b - a) first would round p to 0 or 1.
        return xp.log(x - lo) - xp.log(hi - x)
    if k == "lower":
        return xp.log(x - lo)
    if k == "upper":
        return xp.log(hi - x)
    return x

"""How much of an action an echo term explains, on a trace.

An environment's schema may say that an observation echoes an action (Car Racing's
`steer_ind` follows `steer`); `polc check --env` warns (W0509) where an action's mean
reads one. On a trace this check measures the echo's share: each such action
recomputed at every row with the echoing observation set to 0 (for `steer_ind`: the
wheels straight), and the mean change of the action beside the action's own mean
magnitude. A large share says the policy steers by copying its last action.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from polc.analysis import reference
from polc.analysis.echo import echo_reads

from .base import Finding
from .checks import CheckOut, Context, num, pct

LARGE = 0.25  # an echo term moving an action by a quarter of its magnitude or more is a warning


def echoes_of(metadata: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The echoes of the environment a trace's metadata names ({} when it names none or
    cannot be loaded: the check is then skipped)."""
    env = metadata.get("env") if isinstance(metadata, Mapping) else None
    name = env.get("name") if isinstance(env, Mapping) else None
    if not isinstance(name, str):
        return {}
    try:
        from ..envs import get

        return get(name).schema.echoes()
    except Exception:  # an env.toml gone, gymnasium missing: no schema, no echo finding
        return {}


def check_echo(ctx: Context, echoes: Optional[Mapping[str, Sequence[str]]]) -> CheckOut:
    """One finding per (action, echoing observation) read in the action's mean."""
    if not echoes:
        return CheckOut([])
    pairs = echo_reads(ctx.tp, echoes)
    full = ctx.full() if pairs else None
    if full is None:  # nothing read, or an mlp block without params
        return CheckOut([])
    out, data = [], {}
    for action, obs in pairs:
        zeroed = dict(ctx.obs, **{obs: np.zeros_like(ctx.obs[obs])})
        without = reference.run(ctx.tp, ctx.weights, zeroed, ctx.mlp_params or {}, batch=ctx.B,
                                state=ctx.states or None)  # the logged memory, as `full` reads it
        a = np.asarray(full.values[action], np.float64)
        moved = float(np.mean(np.abs(a - np.asarray(without.values[action], np.float64))))
        size = float(np.mean(np.abs(a)))
        share = moved / size if size > 0 else 0.0
        data[f"{action}.{obs}"] = {"moved": moved, "magnitude": size, "share": share}
        echoed = ", ".join(echoes[obs])
        out.append(Finding("echo", "warning" if share >= LARGE else "info", action,
                           f'"{obs}" echoes {echoed}: setting it to 0 moves {action} by {num(moved)} on average, '
                           f"{pct(share)} of {action}'s mean magnitude ({num(size)})."))
    return CheckOut(out, data={"echo": data})


__all__ = ["LARGE", "check_echo", "echoes_of"]

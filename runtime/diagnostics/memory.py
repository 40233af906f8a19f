"""The `states` check of `polc.runtime.diagnostics`: how a policy's memory behaved in a trace.

A state (`state NAME : TYPE [RANGE] = INIT next EXPR`) is read from its trace column, or
stepped from the logged observations when the trace has none (`base.state_values`). Two
failures a control engineer looks for, each a warning named by the state and located at its
declaration:

    saturated   a real state on a bound of its declared range at SATURATED or more of the
                steps: `next` keeps pushing past the bound (an integrator wound up), so the
                state carries no information there
    drifting    a real state still moving one way through the second half of an episode
                (its net change there DRIFT_MONOTONE or more of all the way it travels
                there, and DRIFT_SHARE or more of the episode's spread) and not on a
                bound: an integrator with no saturation, a phase never wrapped, a timer
                never reset. A wrapped phase or a reset timer travels back at each wrap,
                so it does not drift.

Only states that accumulate (their `next` reads the state itself: an integral, a filter, a phase,
a timer) are judged: a delay (`next err`) follows its input, which the other checks judge, and
boolean states (latches, phases) are neither; an episode shorter than DRIFT_MIN_STEPS is not
judged for drift.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from polc.check import typed as T

from .base import Finding
from .checks import CheckOut, Context, element, num, pct

SATURATED = 0.2  # share of steps on a bound that makes a state saturated
DRIFT_MIN_STEPS = 20  # an episode needs this many steps to judge a trend
DRIFT_MONOTONE = 0.8  # the second half's net change over all the way it travels
DRIFT_SHARE = 0.4  # the second half's net change over the spread (a steady ramp gives just under 0.5)


def _on_bound(v: np.ndarray, bound: float, lo: float, hi: float) -> np.ndarray:
    """Where `v` sits on `bound` (float32 traces: a relative tolerance, and a share of a finite range)."""
    tol = 1e-5 * (1.0 + abs(bound)) + (1e-4 * (hi - lo) if math.isfinite(lo) and math.isfinite(hi) else 0.0)
    return np.abs(v - bound) <= tol


def _where(st: T.State) -> str:
    return f"State {st.name} (line {st.span.line})"


def _saturation(ctx: Context, st: T.State, v: np.ndarray) -> tuple[Finding | None, float]:
    """The saturated finding of state `st` (values `v`, (rows, size)) and its largest share on a bound."""
    worst = (0.0, 0, "", math.nan)
    for bound, side in ((st.lo, "lower"), (st.hi, "upper")):
        if not math.isfinite(bound):
            continue
        on = _on_bound(v, bound, st.lo, st.hi)
        share = on.mean(axis=0)
        k = int(np.argmax(share))
        if share[k] > worst[0]:
            worst = (float(share[k]), k, side, bound)
    share, k, side, bound = worst
    if share < SATURATED:
        return None, share
    on = _on_bound(v[:, k], bound, st.lo, st.hi)
    first = int(np.flatnonzero(on)[0])
    episodes = np.unique(ctx.steps.episode[on])
    n_ep = len(np.unique(ctx.steps.episode))
    which = f"{st.name}{element(st.type.shape, k)}, " if st.type.shape else ""
    return Finding("states", "warning", st.name,
                   f"{_where(st)} sits on its {side} bound {num(bound)} at {pct(share)} of steps ({which}in "
                   f"{len(episodes)} of {n_ep} episode(s), first at {ctx.steps.where(first)}): its `next` keeps "
                   f"pushing past the bound, as a wound-up integrator does, so there it remembers nothing; scale down "
                   f"what `next` adds, add a leak (`next 0.99 * {st.name} + ...`), or widen the range if the bound is "
                   f"too tight{_stepped(ctx, st)}."), share


def _trend(x: np.ndarray) -> float:
    """The second half's net change when `x` (one episode, in step order) drifts, else 0."""
    spread = float(np.ptp(x))
    if len(x) < DRIFT_MIN_STEPS or not np.isfinite(x).all() or spread <= 1e-9 * (1.0 + float(np.abs(x).max())):
        return 0.0
    half = x[len(x) // 2:]
    net = float(half[-1] - half[0])
    travel = float(np.abs(np.diff(half)).sum())  # a wrapped phase's jumps back count here, not in `net`
    if abs(net) < DRIFT_SHARE * spread or travel <= 0.0:
        return 0.0
    return net if abs(net) >= DRIFT_MONOTONE * travel else 0.0


def _drift(ctx: Context, st: T.State, v: np.ndarray) -> tuple[Finding | None, int]:
    """The drifting finding of state `st` (values `v`, (rows, size)) and how many episodes drift."""
    found = []  # (|net|, episode, element, rows)
    for e in np.unique(ctx.steps.episode):
        rows = np.flatnonzero(ctx.steps.episode == e)
        rows = rows[np.argsort(ctx.steps.step[rows], kind="stable")]
        for k in range(v.shape[1]):
            x = v[rows, k]
            if math.isfinite(st.lo) and _on_bound(x[-1:], st.lo, st.lo, st.hi).any() or \
                    math.isfinite(st.hi) and _on_bound(x[-1:], st.hi, st.lo, st.hi).any():
                continue  # ending on a bound is saturation, not drift
            net = _trend(x)
            if net:
                found.append((abs(net), int(e), k, rows))
                break
    if not found:
        return None, 0
    _, e, k, rows = max(found, key=lambda f: f[0])
    x = v[rows, k]
    mid = len(rows) // 2
    verb = "rises" if x[-1] > x[mid] else "falls"
    name = st.name + element(st.type.shape, k)
    fix = ("give it a range, which saturates it (`state " + st.name + " : real in [lo, hi] = ...`)"
           if not (math.isfinite(st.lo) and math.isfinite(st.hi)) else "scale down what `next` adds")
    n_ep = len(np.unique(ctx.steps.episode))
    return Finding("states", "warning", st.name,
                   f"{_where(st)} drifts without settling in {len(found)} of {n_ep} episode(s): in episode {e} "
                   f"{name} {verb} from {num(x[mid])} at step {int(ctx.steps.step[rows[mid]])} to {num(x[-1])} at "
                   f"step {int(ctx.steps.step[rows[-1]])}, still moving at the episode's end, as an integrator of a "
                   f"steady error or a phase never wrapped does; {fix}, add a leak (`next 0.99 * {st.name} + ...`), "
                   f"or wrap or reset it{_stepped(ctx, st)}."), len(found)


def _stepped(ctx: Context, st: T.State) -> str:
    return " (not traced: stepped from the logged observations)" if st.name in ctx.untraced else ""


def check_states(ctx: Context) -> CheckOut:
    """Every real state that accumulates: saturated on a bound of its range, or drifting."""
    out: list[Finding] = []
    data: dict[str, Any] = {}
    checked = 0
    for st in ctx.tp.states:
        if st.name not in ctx.states:
            out.append(Finding("states", "info", st.name,
                               f"{_where(st)} is not in the trace and reads an mlp block whose params were not "
                               f"given, so it was not checked."))
            continue
        if st.type.base == T.BOOL or st.name not in T.refs(st.update):
            continue  # a latch, or a delay (`next err`): it follows its input, which other checks judge
        v = np.asarray(ctx.states[st.name], np.float64).reshape(ctx.B, -1)
        saturated, share = _saturation(ctx, st, v)
        drifting, n_drift = _drift(ctx, st, v)
        out += [f for f in (saturated, drifting) if f is not None]
        data[st.name] = {"on_bound": share, "drifting_episodes": n_drift}
        checked += 1
    if checked and not any(f.severity == "warning" for f in out):
        stepped = " (stepped from the logged observations: the trace has no column for them)" if ctx.untraced else ""
        out.append(Finding("states", "ok", ctx.tp.name,
                           f"All {checked} accumulating state(s) stay off their bounds at more than {pct(1 - SATURATED)} of "
                           f"steps and settle within each episode{stepped}."))
    return CheckOut(out, data={"states": data} if data else {})


__all__ = ["check_states", "SATURATED", "DRIFT_MIN_STEPS", "DRIFT_MONOTONE", "DRIFT_SHARE"]

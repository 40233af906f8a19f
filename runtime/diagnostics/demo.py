"""The demonstration check of `polc.runtime.diagnostics`: the policy's actions against the
demonstrator's, in matched states.

Every trace state is matched to its nearest demonstration state on the policy's own
observations. Distances are in units of the demonstration's spread: each observation
element is divided by its std over the demonstration (at least 5% of its declared
range, so a constant element such as `on_grass` does not make every other value
infinitely far), and each observation gets the same total weight however many
elements it has; the distance is the root mean square over observations.

A trace state is "covered" when it is no farther from its match than 95% of the
demonstration's own states are from the demonstration's other episodes (the same
episode is excluded: neighbouring steps are near-copies). Where covered, the
demonstration shows what to do there, so a large action difference is a real
disagreement; the k worst covered states (at least 10 steps apart) are reported with
their observations and both actions. Uncovered states are reported as a fraction:
the policy drives where the demonstration never went.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from .base import DiagnosticsError, Finding, Steps
from .checks import CheckOut, Context, num, pct

K_WORST = 5
SEPARATION = 10  # steps between two reported states of one episode
COVER_QUANTILE = 0.95
SHIFT_WARNING = 0.3  # fraction of uncovered trace states that makes the shift a warning


def _features(ctx: Context, demo: Steps) -> tuple[np.ndarray, np.ndarray]:
    """(trace (B, D), demo (N, D)) scaled so Euclidean distance is the RMS over observations."""
    cols_t, cols_d = [], []
    n_obs = max(1, len(ctx.tp.obs))
    for o in ctx.tp.obs:
        t = ctx.obs[o.name].reshape(ctx.B, -1)
        d = np.asarray(demo.columns["obs." + o.name], np.float64).reshape(demo.rows, -1)
        width = o.hi - o.lo if math.isfinite(o.hi - o.lo) else 0.0
        floor = max(0.05 * width, 1e-3)
        scale = np.maximum(np.nan_to_num(d.std(axis=0)), floor) * math.sqrt(t.shape[1] * n_obs)
        cols_t.append(np.nan_to_num(t / scale))
        cols_d.append(np.nan_to_num(d / scale))
    return np.concatenate(cols_t, axis=1), np.concatenate(cols_d, axis=1)


def nearest(a: np.ndarray, b: np.ndarray, exclude: Optional[Callable[[slice], np.ndarray]] = None,
            chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """For each row of `a` (n, D), the index and distance of its nearest row of `b` (m, D);
    `exclude(rows)` gives a (len(rows), m) mask of pairs not to match."""
    bb = np.einsum("ij,ij->i", b, b)
    idx = np.zeros(len(a), np.int64)
    dist = np.full(len(a), np.inf)
    for start in range(0, len(a), chunk):
        rows = slice(start, min(start + chunk, len(a)))
        x = a[rows]
        d2 = np.einsum("ij,ij->i", x, x)[:, None] + bb[None, :] - 2.0 * (x @ b.T)
        if exclude is not None:
            d2 = np.where(exclude(rows), np.inf, d2)
        j = np.argmin(d2, axis=1)
        idx[rows] = j
        dist[rows] = np.sqrt(np.maximum(d2[np.arange(len(j)), j], 0.0))
    return idx, dist


def _demo_spread(feat: np.ndarray, demo: Steps, queries: int = 3000) -> np.ndarray:
    """Demonstration states' distances to the nearest state of another episode (of the same
    episode at least SEPARATION steps away when there is only one), for at most `queries`
    states drawn evenly (a quantile of them is all that is needed)."""
    q = np.linspace(0, demo.rows - 1, min(queries, demo.rows)).astype(np.int64)
    ep, step = demo.episode, demo.step
    if len(np.unique(ep)) > 1:
        exclude = lambda rows: ep[q[rows]][:, None] == ep[None, :]  # noqa: E731
    else:
        exclude = lambda rows: np.abs(step[q[rows]][:, None] - step[None, :]) < SEPARATION  # noqa: E731
    return nearest(feat[q], feat, exclude)[1]


def _obs_summary(ctx: Context, row: int) -> str:
    parts = []
    for o in ctx.tp.obs:
        v = ctx.obs[o.name][row].reshape(-1)
        if v.size == 1:
            parts.append(f"{o.name} {num(v[0])}")
        elif v.size <= 4:
            parts.append(f"{o.name} [{', '.join(num(x) for x in v)}]")
    return ", ".join(parts)


def _pick(score: np.ndarray, candidates: np.ndarray, steps: Steps, k: int) -> list[int]:
    """Up to k rows of the highest score, at least SEPARATION steps apart within an episode."""
    chosen: list[int] = []
    for row in candidates[np.argsort(-score[candidates], kind="stable")]:
        if all(steps.episode[row] != steps.episode[c] or abs(steps.step[row] - steps.step[c]) >= SEPARATION
               for c in chosen):
            chosen.append(int(row))
        if len(chosen) == k:
            break
    return chosen


def check_demo(ctx: Context, demo: Steps, k: int = K_WORST) -> CheckOut:
    tp = ctx.tp
    wanted = [f"obs.{o.name}" for o in tp.obs] + [f"action.{a.name}" for a in tp.actions]
    missing = [c for c in wanted if c not in demo.columns]
    if missing:
        raise DiagnosticsError(f"The demonstration {demo.name} has no column {', '.join(missing[:6])}, which policy "
                               f"{tp.name} needs.")
    if demo.rows == 0:
        raise DiagnosticsError(f"The demonstration {demo.name} has no rows.")
    feat_t, feat_d = _features(ctx, demo)
    match, dist = nearest(feat_t, feat_d)
    threshold = float(np.quantile(_demo_spread(feat_d, demo), COVER_QUANTILE)) if demo.rows > 1 else math.inf
    covered = dist <= threshold
    out: list[Finding] = []
    if not covered.all():
        frac = 1 - covered.mean()
        out.append(Finding("demo", "warning" if frac > SHIFT_WARNING else "info", tp.name,
                           f"{pct(frac)} of the {ctx.B} trace states are farther from every demonstration state "
                           f"(median distance {num(np.median(dist))}) than 95% of demonstration states are from the "
                           f"other demonstration episodes ({num(threshold)}): there the policy drives where the "
                           f"demonstration never went."))
    diffs, data = {}, {}
    where = covered if covered.any() else np.ones(ctx.B, bool)
    for a in tp.actions:
        mine = ctx.logged[a.name].reshape(ctx.B, -1)
        theirs = np.asarray(demo.columns["action." + a.name], np.float64).reshape(demo.rows, -1)[match]
        width = a.hi - a.lo if math.isfinite(a.hi - a.lo) else max(float(np.nanstd(theirs)), 1e-6)
        diffs[a.name] = np.abs(mine - theirs).mean(axis=1) / width
        gap = np.abs(mine - theirs).mean(axis=1)
        data[a.name] = {"mean_abs_diff": float(np.nanmean(gap)), "mean_abs_diff_covered": float(np.nanmean(gap[where]))}
    if tp.actions:
        n_cov = int(where.sum())
        out.append(Finding("demo", "info", max(diffs, key=lambda n: float(np.nanmean(diffs[n][where]))),
                           f"Mean |policy action - demonstration action| at the matched state, over the {n_cov} "
                           f"covered states (all {ctx.B} in brackets): " + ", ".join(
                               f"{n} {num(d['mean_abs_diff_covered'])} ({num(d['mean_abs_diff'])})"
                               for n, d in data.items()) + "."))
    score = np.nan_to_num(np.mean(list(diffs.values()), axis=0)) if diffs else np.zeros(ctx.B)
    candidates = np.flatnonzero(covered) if covered.sum() >= k else np.arange(ctx.B)
    worst = []
    for row in _pick(score, candidates, ctx.steps, k):
        j = int(match[row])
        actions = ", ".join(f"{a.name} {_vec(ctx.logged[a.name][row])} (demo {_vec(demo.columns['action.' + a.name][j])})"
                            for a in tp.actions)
        subject = max(diffs, key=lambda n: diffs[n][row]) if diffs else tp.name
        out.append(Finding("demo", "info", subject,
                           f"At {ctx.steps.where(row)} (demonstration {demo.where(j)}, distance {num(dist[row])}): "
                           f"policy {actions}; {_obs_summary(ctx, row)}."))
        worst.append({"row": row, "episode": int(ctx.steps.episode[row]), "step": int(ctx.steps.step[row]),
                      "demo_episode": int(demo.episode[j]), "demo_step": int(demo.step[j]), "distance": float(dist[row])})
    return CheckOut(out, (), {"demo": {"actions": data, "covered": float(covered.mean()), "threshold": threshold,
                                       "median_distance": float(np.median(dist)), "worst": worst}})


def _vec(v) -> str:
    v = np.asarray(v, np.float64).reshape(-1)
    return num(v[0]) if v.size == 1 else "[" + ", ".join(num(x) for x in v) + "]"


__all__ = ["check_demo", "nearest"]

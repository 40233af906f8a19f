"""Built-in checks on the logged values: reconstruction, observation ranges, branches, and
summary statistics (see `polc.runtime.diagnostics` for the whole list)."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from polc.check import typed as T

from .base import Finding
from .checks import ABS_TOL, REL_TOL, CheckOut, Context, element, num, pct, source_text

COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


# ---- reconstruction ------------------------------------------------------------------------------


def _errors(logged: np.ndarray, recomputed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(abs error (B, n), mismatch mask (B, n)); NaN against NaN and equal infinities match."""
    B = logged.shape[0]
    a = np.asarray(logged, np.float64).reshape(B, -1)
    b = np.broadcast_to(np.asarray(recomputed, np.float64).reshape(B, -1), a.shape)
    with np.errstate(invalid="ignore"):
        err = np.abs(a - b)
    same = (np.isnan(a) & np.isnan(b)) | (a == b)
    err = np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))
    return err, err > ABS_TOL + REL_TOL * np.where(np.isfinite(b), np.abs(b), 0.0)


def _one_step(ctx: Context, node) -> Optional[np.ndarray]:
    """A node's own expression applied to the LOGGED values of what it reads."""
    if not ctx.can_eval(node.expr):
        return None
    (v,) = ctx.eval_exprs([node.expr])
    if isinstance(node, T.Action):
        v = np.clip(v.reshape((ctx.B,) + (1,) * (node.type.ndim - node.expr.type.ndim) + node.expr.type.shape),
                    node.lo, node.hi)
        v = np.broadcast_to(v, (ctx.B,) + node.type.shape)
    return v


def _what(node) -> str:
    return f"mean.{node.name}" if isinstance(node, T.Action) else f"latent {node.name}"


def check_reconstruction(ctx: Context) -> CheckOut:
    """Every latent and action mean recomputed from the logged observations and weights."""
    tp, out = ctx.tp, []
    full = ctx.full()
    source = "observations and weights" if full is not None else "values of what it reads"
    skipped = []
    worst_latent = (0.0, "")
    for node in tp.nodes:
        recomputed = full.values[node.name] if full is not None else _one_step(ctx, node)
        if recomputed is None:
            skipped.append(node.name)
            continue
        err, bad = _errors(ctx.logged[node.name], recomputed)
        row, k = np.unravel_index(int(np.argmax(err)), err.shape)
        if bad.any():
            origin = ""
            if full is not None:
                own = _one_step(ctx, node)
                if own is not None:
                    starts = _errors(ctx.logged[node.name], own)[1].any()
                    origin = (" (its own expression of its logged inputs does not give the logged value either: "
                              "the difference starts here)" if starts else
                              " (its own expression of its logged inputs gives the logged value: the difference "
                              "comes from upstream)")
            logged_v = np.asarray(ctx.logged[node.name], np.float64).reshape(ctx.B, -1)[row, k]
            rec_v = np.broadcast_to(np.asarray(recomputed, np.float64).reshape(ctx.B, -1), err.shape)[row, k]
            out.append(Finding("reconstruction", "error", node.name,
                               f"{_what(node)}{element(node.type.shape, k)} differs from its recomputation at "
                               f"{pct(bad.any(axis=1).mean())} of steps, max abs error {num(err[row, k])} at "
                               f"{ctx.steps.where(row)} (logged {num(logged_v)}, recomputed {num(rec_v)}){origin}."))
        elif isinstance(node, T.Action):
            out.append(Finding("reconstruction", "ok", node.name,
                               f"mean.{node.name} matches its recomputation from the logged {source} (max abs error "
                               f"{num(err.max()) if err.size else 0} over {ctx.B} steps)."))
        elif err.size and err.max() >= worst_latent[0]:
            worst_latent = (float(err.max()), node.name)
    n_latents = len(tp.latents) - sum(1 for f in out if f.severity == "error" and tp.decl(f.subject) in tp.latents)
    n_latents -= sum(1 for s in skipped if isinstance(tp.decl(s), T.Latent))
    if n_latents > 0 and not any(f.severity == "error" for f in out):
        out.append(Finding("reconstruction", "ok", tp.name,
                           f"All {n_latents} latents match their recomputation (max abs error "
                           f"{num(worst_latent[0])}" + (f", at {worst_latent[1]})." if worst_latent[1] else ").")))
    if skipped:
        out.append(Finding("reconstruction", "info", skipped[0],
                           f"{', '.join(skipped)} " + ("uses an mlp block and was not recomputed: pass the params to "
                                                        "check it." if len(skipped) == 1 else
                                                        "use mlp blocks and were not recomputed: pass the params "
                                                        "to check them.")))
    if ctx.steps.metadata.get("actions") == "mean":
        for a in tp.actions:
            col = ctx.steps.columns.get("action." + a.name)
            if col is None:
                continue
            err, bad = _errors(col, ctx.logged[a.name])
            if bad.any():
                row = int(np.flatnonzero(bad.any(axis=1))[0])
                out.append(Finding("reconstruction", "error", a.name,
                                   f"action.{a.name} differs from mean.{a.name} at {pct(bad.any(axis=1).mean())} of "
                                   f"steps (first at {ctx.steps.where(row)}) though the trace says the actions "
                                   f"executed were the means."))
    return CheckOut(out)


# ---- observation ranges -----------------------------------------------------------------------------


def check_obs_range(ctx: Context) -> CheckOut:
    out, checked = [], 0
    for o in ctx.tp.obs:
        v = ctx.obs[o.name].reshape(ctx.B, -1)
        nonfinite = ~np.isfinite(v)
        if nonfinite.any():
            row = int(np.flatnonzero(nonfinite.any(axis=1))[0])
            out.append(Finding("obs_range", "error", o.name,
                               f"Observation {o.name} is not finite at {pct(nonfinite.any(axis=1).mean())} of steps, "
                               f"first at {ctx.steps.where(row)}."))
        if not (math.isfinite(o.lo) or math.isfinite(o.hi)):
            continue
        checked += 1
        with np.errstate(invalid="ignore"):
            excess = np.maximum(o.lo - v, v - o.hi)
        excess = np.where(np.isfinite(excess), excess, -np.inf)
        rows = (excess > 0).any(axis=1)
        if rows.any():
            row, k = np.unravel_index(int(np.argmax(excess)), excess.shape)
            out.append(Finding("obs_range", "warning", o.name,
                               f"Observation {o.name} leaves its declared range [{num(o.lo)}, {num(o.hi)}] at "
                               f"{int(rows.sum())} of {ctx.B} steps ({pct(rows.mean())}), worst "
                               f"{o.name}{element(o.type.shape, k)} = {num(v[row, k])} at {ctx.steps.where(row)}."))
    if checked and not out:
        out.append(Finding("obs_range", "ok", ctx.tp.name,
                           f"All {checked} observations with a declared range stay inside it at every step."))
    return CheckOut(out)


# ---- branches -----------------------------------------------------------------------------------


def _branch_points(tp: T.TypedProgram) -> list[tuple[str, str, T.TExpr]]:
    """(owner node, kind, expression) for every clip, relu, min/max, if/where and comparison."""
    found: list[tuple[str, str, T.TExpr]] = []
    conds: set[int] = set()

    def walk(owner: str, e: T.TExpr) -> None:
        if isinstance(e, T.Apply) and e.fn in ("clip", "relu", "min", "max"):
            found.append((owner, "minmax" if e.fn in ("min", "max") else e.fn, e))
        elif isinstance(e, T.Select):
            found.append((owner, "select", e))
            conds.add(id(e.cond))
        elif isinstance(e, T.Binary) and e.op in COMPARISONS and id(e) not in conds:
            found.append((owner, "compare", e))
        for c in T.children(e):
            walk(owner, c)

    for node in tp.nodes:
        walk(node.name, node.expr)
        if isinstance(node, T.Action) and node.std is not None:
            walk(node.name, node.std)
    return [f for f in found if not (f[1] == "compare" and id(f[2]) in conds)]


def _operands(kind: str, e: T.TExpr) -> list[T.TExpr]:
    return {"clip": lambda: list(e.args), "relu": lambda: [e.args[0]], "minmax": lambda: list(e.args),
            "select": lambda: [e.cond], "compare": lambda: [e]}[kind]()


def _aligned(v: np.ndarray, t: T.Type, nd: int) -> np.ndarray:
    return v.reshape((v.shape[0],) + (1,) * (nd - t.ndim) + t.shape)


def _judge(ctx: Context, owner: str, kind: str, e: T.TExpr, vals: list[np.ndarray]) -> Optional[Finding]:
    text, n = source_text(ctx.tp, e.span), ctx.B
    if kind == "clip":
        nd = e.type.ndim
        x, lo, hi = (_aligned(v, a.type, nd) for v, a in zip(vals, e.args))
        low, high = np.broadcast_arrays(x < lo, x > hi)
        f_lo, f_hi = float(low.mean()), float(high.mean())
        fractions = f"below {pct(f_lo)}, above {pct(f_hi)}"
        if f_lo + f_hi >= 1:
            return Finding("branches", "warning", owner,
                           f"{text} in {owner} is saturated at every step ({fractions}), so what it clips has no "
                           f"effect on {owner}.")
        if f_lo + f_hi == 0:
            return Finding("branches", "info", owner,
                           f"{text} in {owner} never clips over the {n} steps (its input stays in "
                           f"[{num(np.nanmin(x))}, {num(np.nanmax(x))}]).")
        return Finding("branches", "ok", owner, f"{text} in {owner} clips at {pct(f_lo + f_hi)} of steps ({fractions}).")
    if kind == "relu":
        x = vals[0]
        pos = float((x > 0).mean())
        if pos == 0:
            return Finding("branches", "warning", owner,
                           f"{text} in {owner} is never positive over the {n} steps (its input stays in "
                           f"[{num(np.nanmin(x))}, {num(np.nanmax(x))}]), so it is 0 at every step.")
        if pos == 1:
            return Finding("branches", "info", owner, f"{text} in {owner} is positive at every step: it acts as "
                                                      f"the identity.")
        return Finding("branches", "ok", owner, f"{text} in {owner} is positive at {pct(pos)} of steps.")
    if kind == "select":
        true = float(np.asarray(vals[0], bool).mean())
        if true in (0.0, 1.0):
            dead = "else" if true == 1 else "then"
            return Finding("branches", "warning", owner,
                           f"The condition {source_text(ctx.tp, e.cond.span)} in {owner} is "
                           f"{'always true' if true else 'always false'} over the {n} steps: the {dead} branch "
                           f"never runs.")
        return Finding("branches", "ok", owner, f"The condition {source_text(ctx.tp, e.cond.span)} in {owner} "
                                                f"holds at {pct(true)} of steps.")
    if kind == "compare":
        true = float(np.asarray(vals[0], bool).mean())
        if true in (0.0, 1.0):
            return Finding("branches", "info", owner, f"{text} in {owner} is {'always true' if true else 'always false'}"
                                                      f" over the {n} steps.")
        return None
    nd = e.type.ndim
    a, b = np.broadcast_arrays(*(_aligned(v, x.type, nd) for v, x in zip(vals, e.args)))
    first = float((a <= b).mean() if e.fn == "min" else (a >= b).mean())
    second = float((b <= a).mean() if e.fn == "min" else (b >= a).mean())
    if first == 1 or second == 1:
        side = source_text(ctx.tp, (e.args[0] if first == 1 else e.args[1]).span, 30)
        return Finding("branches", "info", owner, f"{text} in {owner} takes {side} at every step.")
    return None


def check_branches(ctx: Context) -> CheckOut:
    """Sub-expressions evaluated on the logged states: which way each branch went."""
    points = [p for p in _branch_points(ctx.tp) if ctx.can_eval(p[2])]
    exprs = [x for _, kind, e in points for x in _operands(kind, e)]
    bounded = [a for a in ctx.tp.actions if (math.isfinite(a.lo) or math.isfinite(a.hi)) and ctx.can_eval(a.expr)]
    values = ctx.eval_exprs(exprs + [a.expr for a in bounded])
    out, i = [], 0
    for owner, kind, e in points:
        k = len(_operands(kind, e))
        with np.errstate(invalid="ignore"):
            f = _judge(ctx, owner, kind, e, values[i:i + k])
        i += k
        if f is not None:
            out.append(f)
    for a, mean in zip(bounded, values[i:]):
        with np.errstate(invalid="ignore"):
            low, high = float((mean < a.lo).mean()), float((mean > a.hi).mean())
        if low + high >= 1:
            out.append(Finding("branches", "warning", a.name,
                               f"The mean of action {a.name} lies outside its range [{num(a.lo)}, {num(a.hi)}] at every "
                               f"step (below {pct(low)}, above {pct(high)}), so the action sits on its bounds."))
        elif low + high > 0:
            out.append(Finding("branches", "ok", a.name, f"The mean of action {a.name} is clipped to its range at "
                                                         f"{pct(low + high)} of steps (below {pct(low)}, above "
                                                         f"{pct(high)})."))
    return CheckOut(out)


# ---- summary statistics ------------------------------------------------------------------------------

QUANTILES = (0.05, 0.5, 0.95)


def _stats(v: np.ndarray) -> dict:
    flat = np.asarray(v).reshape(-1)
    if flat.dtype == bool:
        return {"true": float(flat.mean()) if flat.size else math.nan}
    finite = flat[np.isfinite(flat)]
    out = {"nonfinite": float(1 - finite.size / flat.size) if flat.size else 0.0}
    if finite.size:
        q = np.quantile(finite, QUANTILES)
        out.update(mean=float(finite.mean()), std=float(finite.std()), min=float(finite.min()),
                   q05=float(q[0]), q50=float(q[1]), q95=float(q[2]), max=float(finite.max()))
    return out


def _row(name: str, s: dict) -> str:
    if "true" in s:
        return f"  {name:<16} bool: true at {pct(s['true'])} of steps"
    if "mean" not in s:
        return f"  {name:<16} no finite value"
    cells = "".join(f"{num(s[k]):>10}" for k in ("mean", "std", "min", "q05", "q50", "q95", "max"))
    return f"  {name:<16}{cells}" + (f"  nonfinite {pct(s['nonfinite'])}" if s["nonfinite"] else "")


def check_latents(ctx: Context) -> CheckOut:
    """Mean, std, min, quantiles, max and the non-finite fraction of every latent, action mean
    and state (its value at the start of each step)."""
    out, stats, rows = [], {}, []
    named = [(x.name, x.type, "latent") for x in ctx.tp.latents] + [(a.name, a.type, "action") for a in ctx.tp.actions]
    named += [(st.name, st.type, "state") for st in ctx.tp.states if st.name in ctx.states]
    for name, t, kind in named:
        s = stats[name] = _stats(ctx.states[name] if kind == "state" else ctx.logged[name])
        label = (name if kind == "latent" else f"{name} ({'mean' if kind == 'action' else kind})") + \
            (str(list(t.shape)) if t.shape else "")
        rows.append(_row(label, s))
        if "true" in s:
            sev = "warning" if s["true"] in (0.0, 1.0) else "ok"
            out.append(Finding("latents", sev, name, f"{name} is true at {pct(s['true'])} of the {ctx.B} steps."))
            continue
        if "mean" not in s:
            out.append(Finding("latents", "error", name, f"{name} is not finite at any of the {ctx.B} steps."))
            continue
        desc = (f"mean {num(s['mean'])}, std {num(s['std'])}, min {num(s['min'])}, q05 {num(s['q05'])}, median "
                f"{num(s['q50'])}, q95 {num(s['q95'])}, max {num(s['max'])}")
        if s["nonfinite"]:
            out.append(Finding("latents", "error", name, f"{name} is not finite at {pct(s['nonfinite'])} of values "
                                                         f"({desc} over the rest)."))
        elif s["max"] == s["min"] and ctx.B > 1:
            out.append(Finding("latents", "warning", name, f"{name} is constant ({num(s['min'])}) over all {ctx.B} "
                                                           f"steps."))
        else:
            out.append(Finding("latents", "ok", name, f"{name}: {desc}."))
    header = f"  {'name':<16}" + "".join(f"{k:>10}" for k in ("mean", "std", "min", "q05", "q50", "q95", "max"))
    table = f"statistics over {ctx.B} steps:\n" + "\n".join([header] + rows)
    return CheckOut(out, (("latents", table),), {"latent_stats": stats})


__all__ = ["check_reconstruction", "check_obs_range", "check_branches", "check_latents"]

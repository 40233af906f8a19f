"""The built-in checks of `polc.runtime.diagnostics`, one function per check.

Each check takes the `Context` (the program, the trace as float64 arrays, the params)
and returns a `CheckOut`: its findings, optional pre-rendered tables, and the numbers
behind them. Every value a check needs that is not logged is computed with the NumPy
reference interpreter (`polc.analysis.reference.run`, batched over the trace's rows).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from polc.analysis import reference
from polc.check import typed as T
from polc.check.typed import TypedProgram
from polc.text import number

from .base import Finding, Params, Steps, state_values

REL_TOL, ABS_TOL = 1e-3, 1e-4  # reconstruction: float32 trace against the float64 reference
AT_BOUND = 0.02  # a weight within 2% of its initial distance from a bound sits on it


class CheckOut(NamedTuple):
    findings: list[Finding]
    tables: tuple[tuple[str, str], ...] = ()  # (check, pre-rendered block)
    data: Mapping[str, Any] = {}  # numbers for --json, never mutated


def num(x: Any) -> str:
    """A number for a sentence: polc.text.number with 3 significant digits."""
    return number(x, 3)


def pct(frac: float) -> str:
    p = 100.0 * frac
    if p == 0 or p >= 99.95 and frac >= 1:
        return f"{p:.0f}%"
    return f"{p:.2g}%" if p < 1 else f"{p:.3g}%" if p < 10 else f"{p:.0f}%"


def element(shape: tuple[int, ...], flat: int) -> str:
    """'[2, 3]' for flat index 11 of a (4, 4) value; '' for a scalar."""
    if not shape:
        return ""
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


def source_text(tp: TypedProgram, span: Any, limit: int = 48) -> str:
    """The source text of a span on one line, shortened to `limit` characters."""
    lines = tp.source.splitlines()
    try:
        if span.line == span.end_line:
            text = lines[span.line - 1][span.column - 1:span.end_column - 1]
        else:
            parts = [lines[span.line - 1][span.column - 1:]] + lines[span.line:span.end_line - 1]
            text = " ".join(parts + [lines[span.end_line - 1][:span.end_column - 1]])
    except (IndexError, AttributeError):
        return "?"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _has_mlp(e: T.TExpr) -> bool:
    return bool(T.mlps_in(e))


@dataclass
class Context:
    """Everything a check reads. Arrays are float64 (bool for bool values), (B, *shape)."""

    tp: TypedProgram
    steps: Steps
    params: Params
    obs: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]  # the logged weights, row by row
    logged: dict[str, np.ndarray]  # latents and action means (clipped) as logged, by .pol name
    fitted: dict[str, np.ndarray]  # one value per weight: the params', else the trace's first row
    states: dict[str, np.ndarray] = field(default_factory=dict)  # each state at the start of each row
    untraced: tuple[str, ...] = ()  # states with no trace column: stepped from the logged observations
    _full: Any = field(default=None, repr=False)

    @staticmethod
    def of(tp: TypedProgram, steps: Steps, params: Params) -> "Context":
        def arr(col: str, boolean: bool = False) -> np.ndarray:
            v = steps.columns[col]
            return v.astype(bool) if boolean else v.astype(np.float64)

        obs = {o.name: arr("obs." + o.name) for o in tp.obs}
        weights = {w.name: arr("weight." + w.name) for w in tp.weights}
        logged = {x.name: arr("latent." + x.name, x.type.base == T.BOOL) for x in tp.latents}
        logged.update({a.name: arr("mean." + a.name) for a in tp.actions})
        fitted = dict(params.weights) if params.weights is not None else {k: v[0] for k, v in weights.items()}
        states, untraced = state_values(tp, steps, obs, weights, params.mlps)
        return Context(tp, steps, params, obs, weights, logged, fitted, states, tuple(untraced))

    @property
    def B(self) -> int:
        return self.steps.rows

    @property
    def mlp_params(self) -> Optional[dict]:
        return self.params.mlps

    def can_eval(self, e: T.TExpr) -> bool:
        return self.mlp_params is not None or not _has_mlp(e)

    def value(self, name: str) -> np.ndarray:
        """The logged value of any name: obs, weight, latent, an action's clipped mean, or a state
        (its value at the start of the step)."""
        for src in (self.obs, self.weights, self.logged, self.states):
            if name in src:
                return src[name]
        raise KeyError(name)

    def eval_exprs(self, exprs: list[T.TExpr]) -> list[np.ndarray]:
        """Each expression evaluated at every row, every name it reads taken from the trace.

        Done with `reference.run` on a small program whose inputs are those names and
        whose latents are the expressions."""
        if not exprs:
            return []
        names = sorted(set().union(*(T.refs(e) for e in exprs)))
        inputs = tuple(T.Obs(n, self.tp.decl(n).type, -math.inf, math.inf, None, self.tp.decl(n).span)
                       for n in names)
        nodes = tuple(T.Latent(f"_e{i}", e.type, e, None, e.span) for i, e in enumerate(exprs))
        prog = dataclasses.replace(self.tp, obs=inputs, weights=(), latents=nodes, actions=(), intents=(),
                                   nodes=nodes, mlps=tuple(m for e in exprs for m in T.mlps_in(e)))
        prog = dataclasses.replace(prog, states=())  # a state read here is an input like the others
        out = reference.run(prog, {}, {n: self.value(n) for n in names}, self.mlp_params or {}, batch=self.B)
        return [out.values[f"_e{i}"] for i in range(len(exprs))]

    def pruned(self, target: str) -> TypedProgram:
        """The program cut down to `target` and what it is computed from."""
        from polc.analysis.counterexample import ancestors

        keep = ancestors(self.tp, target) | {target}
        nodes = tuple(n for n in self.tp.nodes if n.name in keep)
        return dataclasses.replace(self.tp, nodes=nodes, latents=tuple(x for x in self.tp.latents if x.name in keep),
                                   actions=tuple(a for a in self.tp.actions if a.name in keep), intents=())

    def run(self, prog: TypedProgram, overrides: Optional[dict] = None) -> reference.Outputs:
        """`prog` recomputed at every row from the logged observations, weights and states."""
        return reference.run(prog, self.weights, self.obs, self.mlp_params or {}, overrides, batch=self.B,
                             state=self.states or None)

    def full(self) -> Optional[reference.Outputs]:
        """Every latent and action recomputed from the logged obs and weights (None when an
        mlp block has no params)."""
        if self._full is None and (self.mlp_params is not None or not self.tp.mlps):
            self._full = self.run(self.tp)
        return self._full


# ---- trace -----------------------------------------------------------------------------------


def check_trace(ctx: Context) -> CheckOut:
    from ..io.params import structure_sha256

    tp, meta, out = ctx.tp, ctx.steps.metadata, []
    policy = meta.get("policy") if isinstance(meta.get("policy"), dict) else {}  # a table's metadata is input
    recorded = policy.get("structure_sha256")
    if isinstance(recorded, str) and recorded and recorded != structure_sha256(tp):
        out.append(Finding("trace", "warning", tp.name,
                           f"The trace was made by a policy {policy.get('name', '?')} whose dataflow differs from "
                           f"{tp.name}'s (structure hash {recorded[:12]} vs {structure_sha256(tp)[:12]}), so "
                           f"recomputed values may not match."))
    if ctx.steps.complete is False:
        out.append(Finding("trace", "info", tp.name, f"The trace is partial: its run was interrupted after "
                                                     f"{len(np.unique(ctx.steps.episode))} finished episode(s)."))
    return CheckOut(out)


# ---- weights -----------------------------------------------------------------------------------


def _close(a: np.ndarray, b: np.ndarray, rel: float = 1e-6) -> np.ndarray:
    return np.abs(a - b) <= rel * (1.0 + np.abs(b))


def check_weights(ctx: Context) -> CheckOut:
    out: list[Finding] = []
    episodes = np.unique(ctx.steps.episode)
    for w in ctx.tp.weights:
        v = ctx.weights[w.name].reshape(ctx.B, -1)
        bad = ~np.isfinite(v)
        if bad.any():
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            out.append(Finding("weights", "error", w.name, f"Weight {w.name} is not finite at "
                                                           f"{pct(bad.any(axis=1).mean())} of steps, first at "
                                                           f"{ctx.steps.where(row)}."))
            continue
        drift = []
        for e in episodes:
            rows = np.flatnonzero(ctx.steps.episode == e)
            moved = ~_close(v[rows], v[rows[0]][None]).all(axis=1)
            if moved.any():
                k = int(np.argmax(np.ptp(v[rows], axis=0)))
                drift.append((int(e), rows, k, int(moved.sum())))
        if drift:
            e, rows, k, n = drift[0]
            col = v[rows, k]
            out.append(Finding("weights", "error", w.name,
                               f"Weight {w.name}{element(w.type.shape, k)} changes within episode {e}: from "
                               f"{num(col[0])} it moves at {n} of {len(rows)} steps, over [{num(col.min())}, "
                               f"{num(col.max())}]" + (f", and in {len(drift) - 1} other episode(s)" if len(drift) > 1
                                                       else "") + "; weights must be constant in a rollout."))
        else:
            firsts = np.stack([v[np.flatnonzero(ctx.steps.episode == e)[0]] for e in episodes])
            if not _close(firsts, firsts[0][None]).all():
                k = int(np.argmax(np.ptp(firsts, axis=0)))
                out.append(Finding("weights", "warning", w.name,
                                   f"Weight {w.name}{element(w.type.shape, k)} is constant within each episode but "
                                   f"differs between episodes ({num(firsts[:, k].min())} to {num(firsts[:, k].max())})"
                                   f": the trace mixes runs with different params."))
        outside = (v < w.lo) | (v > w.hi)
        if outside.any():
            k = int(np.flatnonzero(outside.any(axis=0))[0])
            out.append(Finding("weights", "error", w.name,
                               f"Weight {w.name}{element(w.type.shape, k)} = {num(v[0, k])} lies outside its "
                               f"constraint [{num(w.lo)}, {num(w.hi)}]."))
        if ctx.params.weights is not None:
            given = np.asarray(ctx.params.weights[w.name], np.float64).reshape(-1)
            differ = ~_close(v[0], given, 1e-5)
            if differ.any():
                k = int(np.flatnonzero(differ)[0])
                out.append(Finding("weights", "warning", w.name,
                                   f"Weight {w.name}{element(w.type.shape, k)} is {num(v[0, k])} in the trace but "
                                   f"{num(given[k])} in {ctx.params.source}: the trace was not made with these params."))
    if not out:
        same = f" and equal to those in {ctx.params.source}" if ctx.params.weights is not None else ""
        out.append(Finding("weights", "ok", ctx.tp.name,
                           f"All {len(ctx.tp.weights)} weights are constant within each of the {len(episodes)} "
                           f"episode(s), inside their constraints{same}."))
    return CheckOut(out)


class AtBound(NamedTuple):
    """One element of a fitted weight that sits on a bound (`at_bounds`)."""
    index: int      # the element, in row-major order (0 for a scalar)
    side: str       # "lower" or "upper"
    bound: float
    value: float    # the fitted value
    init: float     # the declared value
    share: float    # its distance to the bound over the initial distance (<= AT_BOUND)


def at_bounds(w: T.Weight, value: Any) -> list[AtBound]:
    """The elements of weight `w`'s fitted (constrained) `value` that sit on one of its bounds:
    within AT_BOUND of the declared value's distance from it (half the range when the value was
    declared on the bound). An element left at its declared value was not fitted, so is not one."""
    v = np.asarray(value, np.float64).reshape(-1)
    init = np.broadcast_to(np.asarray(w.init, np.float64), w.type.shape).reshape(-1)
    out = []
    for k in range(min(v.size, init.size)):
        for bound, side in ((w.lo, "lower"), (w.hi, "upper")):
            if not math.isfinite(bound):
                continue
            ref = abs(init[k] - bound)
            if ref == 0 and math.isfinite(w.lo) and math.isfinite(w.hi):
                ref = 0.5 * (w.hi - w.lo)
            ref = ref if ref > 0 else 1.0
            dist = abs(v[k] - bound)
            if dist <= AT_BOUND * ref and v[k] != init[k]:
                out.append(AtBound(k, side, float(bound), float(v[k]), float(init[k]), float(dist / ref)))
                break
    return out


def pinned_sentence(w: T.Weight, b: AtBound) -> str:
    """`kp = 0.3 sits on its upper bound 0.3 (0.01% of the way to its initial value 0.8): the
    demonstration pulls it above 0.3, or the term does not help` (no final full stop)."""
    other = ("below " if b.side == "lower" else "above ") + num(b.bound)
    return (f"{w.name + element(w.type.shape, b.index)} = {num(b.value)} sits on its {b.side} bound {num(b.bound)} "
            f"({pct(b.share)} of the way to its initial value {num(b.init)}): the demonstration pulls it {other}, "
            f"or the term does not help")


def check_signs(ctx: Context) -> CheckOut:
    """Constrained weights that the fit pushed onto a bound: the data want them past it."""
    out: list[Finding] = []
    constrained = [w for w in ctx.tp.weights if math.isfinite(w.lo) or math.isfinite(w.hi)]
    for w in constrained:
        for b in at_bounds(w, ctx.fitted[w.name]):
            out.append(Finding("signs", "warning", w.name, pinned_sentence(w, b) + "."))
    if constrained and not out:
        out.append(Finding("signs", "ok", ctx.tp.name, f"All {len(constrained)} constrained weights lie away from "
                                                       f"their bounds."))
    return CheckOut(out)


# ---- intents on the data -------------------------------------------------------------------------


def _static_with_fitted(ctx: Context, it: T.MonoIntent) -> str:
    from polc.analysis.abstract import CONST, run_pass
    from polc.analysis.intervals import Interval

    restrict = {w.name: Interval.point(np.broadcast_to(np.asarray(ctx.fitted[w.name], float), w.type.shape))
                for w in ctx.tp.weights if w.name != it.var}
    try:
        d = run_pass(ctx.tp, var=it.var, restrict=restrict).env[it.target].dir
    except Exception:  # noqa: BLE001 - the static side is a remark, never a failure of the report
        return ""
    if d in (CONST, it.direction):
        return "the static analysis proves it with the fitted weights"
    return "the static analysis cannot prove it with the fitted weights"


def _perturbations(var_value: np.ndarray, is_bool: bool):
    """(k, low, high, h) per element k of the variable: values moved down and up."""
    B = var_value.shape[0]
    flat = var_value.reshape(B, -1)
    for k in range(flat.shape[1]):
        lo, hi = flat.astype(np.float64).copy(), flat.astype(np.float64).copy()
        if is_bool:
            lo[:, k], hi[:, k], h = 0.0, 1.0, 0.5
            yield k, lo.astype(bool).reshape(var_value.shape), hi.astype(bool).reshape(var_value.shape), h
            continue
        col = flat[:, k][np.isfinite(flat[:, k])]
        spread = float(np.subtract(*np.quantile(col, [0.95, 0.05]))) if col.size else 0.0
        h = 1e-3 * (spread if spread > 0 else max(1.0, float(np.median(np.abs(col))) if col.size else 1.0))
        lo[:, k] -= h
        hi[:, k] += h
        yield k, lo.reshape(var_value.shape), hi.reshape(var_value.shape), h


def _mono_on_data(ctx: Context, it: T.MonoIntent) -> Finding:
    prog = ctx.pruned(it.target)
    subject, B = it.target, ctx.B
    if ctx.mlp_params is None and any(_has_mlp(n.expr) for n in prog.nodes):
        return Finding("intents", "info", subject, f"'{it.text}' was not checked on the data: {it.target} "
                                                   f"depends on an mlp block, whose params were not given.")
    base = ctx.run(prog)
    decl = ctx.tp.decl(it.var)
    var_value = (ctx.obs.get(it.var) if it.var in ctx.obs else ctx.weights.get(it.var) if it.var in ctx.weights
                 else base.values[it.var])
    target = np.asarray(base.values[it.target], np.float64).reshape(B, -1)
    tol = 1e-9 * (1.0 + np.abs(target))
    sign = 1.0 if it.direction == "increasing" else -1.0
    wrong_by = np.zeros(B)  # the largest wrong-way slope at each row
    responds = np.zeros(B, bool)
    slopes: list[np.ndarray] = []
    nonfinite = np.zeros(B, bool)
    for _, low, high, h in _perturbations(var_value, decl.type.base == T.BOOL):
        up = np.asarray(ctx.run(prog, {it.var: high}).values[it.target], np.float64).reshape(B, -1)
        dn = np.asarray(ctx.run(prog, {it.var: low}).values[it.target], np.float64).reshape(B, -1)
        d = up - dn
        nonfinite |= ~np.isfinite(d).all(axis=1)
        d = np.where(np.isfinite(d), d, 0.0)
        slope = d / (2 * h)
        wrong = sign * d < -tol
        wrong_by = np.maximum(wrong_by, np.where(wrong, -sign * slope, 0.0).max(axis=1))
        responds |= (np.abs(d) > tol).any(axis=1)
        slopes.append(slope[np.abs(d) > tol])
    static = _static_with_fitted(ctx, it)
    n_wrong = int((wrong_by > 0).sum())
    all_slopes = np.concatenate(slopes) if slopes else np.zeros(0)
    median = f"median slope {num(np.median(all_slopes))}" if all_slopes.size else "no slope"
    tail = (f"; {it.target} is not finite at {pct(nonfinite.mean())} of states" if nonfinite.any() else "") + \
        (f"; {static}" if static else "")
    if n_wrong:
        row = int(np.argmax(wrong_by))
        verb = "rises" if it.direction == "decreasing" else "falls"
        return Finding("intents", "error", subject,
                       f"'{it.text}' is refuted on the data: {it.target} {verb} with {it.var} at {n_wrong} of {B} "
                       f"logged states ({pct(n_wrong / B)}), by up to {num(-sign * wrong_by[row])} per unit of "
                       f"{it.var} at {ctx.steps.where(row)}; it responds at {pct(responds.mean())} of states "
                       f"({median}){tail}.")
    if not responds.any():
        return Finding("intents", "info", subject,
                       f"'{it.text}' is untested by the data: {it.target} does not respond to {it.var} at any of the "
                       f"{B} logged states (a saturated clip or relu, or a zero weight, holds it){tail}.")
    return Finding("intents", "ok", subject,
                   f"'{it.text}' holds on the data: never violated at the {B} logged states, {it.target} responds "
                   f"to {it.var} at {pct(responds.mean())} of them ({median}){tail}.")


def _range_on_data(ctx: Context, it: T.RangeIntent) -> Finding:
    v = np.asarray(ctx.logged[it.target], np.float64).reshape(ctx.B, -1)
    below = v <= it.lo if it.lo_strict else v < it.lo
    above = v >= it.hi if it.hi_strict else v > it.hi
    bad = below | above | ~np.isfinite(v)
    rows = bad.any(axis=1)
    finite = v[np.isfinite(v)]
    span = f"min {num(finite.min())}, max {num(finite.max())}" if finite.size else "no finite value"
    if rows.any():
        excess = np.where(below, it.lo - v, np.where(above, v - it.hi, np.where(bad, np.inf, 0.0)))
        row, k = np.unravel_index(int(np.argmax(excess)), excess.shape)
        return Finding("intents", "error", it.target,
                       f"'{it.text}' is refuted on the data: {it.target} leaves the range at {int(rows.sum())} of "
                       f"{ctx.B} steps ({pct(rows.mean())}), worst {num(v[row, k])} at {ctx.steps.where(row)} "
                       f"({span}).")
    return Finding("intents", "ok", it.target, f"'{it.text}' holds at all {ctx.B} logged steps ({span}).")


def check_intents(ctx: Context) -> CheckOut:
    out = [(_mono_on_data(ctx, it) if isinstance(it, T.MonoIntent) else _range_on_data(ctx, it))
           for it in ctx.tp.intents]
    return CheckOut(out)


__all__ = ["Context", "CheckOut", "check_trace", "check_weights", "check_signs", "check_intents", "num", "pct",
           "element", "source_text"]

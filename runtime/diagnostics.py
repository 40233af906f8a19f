"""Built-in diagnostics of a rollout trace: the checks an analyst writes every time, done once.

    report = builtin_report(program, "trace.parquet", params="fit.params", demo="demo.parquet")
    report.findings          # (Finding(check, severity, subject, message), ...)
    print(report.text())     # compact plain text for a person or an LLM, problems first

No LLM and no JAX: everything is recomputed with the NumPy reference interpreter
(`polc.reference`) on the logged states. The checks, in report order:

    trace           the trace belongs to the program (columns, structure hash); partial runs
    weights         every weight.* column constant within each episode (and across them);
                    inside its constraint; equal to the params given
    signs           constrained weights the fit pushed against their bound
    intents         every `expect` checked ON THE DATA (see below)
    reconstruction  every latent and action mean recomputed from the logged observations
                    and weights, compared with the logged columns (max abs error)
    obs_range       observations outside their declared ranges (fraction of steps, worst value)
    branches        clip() always / never saturated, relu() never positive, if/where
                    conditions and comparisons constant, min/max with one side never chosen,
                    action means outside the action's range
    latents         summary statistics of every latent and action mean
    demo            the policy's actions against the demonstration's at matched states

Intents on the data. For `expect T decreasing in V` the partial effect of V on T is
measured at every logged state with the reference interpreter: the graph is cut at V
(as the static analysis does), V is moved by +-h (h = 1e-3 of V's spread on the trace)
with everything else at its logged value, and T is recomputed. A monotone T can never
move the wrong way between V - h and V + h, however it bends (clip, relu, kinks), so
any state where it does refutes the intent on the data; states where T does not move
(a saturated clip) are counted as not responding. This was chosen over a rank
correlation of V and T along the trace, which confounds V with everything that moves
with it. The message also says whether the static analysis proves the intent once the
weights are fixed to their fitted values. A range intent (`expect T in [a, b]`) is
checked on the logged values of T.

Severities: "error" (a claim or an invariant is false: non-finite values, a mismatch
on reconstruction, an intent refuted on the data), "warning" (likely a problem: a
weight at its bound, a dead branch, observations out of range, a drifting weight),
"info" (worth knowing), "ok" (the check passed).

Inputs. `program`: a `polc.Program` or a `TypedProgram`. `trace`, `demo`: a Parquet path
or a pandas DataFrame in the step-table format (`polc.runtime.table`). `params`: None
(weights from the trace's weight.* columns; mlp blocks then cannot be recomputed), a
params file path, a params file's parsed JSON, or the runtime's params dict
(UNCONSTRAINED values by weight name plus flax trees by mlp key, as `policy.init`,
`fit` and `load_params` give). Bad inputs raise `DiagnosticsError` with one sentence.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple, Optional, Union

import numpy as np

from polc.typed import TypedProgram

SEVERITIES = ("error", "warning", "info", "ok")
CHECKS = ("trace", "weights", "signs", "intents", "reconstruction", "obs_range", "branches", "latents", "demo")
TEXT_BUDGET = 4000  # characters of Report.text()


class DiagnosticsError(Exception):
    """The inputs cannot be analysed (unreadable trace, a trace of another policy, ...)."""


@dataclass(frozen=True)
class Finding:
    """One result. `subject` is a name from the .pol source (or the policy's name);
    `message` is one sentence with the numbers."""

    check: str
    severity: str  # "ok" | "info" | "warning" | "error"
    subject: str
    message: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Report:
    """What `builtin_report` found. `findings` are in check order; `header` says what
    was analysed; `tables` are pre-rendered blocks by check (the latent statistics, the
    worst demo states); `data` holds the numbers behind them, JSON-able."""

    findings: tuple[Finding, ...]
    header: str = ""
    tables: tuple[tuple[str, str], ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def problems(self) -> tuple[Finding, ...]:
        """Errors, then warnings, each in check order."""
        return tuple(f for sev in ("error", "warning") for f in self.findings if f.severity == sev)

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}

    def to_json(self) -> dict:
        return {"header": self.header, "counts": self.counts(),
                "findings": [f.to_json() for f in self.findings], "data": _jsonable(self.data)}

    def text(self, budget: int = TEXT_BUDGET) -> str:
        """Plain text, problems first, grouped by check; about `budget` characters at most."""
        from .diagnostics_text import render

        return render(self, budget)


# ---- inputs -------------------------------------------------------------------------------


class Steps(NamedTuple):
    """A step table as arrays: `columns[name]` has shape (rows, *shape)."""

    name: str  # the path, or "<DataFrame>"
    columns: dict[str, np.ndarray]
    metadata: dict
    complete: Optional[bool]
    rows: int
    episode: np.ndarray  # (rows,) int
    step: np.ndarray  # (rows,) int

    def where(self, row: int) -> str:
        """'episode 0 step 212' for a row."""
        return f"episode {int(self.episode[row])} step {int(self.step[row])}"


def _shapes_wanted(tp: TypedProgram) -> dict[str, tuple[int, ...]]:
    out = {f"obs.{o.name}": o.type.shape for o in tp.obs}
    out.update({f"latent.{x.name}": x.type.shape for x in tp.latents})
    out.update({f"weight.{w.name}": w.type.shape for w in tp.weights})
    for a in tp.actions:
        out[f"mean.{a.name}"] = out[f"action.{a.name}"] = a.type.shape
    return out


def _from_frame(df: Any, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    columns = {}
    for name in df.columns:
        values = df[name].to_numpy()
        if values.dtype == object:
            try:
                values = np.stack([np.asarray(v, np.float32).reshape(-1) for v in values]) if len(values) else \
                    np.zeros((0, int(np.prod(shapes.get(name, (0,))))), np.float32)
            except (ValueError, TypeError):
                raise DiagnosticsError(f'column "{name}" holds values that are not numbers or equal-sized '
                                       f"arrays") from None
        columns[str(name)] = values
    return columns


def load_steps(source: Union[str, os.PathLike, Any], tp: Optional[TypedProgram], what: str) -> Steps:
    """A trace or demonstration (path or DataFrame) as arrays shaped by `tp`'s declarations."""
    shapes = _shapes_wanted(tp) if tp is not None else {}
    if isinstance(source, (str, os.PathLike)):
        from .table import TableError, read_table

        try:
            table = read_table(os.fspath(source))
            columns = {n: table.column(n) for n in table.columns}
        except TableError as e:
            raise DiagnosticsError(as_sentence(str(e))) from None
        name, metadata, complete = os.fspath(source), table.metadata, table.complete
    elif hasattr(source, "columns") and hasattr(source, "to_numpy"):
        columns, name, metadata, complete = _from_frame(source, shapes), "<DataFrame>", {}, None
        metadata = dict(getattr(source, "attrs", {}).get("polc", {}) or {})
    else:
        raise DiagnosticsError(f"The {what} must be a Parquet path or a pandas DataFrame, "
                               f"not {type(source).__name__}.")
    rows = len(next(iter(columns.values()))) if columns else 0
    for col, want in shapes.items():
        if col not in columns:
            continue
        v = columns[col]
        size = int(np.prod(want, dtype=np.int64))
        if int(np.prod(v.shape[1:], dtype=np.int64)) != size:
            raise DiagnosticsError(f'The {what} column "{col}" holds {int(np.prod(v.shape[1:]))} value(s) per step '
                                   f"but the policy declares {col.split('.', 1)[1]} with shape {list(want)}.")
        columns[col] = v.reshape((rows,) + want)
    episode = columns["episode"].astype(np.int64) if "episode" in columns else np.zeros(rows, np.int64)
    step = columns["step"].astype(np.int64) if "step" in columns else _steps_within(episode)
    return Steps(name, columns, metadata, complete, rows, episode, step)


def as_sentence(text: str) -> str:
    """One sentence: capitalised, ending in exactly one full stop."""
    text = text.strip().rstrip(".")
    return text[:1].upper() + text[1:] + "."


def _steps_within(episode: np.ndarray) -> np.ndarray:
    out = np.zeros(len(episode), np.int64)
    for e in np.unique(episode):
        idx = np.flatnonzero(episode == e)
        out[idx] = np.arange(len(idx))
    return out


def verify_trace_of(tp: TypedProgram, trace: Steps) -> None:
    """Raise `DiagnosticsError` unless `trace` has every column a trace of `tp` has."""
    if trace.rows == 0:
        raise DiagnosticsError(f"The trace {trace.name} has no rows.")
    if not any(c.startswith(("latent.", "weight.", "mean.")) for c in trace.columns) and (tp.latents or tp.weights):
        raise DiagnosticsError(f"{trace.name} has no latent, weight or mean columns: it is a demonstration "
                               f"table, not a rollout trace of policy {tp.name} (make one with `polc rollout`).")
    wanted = [f"obs.{o.name}" for o in tp.obs] + [f"latent.{x.name}" for x in tp.latents] + \
        [f"weight.{w.name}" for w in tp.weights] + [f"mean.{a.name}" for a in tp.actions]
    missing = [c for c in wanted if c not in trace.columns]
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        raise DiagnosticsError(f"The trace {trace.name} does not belong to policy {tp.name}: it has no column "
                               f"{shown} (was it made by another version of the policy?).")


class Params(NamedTuple):
    weights: Optional[dict[str, np.ndarray]]  # constrained, by name; None when not given
    mlps: Optional[dict[str, Any]]  # flax trees by mlp key; None when not given
    source: str


def load_params(params: Any, tp: TypedProgram) -> Params:
    """Constrained weights and mlp trees from any of the accepted `params` forms."""
    from polc import transforms

    if params is None:
        return Params(None, None, "the trace's weight columns")
    source = "the params given"
    if isinstance(params, (str, os.PathLike)):
        from .params import ParamsError, read_params

        try:
            params, source = read_params(os.fspath(params)), os.fspath(params)
        except ParamsError as e:
            raise DiagnosticsError(as_sentence(str(e))) from None
    if not isinstance(params, Mapping):
        raise DiagnosticsError(f"params must be a params file, its JSON or a params dict, not {type(params).__name__}.")
    if "polc_params" in params:  # a params file's JSON: constrained values
        weights = {k: np.asarray(v, np.float64) for k, v in params.get("weights", {}).items()}
        mlps = {k: _arrays(v) for k, v in (params.get("mlps") or {}).items()}
    else:  # the runtime's params: unconstrained
        weights = {}
        for w in tp.weights:
            if w.name in params:
                u = np.asarray(params[w.name], np.float64)
                weights[w.name] = np.asarray(transforms.constrain(u, w.lo, w.hi, np), np.float64)
        mlps = {k: _arrays(v) for k, v in params.items() if tp.decl(k) is None}
    missing = [w.name for w in tp.weights if w.name not in weights]
    wrong = [w.name for w in tp.weights if w.name in weights and weights[w.name].shape != w.type.shape]
    if missing or wrong:
        names = missing or wrong
        what = "missing" if missing else "of another shape"
        raise DiagnosticsError(f"The params in {source} do not fit policy {tp.name}: " +
                               (f"weight {names[0]} is {what}." if len(names) == 1 else
                                f"weights {', '.join(names)} are {what}."))
    return Params(weights, mlps, source)


def _arrays(tree: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: _arrays(v) for k, v in tree.items()}
    return np.asarray(tree, np.float64)


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else str(v)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


# ---- the report -----------------------------------------------------------------------------


def _typed(program: Any) -> TypedProgram:
    if isinstance(program, TypedProgram):
        return program
    tp = getattr(program, "typed", None)
    if isinstance(tp, TypedProgram):
        return tp
    raise DiagnosticsError(f"program must be a polc.Program or a TypedProgram, not {type(program).__name__}.")


def builtin_report(program: Any, trace: Any, params: Any = None, demo: Any = None) -> Report:
    """Run every built-in check on a rollout trace of `program` (see the module docstring).

    Raises `DiagnosticsError` (one sentence) when the trace cannot be read or is not a
    trace of this program, or the params or demonstration do not fit it."""
    from . import diagnostics_checks as C, diagnostics_values as V

    run_order = (C.check_trace, C.check_weights, C.check_signs, C.check_intents, V.check_reconstruction,
                 V.check_obs_range, V.check_branches, V.check_latents)

    tp = _typed(program)
    steps = load_steps(trace, tp, "trace")
    verify_trace_of(tp, steps)
    p = load_params(params, tp)
    demo_steps = load_steps(demo, tp, "demonstration") if demo is not None else None
    ctx = C.Context.of(tp, steps, p)
    findings: list[Finding] = []
    tables: list[tuple[str, str]] = []
    data: dict[str, Any] = {}
    for check in run_order:
        out = check(ctx)
        findings += out.findings
        tables += out.tables
        data.update(out.data)
    if demo_steps is not None:
        from .diagnostics_demo import check_demo

        out = check_demo(ctx, demo_steps)
        findings += out.findings
        tables += out.tables
        data.update(out.data)
    n_ep = len(np.unique(steps.episode))
    header = (f"Diagnostics of policy {tp.name} on {steps.name}: {n_ep} episode{'s' if n_ep != 1 else ''}, "
              f"{steps.rows} steps; weights from {p.source}"
              + (f"; demonstration {demo_steps.name} ({demo_steps.rows} steps)" if demo_steps is not None else "")
              + ".")
    order = {c: i for i, c in enumerate(CHECKS)}
    findings.sort(key=lambda f: order.get(f.check, len(order)))
    return Report(tuple(findings), header, tuple(tables), data)


__all__ = ["Finding", "Report", "DiagnosticsError", "builtin_report", "load_steps", "CHECKS", "SEVERITIES"]

"""What every part of the built-in diagnostics shares (`polc.runtime.diagnostics`):
the severities and checks, `Finding`, the inputs as arrays (`Steps`, `Params`) and
how they are read from a trace, a params file or a DataFrame. Nothing here imports
another module of the package, so every check can import it."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple, Optional, Union

import numpy as np

from polc.check.typed import TypedProgram

SEVERITIES = ("error", "warning", "info", "ok")
CHECKS = ("trace", "weights", "signs", "intents", "reconstruction", "obs_range", "branches", "latents", "states", "echo",
          "demo", "task")
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
    for st in tp.states:  # a state's column: `state.NAME`, or `latent.NAME` (the step's latents hold states)
        out[f"state.{st.name}"] = out[f"latent.{st.name}"] = st.type.shape
    return out


def state_column(steps: "Steps", name: str) -> Optional[str]:
    """The trace column of state `name` (`state.NAME`, else `latent.NAME`), None when not traced."""
    return next((c for c in (f"state.{name}", f"latent.{name}") if c in steps.columns), None)


def state_values(tp: TypedProgram, steps: "Steps", obs: Mapping[str, np.ndarray],
                 weights: Mapping[str, np.ndarray], mlps: Optional[Mapping[str, Any]]) -> tuple[dict, list[str]]:
    """Every state's value at the start of each row, (rows, *shape), and the names of those not
    traced. A traced state is read from its column; the others are stepped with the reference
    interpreter from their initial values at each episode's first row, in step order, on the
    logged observations and weights (the action means they read are the recomputed ones)."""
    from polc.analysis import reference

    values: dict[str, np.ndarray] = {}
    for st in tp.states:
        col = state_column(steps, st.name)
        if col is not None:
            v = steps.columns[col]
            values[st.name] = v.astype(bool) if st.type.base == "bool" else v.astype(np.float64)
    missing = [st.name for st in tp.states if st.name not in values]
    if not missing or (tp.mlps and mlps is None):
        return values, missing
    order = np.lexsort((steps.step, steps.episode))  # rows by episode, then step
    _, first = np.unique(steps.episode[order], return_index=True)
    t_of = np.arange(steps.rows) - np.repeat(first, np.diff(np.append(first, steps.rows)))
    sim = {st.name: np.zeros((steps.rows,) + st.type.shape, bool if st.type.base == "bool" else np.float64)
           for st in tp.states}
    carried: dict[str, np.ndarray] = {}
    episodes_at_prev = steps.episode[:0]
    for t in range(int(t_of.max()) + 1 if steps.rows else 0):
        rows = order[t_of == t]  # the t-th row of every episode that long, in episode order
        if t > 0:  # episodes that ended drop out: keep the carried state of those that go on
            alive = np.isin(episodes_at_prev, steps.episode[rows])
            carried = {k: v[alive] for k, v in carried.items()}
        out = reference.run(tp, {k: v[rows] for k, v in weights.items()}, {k: v[rows] for k, v in obs.items()},
                            dict(mlps or {}), batch=len(rows), state=carried or None, step=True)
        for st in tp.states:
            sim[st.name][rows] = out.values[st.name]
        carried, episodes_at_prev = dict(out.next_state), steps.episode[rows]
    values.update({n: sim[n] for n in missing})
    return values, missing


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
        from ..io.table import TableError, read_table

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
    from polc.analysis import transforms

    if params is None:
        return Params(None, None, "the trace's weight columns")
    from ..io.params import ParamsError, checked_values, read_params

    source = "the params given"
    if isinstance(params, (str, os.PathLike)):
        try:
            params, source = read_params(os.fspath(params)), os.fspath(params)
        except ParamsError as e:
            raise DiagnosticsError(as_sentence(str(e))) from None
    if not isinstance(params, Mapping):
        raise DiagnosticsError(f"params must be a params file, its JSON or a params dict, not {type(params).__name__}.")
    if "polc_params" in params:  # a params file's JSON: constrained values, each checked to be a finite number
        doc = {**params, "weights": params.get("weights") or {}, "mlps": params.get("mlps") or {}}
        if not isinstance(doc["weights"], Mapping) or not isinstance(doc["mlps"], Mapping):
            raise DiagnosticsError(f"The params in {source} are not a params file's JSON (weights and mlps must be "
                                   f"objects by name).")
        try:
            weights, mlps = checked_values(doc, source)
        except ParamsError as e:
            raise DiagnosticsError(as_sentence(str(e))) from None
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


__all__ = ["CHECKS", "SEVERITIES", "TEXT_BUDGET", "DiagnosticsError", "Finding", "Params", "Steps", "as_sentence",
           "load_params", "load_steps", "state_column", "state_values", "verify_trace_of"]

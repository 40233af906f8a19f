"""What the prompts say about the environment, the trace and earlier rounds, as text.

Each function turns one runtime object into the few lines a prompt shows: the
environment's fields (for `polc generate`), a trace's columns with their doc strings
(the analysis mode never shows the values), the whole trace as CSV (the table mode),
and the history of earlier rounds.
"""

from __future__ import annotations

import io
from typing import Any, Optional, Sequence

import numpy as np

from polc.text import bounds, brackets

from .record import Round


def _range(lo: float, hi: float) -> str:
    return f" {bounds(lo, hi)}".rstrip()


def env_fields(fields: Sequence[Any]) -> str:
    """One line per environment field: `- speed : real in [0, 1.5]  "forward speed / 100"`."""
    return "\n".join(f'- {f.name} : real{brackets(f.shape)}{_range(f.lo, f.hi)}  "{f.doc}"' for f in fields)


def trace_schema(columns: dict) -> str:
    """One line per trace column (name, type, range, doc), from `Table.columns`."""
    lines = []
    for name, c in columns.items():
        kind = "bool" if c.dtype == "bool" else ("int" if c.dtype.startswith("int") else "real")
        doc = f"  {c.doc}" if c.doc else ""
        lines.append(f"- {name} : {kind}{brackets(c.shape)}{_range(c.lo, c.hi)}{doc}")
    return "\n".join(lines)


def _index_names(name: str, shape: Sequence[int]) -> list[str]:
    if not shape:
        return [name]
    return [f"{name}[{','.join(map(str, idx))}]" for idx in np.ndindex(*shape)]


def table_csv(table: Any, digits: int = 4) -> str:
    """The whole step table as CSV: array columns spread over one column per element,
    reals with `digits` significant digits, booleans as 0/1."""
    names, parts = [], []
    for name, c in table.columns.items():
        values = table.column(name)
        names += _index_names(name, c.shape)
        parts.append(values.reshape(len(values), -1) if c.shape else values.reshape(-1, 1))
    out = io.StringIO()
    out.write(",".join(names) + "\n")
    cells = [_format_column(p, digits) for p in parts]
    for row in zip(*[list(map(list, c)) for c in cells]):
        out.write(",".join(v for part in row for v in part) + "\n")
    return out.getvalue().rstrip("\n")


def _format_column(values: np.ndarray, digits: int) -> list[list[str]]:
    if values.dtype == np.bool_:
        return [["1" if v else "0" for v in row] for row in values]
    if np.issubdtype(values.dtype, np.integer):
        return [[str(int(v)) for v in row] for row in values]
    return [[f"{v:.{digits}g}" for v in row] for row in values.astype(np.float64)]


def column_list(columns: dict) -> str:
    """`episode`, `step`, `obs.hand` (real[3]), ...: a table's columns with their shapes, on one line."""
    return ", ".join(f"`{name}`" + (f" (real{brackets(c.shape)})" if c.shape else "") for name, c in columns.items())


def array_example(columns: dict) -> str:
    """How to turn the trace's first array column into an array, as the analysis request
    shows it: `np.stack(df["obs.tiles"].to_numpy()).reshape(-1, 12, 4)`."""
    for name, c in columns.items():
        if c.shape:
            return f'`np.stack(df["{name}"].to_numpy()).reshape(-1, {", ".join(map(str, c.shape))})`'
    return '`np.stack(df[name].to_numpy())`'


def returns_text(seeds: Sequence[int], returns: Sequence[float], scores: Optional[Sequence[float]] = None,
                 metric: Any = None, successes: Optional[Sequence[bool]] = None) -> str:
    """`return 938.1 on seed 1, 255.0 on seed 2`; with another metric its value per seed first
    (`min handle-to-target distance 0.5412 m on seed 1, ... (lower is better; returns ...)`)."""
    from ..envs.metric import RETURN
    from .scores import per_seed_text

    return per_seed_text(seeds, returns, scores, metric or RETURN, successes)


def _mean_score(m: Round) -> Optional[float]:
    """The mean of a round's traced episodes' scores (the metric's; the returns for the return)."""
    values = m.rollout_scores or m.rollout_returns
    return float(np.mean(values)) if values else None


def history(previous: Sequence[Round], feedback: str, metric: Any = None, instance: str = "seed",
            current: Optional[Round] = None) -> str:
    """The earlier rounds of this run, a few lines each: the score of each traced episode on the
    training seeds and the validation episodes' mean ± std (not in the `none` mode, which gives no
    execution feedback), the move, what the revision changed (declarations added, changed,
    removed), and the mean score before and after it, on the training and the validation seeds
    (after: the next round's, or `current`'s, the round being asked about)."""
    from ..envs.metric import RETURN
    from .scores import mean_std, number, unit_text

    metric = metric or RETURN
    if not previous:
        return "This is the first round.\n"
    lines = ["Earlier rounds of this run:"]
    for i, m in enumerate(previous):
        line = f"- Round {m.round}: structure \"{m.policy_name}\""
        scored = feedback != "none" and bool(m.rollout_returns)
        if scored:
            shown = returns_text(m.rollout_seeds, m.rollout_returns, m.rollout_scores, metric, m.rollout_successes)
            line += f", {shown} on the training {instance}(s)"
            if m.validation:
                line += (f", {mean_std(m.validation['mean'], m.validation['std'], metric)}{unit_text(metric)} "
                         f"on the {len(m.validation['seeds'])} validation {instance}(s)")
        move = m.move or {}
        if move.get("kind"):
            line += f"; your move: {move['kind']}"
            if m.tests:
                line += f" (after {m.tests} TEST move(s))"
        lines.append(line + ".")
        changes = move.get("changes")
        if changes is not None:
            lines.append("  The revision " + ("changed nothing in the declarations." if not changes
                                              else "changed:"))
            lines += [f"  - {c}" for c in changes]
        after = previous[i + 1] if i + 1 < len(previous) else current
        if scored and move.get("kind") == "REVISE" and after is not None and _mean_score(after) is not None:
            name = "return" if metric.is_return else metric.name
            validated = (f"; on the validation {instance}(s): {number(m.validation['mean'], metric)} before, "
                         f"{number(after.validation['mean'], metric)} after" if m.validation and after.validation
                         else "")
            lines.append(f"  Mean {name} on the training {instance}(s): {number(_mean_score(m), metric)} before, "
                         f"{number(_mean_score(after), metric)} after (round {after.round}){validated}"
                         + ("" if metric.is_return else f"; {metric.direction}") + ".")
    return "\n".join(lines) + "\n"

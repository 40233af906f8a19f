"""What a demonstration says about itself before a policy is fitted to it.

    notes = vet_demo(table, policy.program, strict=args.strict)   # warnings; DemoRejected under strict

Two things make a demonstration a poor basis for a fit without making it unreadable:

- it is PARTIAL: `<stem>.partial.parquet`, the finished episodes of an interrupted run
  (`polc.runtime.io.table`), so it holds fewer episodes than were asked for;
- its data leave the program's DECLARATIONS: an observation outside its declared range
  (`obs speed : real in [0, 1.5]`), an action outside its range, or any value reaching
  1e30 in magnitude. The checker's interval analysis proves its findings under the
  declared ranges, so a fit on such rows optimises a program on inputs its proofs exclude.

`out_of_range` says which columns, how many rows and by how much; `range_report` puts that
in sentences a person (and the refinement loop's model) reads. Bounds are compared as the
float32 values the table stores, so a value written exactly at a bound is inside.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional, Sequence

import numpy as np

from polc.text import interval
from polc.check.typed import TypedProgram

from .table import Table, TableError

HUGE = 1e30  # a value this large is a broken sensor or a corrupt file, declared range or not


class DemoRejected(TableError):
    """Under --strict: a demonstration that is partial or leaves its declarations."""


class OutOfRange(NamedTuple):
    """One column's values outside its declaration (an array column counts its elements)."""

    column: str    # "obs.speed", "action.gas"
    lo: float      # the declared range (+-inf when open)
    hi: float
    rows: int      # rows with at least one value outside [lo, hi] or reaching HUGE
    values: int    # values outside
    low: float     # the smallest and largest finite values of the column
    high: float
    by: float      # the farthest a value lies outside [lo, hi] (inf for a HUGE value in an open range)
    huge: int      # values reaching HUGE in magnitude


def partial_note(table: Table) -> Optional[str]:
    """A sentence when `table` is the partial file of an interrupted run, else None."""
    partial = table.complete is False or table.path.endswith(".partial.parquet")
    if not partial:
        return None
    episodes = len(table.episodes)
    return (f"'{table.path}' is a partial table: the run writing it was interrupted, and it holds only the "
            f"{episodes} episode(s) that finished ({table.num_rows} rows)")


def out_of_range(table: Table, tp: TypedProgram) -> list[OutOfRange]:
    """The program's observation and action columns whose finite values leave their declared
    ranges or reach HUGE, in declaration order. Columns missing from the table, or of another
    shape, are left to `load_demos` (which refuses them); non-finite values likewise."""
    found = []
    for prefix, decls in (("obs", tp.obs), ("action", tp.actions)):
        for d in decls:
            name = f"{prefix}.{d.name}"
            spec = table.columns.get(name)
            if spec is None or spec.shape != d.type.shape or spec.dtype == "bool":
                continue
            v = np.asarray(table.column(name), np.float64).reshape(table.num_rows, -1)
            hit = _outside(name, v, d.lo, d.hi)
            if hit is not None:
                found.append(hit)
    return found


def _outside(name: str, v: np.ndarray, lo: float, hi: float) -> Optional[OutOfRange]:
    finite = np.isfinite(v)
    if not finite.any():
        return None
    lo32 = float(np.float32(lo)) if math.isfinite(lo) else lo  # the bound as the table would store it
    hi32 = float(np.float32(hi)) if math.isfinite(hi) else hi
    below = finite & (v < lo32)
    above = finite & (v > hi32)
    huge = finite & (np.abs(v) >= HUGE)
    bad = below | above | huge
    if not bad.any():
        return None
    inside = np.where(finite, v, np.nan)
    distance = np.maximum(np.where(below, lo32 - v, 0.0), np.where(above, v - hi32, 0.0))
    by = float(distance.max())
    if (huge & ~(below | above)).any():
        by = math.inf
    return OutOfRange(name, lo, hi, int(bad.any(axis=1).sum()), int(bad.sum()), float(np.nanmin(inside)),
                      float(np.nanmax(inside)), by, int(huge.sum()))


def range_report(found: Sequence[OutOfRange], rows: int, what: str = "the demonstration") -> str:
    """`found` as one line per column under a header sentence ('' when nothing was found)."""
    if not found:
        return ""
    lines = [f"{what} leaves the ranges the program declares in {len(found)} column(s) (the checker's "
             f"analysis assumes them):"]
    for f in found:
        share = f"{f.rows} of {rows} rows ({100 * f.rows / max(rows, 1):.1f}%)"
        span = f"values from {f.low:.4g} to {f.high:.4g}"
        if f.huge:
            lines.append(f"  - {f.column}: {share} reach 1e30 in magnitude ({f.huge} value(s)); {span}, declared "
                         f"{interval(f.lo, f.hi)}")
        else:
            lines.append(f"  - {f.column}: {share} outside {interval(f.lo, f.hi)}, by up to {f.by:.4g}; {span}")
    return "\n".join(lines)


def non_finite_columns(table: Table, prefixes: Sequence[str] = ("obs", "action")) -> list[tuple[str, int]]:
    """(column, rows) of every float column under `prefixes` holding NaN or infinite values:
    data no structure can be fitted to, whatever it declares."""
    found = []
    for name, spec in table.columns.items():
        if name.split(".", 1)[0] in prefixes and spec.dtype == "float32":
            v = np.asarray(table.column(name), np.float64).reshape(table.num_rows, -1)
            rows = int((~np.isfinite(v)).any(axis=1).sum())
            if rows:
                found.append((name, rows))
    return found


def vet_demo(table: Table, tp: TypedProgram, strict: bool = False) -> list[str]:
    """The warnings about `table` as a demonstration for `tp` (partial, out of range), one
    message each; under `strict`, a `DemoRejected` holding them all instead."""
    notes = []
    partial = partial_note(table)
    if partial:
        notes.append(partial)
    report = range_report(out_of_range(table, tp), table.num_rows, f"'{table.path}'")
    if report:
        notes.append(report)
    if strict and notes:
        raise DemoRejected("the demonstration is refused under --strict:\n" + "\n".join(notes))
    return notes

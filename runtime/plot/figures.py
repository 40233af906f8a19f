"""Plots of step tables (`polc plot TABLE COL [COL ...]`), to PNG, SVG or PDF
(the output's extension decides; any other extension is refused).

    one column          that column against the step, one line per episode
    two columns         a scatter of the second against the first (x, y)
    three or more, or `lines=True`
                        stacked line plots against the step, one per column

A column is named as in the table (`latent.slip`) or by its bare name when
that is unambiguous (`slip`); one element of an array column is picked with
an index (`obs.wheel_speed[2]`, `obs.tiles[0, 1]`). Line plots draw a
declared range as dashed lines, so saturation shows. Uses matplotlib's Agg
canvas directly (no pyplot, no display needed).
"""

from __future__ import annotations

import difflib
import math
import os
import re
import textwrap
from typing import NamedTuple, Optional, Sequence

import numpy as np

from polc.util.files import naming

from ..io.table import Table, TableError, temporary_beside

MAX_LINES = 12  # elements of an array column drawn without an index


class Series(NamedTuple):
    label: str           # e.g. "obs.wheel_speed[2]"
    values: np.ndarray   # (rows,) or (rows, k) for k elements of an array column
    lo: float
    hi: float
    doc: Optional[str]


_INDEXED = re.compile(r"^(?P<name>[^\[\]]+?)\s*\[(?P<idx>[0-9,\s]+)\]$")


def resolve(table: Table, text: str) -> Series:
    """The values a column reference names; `TableError` with suggestions otherwise."""
    m = _INDEXED.match(text.strip())
    name = m.group("name") if m else text.strip()
    name = _column_name(table, name)
    spec = table.columns[name]
    values = table.column(name).astype(np.float64)
    if m:
        idx = tuple(int(i) for i in m.group("idx").split(",") if i.strip())
        if len(idx) != len(spec.shape) or any(i >= d for i, d in zip(idx, spec.shape)):
            raise TableError(f'"{text}": column "{name}" has shape {list(spec.shape)}; index it with '
                             f"{len(spec.shape)} numbers below {list(spec.shape)}")
        return Series(f"{name}[{', '.join(map(str, idx))}]", values[(slice(None),) + idx], spec.lo, spec.hi,
                      spec.doc)
    if spec.shape:
        if spec.size > MAX_LINES:
            example = ", ".join("0" for _ in spec.shape)
            raise TableError(f'column "{name}" has {spec.size} elements (shape {list(spec.shape)}); pick one, '
                             f"e.g. {name}[{example}]")
        values = values.reshape(len(values), -1)
    return Series(name, values, spec.lo, spec.hi, spec.doc)


def _column_name(table: Table, name: str) -> str:
    if name in table.columns:
        return name
    matches = [c for c in table.columns if c.split(".", 1)[-1] == name]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise TableError(f'"{name}" is ambiguous: {", ".join(matches)}')
    near = difflib.get_close_matches(name, list(table.columns), n=3, cutoff=0.75)
    hint = f' Did you mean {" or ".join(near)}?' if near else ""
    raise TableError(f'{table.path} has no column "{name}".{hint} Columns: {", ".join(table.columns)}')


def default_output(table_path: str, columns: Sequence[str]) -> str:
    stem = table_path[:-len(".parquet")] if table_path.endswith(".parquet") else table_path
    slug = "-".join(re.sub(r"[^A-Za-z0-9_.]+", "_", c).strip("_") for c in columns)
    return f"{stem}.{slug}.png"


def plot(table: Table, columns: Sequence[str], output: str, episodes: Optional[Sequence[int]] = None,
         lines: bool = False) -> str:
    """Draw `columns` of `table` (see the module docstring) to `output` (.png, .svg or .pdf)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not columns:
        raise TableError("name at least one column to plot")
    rows = _rows(table, episodes)
    series = [resolve(table, c) for c in columns]
    step = table.column("step")[rows] if "step" in table.columns else np.arange(table.num_rows)[rows]
    episode = table.column("episode")[rows] if "episode" in table.columns else np.zeros(len(rows), int)
    scatter = len(series) == 2 and not lines
    if scatter:
        fig = Figure(figsize=(6.4, 5.2), layout="constrained")
        _scatter(fig.add_subplot(), series, rows, episode)
    else:
        fig = Figure(figsize=(8.0, 2.0 + 1.9 * len(series)), layout="constrained")
        axes = fig.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
        for ax, s in zip(axes, series):
            _lines(ax, s, rows, step, episode)
        axes[-1].set_xlabel("step")
    fig.suptitle(os.path.basename(table.path), fontsize=10)
    return save_figure(FigureCanvasAgg(fig), output)


def _rows(table: Table, episodes: Optional[Sequence[int]]) -> np.ndarray:
    if not episodes:
        return np.arange(table.num_rows)
    ep = table.column("episode")
    missing = sorted(set(episodes) - set(np.unique(ep).tolist()))
    if missing:
        raise TableError(f"{table.path} has no episode {missing[0]}; it has episodes "
                         f"{', '.join(map(str, np.unique(ep)))}")
    return np.flatnonzero(np.isin(ep, list(episodes)))


def _label(s: Series) -> str:
    """The column name, and its doc string shortened to two short lines."""
    if not s.doc:
        return s.label
    return s.label + "\n" + "\n".join(textwrap.wrap(s.doc, 40, max_lines=2, placeholder=" …"))


def _lines(ax, s: Series, rows: np.ndarray, step: np.ndarray, episode: np.ndarray) -> None:
    values = s.values[rows]
    episodes = np.unique(episode)
    for e in episodes:
        sel = episode == e
        v = values[sel]
        if v.ndim == 1:
            ax.plot(step[sel], v, lw=1.0, label=f"episode {e}" if len(episodes) > 1 else None)
        else:
            for k in range(v.shape[1]):
                ax.plot(step[sel], v[:, k], lw=1.0, color=f"C{k % 10}", label=f"[{k}]" if e == episodes[0] else None)
    for bound in (s.lo, s.hi):
        if math.isfinite(bound):
            ax.axhline(bound, color="0.5", lw=0.8, ls="--")
    ax.set_ylabel(_label(s), fontsize=8)
    ax.grid(alpha=0.3)
    if (values.ndim > 1 or 1 < len(episodes) <= 10) and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=min(6, max(1, values.shape[1] if values.ndim > 1 else len(episodes))))


def _scatter(ax, series: Sequence[Series], rows: np.ndarray, episode: np.ndarray) -> None:
    x, y = series
    if x.values.ndim > 1 or y.values.ndim > 1:
        bad = x if x.values.ndim > 1 else y
        raise TableError(f'a scatter needs one number per step; index "{bad.label}", e.g. {bad.label}[0]')
    points = ax.scatter(x.values[rows], y.values[rows], s=6, alpha=0.6, c=episode, cmap="viridis",
                        linewidths=0)
    if len(np.unique(episode)) > 1:
        ax.figure.colorbar(points, ax=ax, label="episode")
    ax.set_xlabel(_label(x), fontsize=8)
    ax.set_ylabel(_label(y), fontsize=8)
    ax.grid(alpha=0.3)


FIGURE_FORMATS = ("png", "svg", "pdf")


def figure_format(output: str) -> str:
    """The image format `output`'s extension names; TableError for any other extension."""
    ext = os.path.splitext(output)[1].lower().lstrip(".")
    if ext not in FIGURE_FORMATS:
        shown = f"'.{ext}'" if ext else "no extension"
        raise TableError(f"cannot write a plot to '{output}' ({shown}): name a .png, .svg or .pdf file")
    return ext


def save_figure(canvas, output: str) -> str:
    """Write a matplotlib canvas atomically, in the format `output`'s extension names
    (PNG, SVG or PDF): no half-written image ever stands under `output`."""
    fmt = figure_format(output)
    tmp = temporary_beside(output)
    try:
        with naming(output):
            canvas.print_figure(tmp, format=fmt)
            os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return output


def save_png(canvas, output: str) -> str:
    """Write a matplotlib canvas as PNG atomically (the learning curves and run figures)."""
    if not output.lower().endswith(".png"):
        raise TableError(f"'{output}' must be a .png file")
    return save_figure(canvas, output)

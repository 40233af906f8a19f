"""A trace on the page: its columns (doc, declared range, the range seen), its episodes'
returns, and latent plots over an episode (the paper's Figure 6) from its own columns; a
policy's states (its memory, `state.NAME` columns) are shown as latents are, labelled as states.
`polc report TRACE.parquet [--policy P.pol]` is this page alone; a run's page uses the
same pieces per round.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from . import page
from polc.text import constraint

from .page import Chart, Series, esc, num

MAX_POINTS = 2000  # per plotted line: an episode longer than this is thinned evenly (the read-out says which step)


def _scalar_float(table: Any, name: str) -> bool:
    spec = table.columns[name]
    return not spec.shape and spec.dtype == "float32"


def choose_columns(table: Any, n: int = 6) -> list[str]:
    """The latents a person wants to see over an episode: the scalar real latents and states
    that move (range above 1e-2), most varied first, up to `n`; the action means when none
    moves, the actions when the table has no means (a demonstration)."""
    moving = []
    for c in table.columns:
        if c.startswith(("latent.", "state.")) and _scalar_float(table, c):
            v = np.asarray(table.column(c), np.float64)
            v = v[np.isfinite(v)]
            if v.size and float(np.ptp(v)) >= 1e-2:
                moving.append((-float(np.std(v) / (np.abs(v).mean() + 1e-9)), c))
    chosen = [c for _, c in sorted(moving)][:n]
    for prefix in ("mean.", "action."):  # a demonstration has no latents: its actions
        chosen = chosen or [c for c in table.columns if c.startswith(prefix) and _scalar_float(table, c)][:n]
    return chosen


def _episode(table: Any, episode: Optional[int] = None) -> tuple[np.ndarray, int]:
    ep = table.column("episode")
    which = int(ep.min()) if episode is None else episode
    return ep == which, which


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= MAX_POINTS:
        return x, y
    keep = np.unique(np.linspace(0, len(x) - 1, MAX_POINTS).round().astype(int))
    return x[keep], y[keep]


def latent_charts(traces: Sequence[tuple[str, Any]], names: Sequence[str]) -> str:
    """One chart per column: its values over the first episode of each trace (label, table),
    so rounds overlay as the paper's Figure 6 does."""
    out = []
    for name in names:
        series = []
        for label, table in traces:
            if table is None or name not in table.columns or "step" not in table.columns:
                continue
            sel, ep = _episode(table)
            x, y = _thin(np.asarray(table.column("step"))[sel].astype(float),
                         np.asarray(table.column(name), np.float64)[sel])
            series.append(Series(f"{label} (episode {ep})", list(x), list(y), line=True))
        if series:
            spec = next((t.columns[name] for _, t in traces if t is not None and name in t.columns), None)
            doc = _described(spec)
            label = name.split(".", 1)[-1] + (" (state)" if name.startswith("state.") else "")
            out.append(page.line_chart(Chart(name + (f": {doc}" if doc else ""), "step", label, series, height=240)))
    return "".join(out) or page.missing("No scalar latent, state or action mean to plot in these traces.")


def _described(spec: Any) -> str:
    """A column's doc, and for a state machine's state its modes (`state.mode`: "... modes: A = 0, B = 1")."""
    if spec is None:
        return ""
    modes = getattr(spec, "modes", ())
    text = spec.doc or ""
    if modes:
        text += ("; " if text else "") + "modes: " + ", ".join(f"{name} = {num(value)}" for name, value in modes)
    return text


def columns_table(table: Any) -> str:
    """Every column: kind, shape, doc, the declared range and the range seen in the trace
    (a value outside the declared range is marked); a state's type says "state", its doc
    its modes."""
    rows = []
    for name, spec in table.columns.items():
        seen, outside = "", False
        if spec.dtype in ("float32", "int32", "int64"):
            v = np.asarray(table.column(name), np.float64)
            f = v[np.isfinite(v)]
            if f.size:
                seen = f"[{num(float(f.min()))}, {num(float(f.max()))}]"
                outside = bool(f.min() < spec.lo or f.max() > spec.hi)
            if f.size < v.size:
                seen += f" ({v.size - f.size} non-finite)"
        elif spec.dtype == "bool":
            seen = f"true at {100 * float(np.mean(table.column(name))):.0f}% of steps" if table.num_rows else ""
        shape = "x".join(map(str, spec.shape)) if spec.shape else "scalar"
        cell = f'<span class="outside">{esc(seen)} (outside the declared range)</span>' if outside else esc(seen)
        kind = f"{spec.dtype} {shape}" + (", state" if name.startswith("state.") else "")
        rows.append([esc(name), esc(kind), esc(_described(spec)), esc(constraint(spec.lo, spec.hi)), cell])
    return page.table(["column", "type", "doc", "declared range", "seen"], rows, raw=True)


def episode_returns(table: Any) -> tuple[list[int], list[int], list[int], list[float]]:
    """(episodes, seeds, steps, returns): the undiscounted return of each episode."""
    eps = table.episodes
    ep, reward = table.column("episode"), np.asarray(table.column("reward"), np.float64)
    seeds = table.column("seed") if "seed" in table.columns else None
    out = ([], [], [], [])
    for e in eps:
        sel = ep == e
        out[0].append(int(e))
        out[1].append(int(seeds[sel][0]) if seeds is not None else -1)
        out[2].append(int(sel.sum()))
        out[3].append(float(reward[sel].sum()))
    return out


def returns_section(table: Any) -> str:
    if "reward" not in table.columns or "episode" not in table.columns:
        return page.missing(f"{table.path} has no reward or episode column: no returns to show.")
    eps, seeds, steps, rets = episode_returns(table)
    rows = [[str(e), str(s) if s >= 0 else "-", str(n), num(r, 6)] for e, s, n, r in zip(eps, seeds, steps, rets)]
    body = page.table(["episode", "seed", "steps", "return"], rows)
    if len(rets) > 1:
        body += (f"<p>Mean return {esc(num(float(np.mean(rets)), 6))} ± {esc(num(float(np.std(rets)), 4))} "
                 f"over {len(rets)} episodes.</p>")
    return body


def metadata_section(table: Any) -> str:
    meta = dict(table.metadata)
    if isinstance(meta.get("policy"), dict):  # its source is shown highlighted, not as a JSON string
        meta["policy"] = {k: v for k, v in meta["policy"].items() if k != "source"}
    rows = [[k, v if isinstance(v, str) else _json(v)] for k, v in meta.items()]
    note = "" if table.complete in (None, True) else page.missing("This table is marked incomplete (a partial run).")
    return note + (page.table(["key", "value"], rows) if rows else "<p>No polc metadata.</p>")


def _json(v: Any) -> str:
    import json

    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 400 else text[:400] + " ..."


def trace_sections(table: Any, policy: Optional[Any] = None, policy_error: Optional[str] = None) -> list:
    """The sections of a trace's page; `policy` is a checked program (its source and graph)."""
    from .source import highlight

    steps = table.num_rows
    names = choose_columns(table)
    sections = [("returns", "Episodes and returns", returns_section(table)),
                ("latents", "Over the first episode: " + ", ".join(names) if names else "Latents",
                 "<p>Hover a plot to read the step and the value.</p>" + latent_charts([("trace", table)], names)),
                ("columns", f"Columns ({len(table.columns)}, {steps} steps)", columns_table(table)),
                ("metadata", "Run metadata", metadata_section(table))]
    recorded = table.metadata.get("policy")
    source = recorded.get("source") if isinstance(recorded, dict) else None
    if policy is not None:
        from polc.graph import to_svg

        sections.insert(0, ("policy", f"Policy {policy.name}",
                            highlight(policy.source) + page.inline_svg(to_svg(policy.typed), "trace")))
    elif isinstance(source, str):
        sections.insert(0, ("policy", "Policy (as recorded in the trace)", highlight(source)))
    if policy_error:
        sections.insert(0, ("policy", "Policy", page.missing(policy_error)))
    return sections


def trace_page(path: str, policy: Optional[Any] = None) -> str:
    """The page of the step table at `path`; `policy` (a checked program) adds its source
    and dataflow graph. A table that cannot be read is a ReportError naming the file."""
    from ..io.table import TableError, read_table
    from .page import ReportError

    try:
        table = read_table(path)
    except TableError as e:
        raise ReportError(str(e)) from None
    if "episode" not in table.columns or "step" not in table.columns:
        raise ReportError(f"'{path}' has no episode and step columns; it is not a polc step table")
    kind = table.metadata.get("kind", "table")
    env = table.metadata.get("env", {})
    subtitle = (f"{kind} of {env.get('name', '?') if isinstance(env, dict) else env}: {len(table.episodes)} "
                f"episode(s), {table.num_rows} steps")
    return page.document(f"polc report: {path}", subtitle, trace_sections(table, policy))

"""The learning curve of an RL run as a PNG, against the resets used so far: each
update's mean return with its spread over the update's episodes (an ES population:
its members), the running mean over the last few updates (an update plays one or a
few training seeds, so its own mean swings with how hard they are) and the solved
line. The legend sits beside the axes, never over the data."""

from __future__ import annotations

from typing import Any, Optional, Sequence

SMOOTH = 10  # updates in the running mean


def running_mean(values: Sequence[float], window: int = SMOOTH) -> list[float]:
    """The mean of each value and the up to `window` - 1 before it (the first ones: of fewer)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def curve_figure(records: Sequence[dict], title: str, solved: Optional[float] = None,
                 label: str = "mean return (sampled actions)") -> Any:
    """The matplotlib Figure of `records` (the log's per-update entries: resets, return_mean,
    return_std)."""
    import numpy as np
    from matplotlib.figure import Figure

    x = np.asarray([r["resets"] for r in records], float)
    mean = np.asarray([r["return_mean"] for r in records], float)
    std = np.asarray([r["return_std"] for r in records], float)
    fig = Figure(figsize=(7.5, 4.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    ax.fill_between(x, mean - std, mean + std, alpha=0.2, label="± std over the update's episodes")
    ax.plot(x, mean, marker="o", markersize=2.5, linewidth=0.8, alpha=0.6, label=f"{label}, per update")
    window = min(SMOOTH, len(records))
    if window > 1:
        ax.plot(x, running_mean(list(mean), window), linewidth=2.2, color="C0",
                label=f"running mean over {window} updates")
    if solved is not None:
        ax.axhline(solved, color="grey", linestyle="--", linewidth=1, label=f"solved ({solved:g})")
    ax.set_xlabel("resets (training episodes)")
    ax.set_ylabel("return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    return fig


def plot_curve(path: str, records: Sequence[dict], title: str, solved: Optional[float] = None,
               label: str = "mean return (sampled actions)") -> None:
    """Write the curve of `records` (the log's per-update entries) to `path`, atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from ..plot.figures import save_png

    save_png(FigureCanvasAgg(curve_figure(records, title, solved, label)), path)

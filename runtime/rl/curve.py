"""The learning curve of an RL run as a PNG: the mean return (± std) of each
update's training episodes against the resets used so far."""

from __future__ import annotations

from typing import Optional, Sequence


def plot_curve(path: str, records: Sequence[dict], title: str, solved: Optional[float] = None,
               label: str = "mean return (sampled actions)") -> None:
    """Write the curve of `records` (the log's per-update entries) to `path`, atomically."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..plot.figures import save_png

    x = np.asarray([r["resets"] for r in records], float)
    mean = np.asarray([r["return_mean"] for r in records], float)
    std = np.asarray([r["return_std"] for r in records], float)
    fig = Figure(figsize=(7, 4), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    ax.fill_between(x, mean - std, mean + std, alpha=0.25, label="± std over the update's episodes")
    ax.plot(x, mean, marker="o", markersize=3, label=label)
    if solved is not None:
        ax.axhline(solved, color="grey", linestyle="--", linewidth=1, label=f"solved ({solved:g})")
    ax.set_xlabel("resets (training episodes)")
    ax.set_ylabel("return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    save_png(FigureCanvasAgg(fig), path)

"""What an experiment shows: results.json, table.md (the paper's Table 1 layout),
the per-round plot (the paper's Figure 4 for Car Racing, Figure 5 for the door)
and the RL learning curves of every structure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from .plan import Budget, Row, Task
from ..refine.rundir import read_json, write_json
from ..refine.scores import mean_std, number

RESULTS, TABLE, ROUNDS_PNG, CURVES_PNG = "results.json", "table.md", "rounds.png", "rl_curves.png"


def _num(x: Optional[float], metric: Any) -> str:
    return "-" if x is None else number(x, metric)


def _pm(mean: Optional[float], std: Optional[float], metric: Any) -> str:
    return "-" if mean is None else mean_std(mean, std, metric)


def _share(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


def quick_notice(budget: Budget) -> str:
    """What a quick run's numbers are (every quick table and plot says it)."""
    cut = f"episodes cut at {budget.max_steps} steps, " if budget.max_steps else ""
    return (f"QUICK RUN ({cut}{budget.seeds} seeds, RL {budget.low}/{budget.high} resets, "
            f"{budget.rl_seeds} training seed{'s' if budget.rl_seeds != 1 else ''}): it exercises every step; "
            "its numbers are not results and not comparable with the full run's or the paper's")


def _columns(rows: Sequence[Row], metric: Any, solved_at: Optional[float]) -> list[tuple[str, Any]]:
    """(header, cell(row)) of the score columns: per action mode, the metric, the share
    solved (where the env defines it) and the success rate (where it reports one)."""
    unit = f" ({metric.unit})" if metric.unit else ""
    name = "Return" if metric.is_return else metric.name[0].upper() + metric.name[1:]
    seeds = lambda r: f" ({r.training_seeds} seeds)" if r.training_seeds > 1 else ""  # noqa: E731
    cols = [(f"{name}{unit}, mean actions", lambda r: _pm(r.mean, r.std, metric) + seeds(r))]
    if any(r.solved_share is not None for r in rows):
        cols.append((f"≥ {solved_at:g}, mean", lambda r: _share(r.solved_share)))
    if any(r.success_rate is not None for r in rows):
        cols.append(("Success rate, mean", lambda r: _share(r.success_rate)))
    if any(r.sampled_mean is not None for r in rows):
        cols.append((f"{name}{unit}, sampled actions",
                     lambda r: _pm(r.sampled_mean, r.sampled_std, metric) + (seeds(r) if r.sampled_mean is not None
                                                                             else "")))
        if any(r.sampled_solved_share is not None for r in rows):
            cols.append((f"≥ {solved_at:g}, sampled", lambda r: _share(r.sampled_solved_share)))
        if any(r.sampled_success_rate is not None for r in rows):
            cols.append(("Success rate, sampled", lambda r: _share(r.sampled_success_rate)))
    return cols


def markdown(task: Task, budget: Budget, rows: Sequence[Row], refinement: dict, metric: Any,
             seeds: Sequence[int], seconds: float, command: str, solved_at: Optional[float] = None,
             rl_skipped: bool = False) -> str:
    """The table and what it means, as Markdown."""
    unit = f" ({metric.unit})" if metric.unit else ""
    name = "Return" if metric.is_return else metric.name[0].upper() + metric.name[1:]
    title = f"# {task.name}: the paper's {'Table 1' if task.rl else task.figure}, measured"
    lines = [title + (" (QUICK RUN: not results)" if budget.quick else ""), ""]
    if budget.quick:
        lines += [f"**{quick_notice(budget)}.**", ""]
    lines += [f"`{command}`. "
              f"{len(seeds)} unseen evaluation seeds ({seeds[0]}..{seeds[-1]}), {metric.direction}. "
              f"Compute time {_clock(seconds)} on this machine (every step's own time, summed: the wall time "
              f"when the steps run one at a time; steps that ran side by side on Ray overlap).", ""]
    if rl_skipped:
        lines += ["RL rows skipped (`--skip-rl`): the same command without it runs them, reusing every step "
                  "here.", ""]
    if refinement:
        who = ("the bundled SCRIPTED session (hand-written replies played back; no model was called)"
               if refinement.get("scripted") else f"the model {refinement.get('llm')}")
        lines += [f"The refined structure is the last round of `polc refine` with {who}: round "
                  f"{refinement['final_round']}, {refinement['llm_calls']} LLM calls, {refinement['resets']} "
                  f"resets (rollouts the model analysed).", ""]
    sampled = any(r.sampled_mean is not None for r in rows)
    cols = _columns(rows, metric, solved_at)
    lines += ["| Method | Demo | LLM calls | Resets | " + " | ".join(h for h, _ in cols) + " |",
              "|---|---|---|---|" + "---|" * len(cols)]
    for r in rows:
        demo = "-" if r.stage == "demo" else str(r.demos)
        calls = "-" if r.stage == "demo" else str(r.llm_calls)
        resets = "-" if r.stage == "demo" else str(r.resets)
        lines.append(f"| {r.method} | {demo} | {calls} | {resets} | " + " | ".join(c(r) for _, c in cols) + " |")
    lines += ["", "Mean ± std over the unseen seeds (one episode each). Mean actions: the policy acts on its "
              "action means (IL fits them; this is the table's main column)."
              + (" Sampled actions: each action drawn from the policy's declared noise (what RL trains)."
                 if sampled else " (No sampled column: an action of these structures declares no noise.)")
              + " Resets count every environment episode used for refinement and training, not evaluation. "
              "The initial structure is the task's hand-written `initial.pol` (no LLM call)."]
    if any(r.solved_share is not None for r in rows):
        lines[-1] += f" ≥ {solved_at:g}: the share of episodes (tracks) scoring at least {solved_at:g}."
    if any(r.success_rate is not None for r in rows):
        lines[-1] += (" Success rate: the share of episodes in which the environment reported success "
                      "(Meta-World's `success` at any step).")
    if any(r.training_seeds > 1 for r in rows):
        k = max(r.training_seeds for r in rows)
        lines[-1] += (f" RL and ES rows ({k} seeds): {k} runs with different training seeds; the mean over seeds "
                      "of each run's mean over the unseen seeds, ± the spread (std) of those means across seeds; "
                      "the shares pool every run's episodes.")
    lines.append("")
    notes = [f"- {r.method}: {r.note}" for r in rows if r.note and r.stage == "IL"]
    if notes:
        lines += ["IL (the weights kept: `polc fit`'s choice between declared and fitted on training seeds):",
                  *notes, ""]
    notes = [f"- {r.method}: {r.note}" for r in rows if r.note and r.stage == "RL"]
    if notes:
        lines += ["RL (training episodes, sampled actions):", *notes, ""]
    notes = [f"- {r.method}: {r.note}" for r in rows if r.note and r.stage == "ES"]
    if notes:
        lines += ["ES (training episodes: the population's mean actions):", *notes, ""]
    if refinement:
        lines += [f"Per refinement round ({task.figure}, `{ROUNDS_PNG}`):", "",
                  f"| round | {name}{unit} | move |", "|---|---|---|"]
        lines += [f"| {r['round']} | {_pm(r['mean'], r['std'], metric)} | {r.get('move') or '-'} |"
                  for r in refinement["rounds"]]
        lines.append("")
    return "\n".join(lines)


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def results_json(task: Task, budget: Budget, rows: Sequence[Row], refinement: dict, metric: Any,
                 seeds: Sequence[int], steps: dict, command: str, solved_at: Optional[float] = None) -> dict:
    return {"experiment": task.name, "env": task.env, "command": command, "quick": budget.quick,
            "budget": budget.to_json(), "solved_at": solved_at,
            "metric": {"key": metric.key, "name": metric.name, "unit": metric.unit,
                       "higher_is_better": metric.higher_is_better},
            "evaluation": {"seeds": list(seeds), "main": "mean actions", "beside": "sampled actions (noise seed 0)"},
            "rows": [r.to_json() for r in rows], "refinement": refinement,
            "step_seconds": steps, "step_seconds_total": round(sum(steps.values()), 1)}


def _set_title(ax: Any, task: Task, budget: Budget, what: str) -> None:
    """The plot's title; a quick run's says so, in red."""
    if budget.quick:
        import textwrap

        notice = "\n".join(textwrap.wrap(quick_notice(budget), 100))
        ax.set_title(f"{task.name}: {what}\n{notice}", fontsize=8, color="C3")
    else:
        ax.set_title(f"{task.name}: {what}", fontsize=10)


def plot_rounds(path: Path, task: Task, budget: Budget, rows: Sequence[Row], refinement: dict,
                metric: Any) -> Optional[str]:
    """The metric per refinement round (mean ± std), with the expert and the IL rows of
    the fixed structures as reference lines."""
    if not refinement:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..plot.figures import save_png

    rounds = refinement["rounds"]
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    x = [r["round"] for r in rounds]
    ax.errorbar(x, [r["mean"] for r in rounds], yerr=[r["std"] for r in rounds], marker="o", capsize=4,
                label="refined structure + IL, per round")
    styles = iter([("--", "0.4"), (":", "C1"), ("-.", "C2"), ("--", "C3")])
    for r in rows:
        if r.stage == "demo" or (r.stage == "IL" and r.structure != "refined"):
            style, color = next(styles, ("--", "C4"))
            ax.axhline(r.mean, linestyle=style, color=color, linewidth=1, label=f"{r.method}: {_num(r.mean, metric)}")
    ax.set_xticks(x)
    ax.set_xlabel("refinement round")
    ax.set_ylabel(f"{metric.name}" + (f" ({metric.unit})" if metric.unit else "") + f", {metric.direction}")
    who = "scripted session" if refinement.get("scripted") else refinement.get("llm")
    _set_title(ax, task, budget, f"{task.figure} ({who})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save_png(FigureCanvasAgg(fig), str(path))


def curve(logs: Sequence[list]) -> tuple[list, list, list, list, str]:
    """One structure's RL curve from its runs' logs (one per training seed): resets,
    the mean training return, and the band's low and high edges: the range across
    seeds when there are several, else ± the std of the update's episodes. Runs are
    cut to the shortest."""
    import numpy as np

    n = min(len(log) for log in logs)
    resets = [r["resets"] for r in logs[0][:n]]
    returns = np.asarray([[r["return_mean"] for r in log[:n]] for log in logs], float)
    mean = returns.mean(0)
    if len(logs) > 1:
        return resets, list(mean), list(returns.min(0)), list(returns.max(0)), f"range over {len(logs)} seeds"
    std = np.asarray([r.get("return_std", 0.0) for r in logs[0][:n]], float)
    return resets, list(mean), list(mean - std), list(mean + std), "± std of the update's episodes"


# Each learner's panel: its run folder, title and what its training return is.
LEARNERS = (("rl", "RL, the paper's objective", "sampled actions"),
            ("es", "ES on the mean actions", "the population's perturbed mean actions"))


def plot_curves(path: Path, task: Task, budget: Budget, out: Path, refinement: dict) -> Optional[str]:
    """Training return against resets for every structure's RL and ES runs, one panel per
    learner that ran (refinement resets included for the refined structure, as the table
    counts them): the mean over training seeds with a band (`curve`); a curve of one update
    is a point with its bar."""
    panels = []
    for folder, title, what in LEARNERS:
        runs = []
        for i, s in enumerate(task.structures):
            paths = [out / folder / s.key / f"seed{k}" / "log.json" for k in range(budget.rl_seeds)]
            logs = [read_json(p)["log"] for p in paths if p.exists()]
            if logs and all(logs):
                runs.append((f"C{i}", s, logs))  # a structure's colour, the same in every panel
        if runs:
            panels.append((title, what, runs))
    if not panels:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from ..plot.figures import save_png

    fig = Figure(figsize=(7.0 * len(panels), 4.2), layout="constrained")
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for i, (ax, (title, what, runs)) in enumerate(zip(axes, panels)):
        band = ""
        for color, s, logs in runs:
            offset = refinement.get("resets", 0) if s.source == "refine" else 0
            resets, mean, lo, hi, band = curve(logs)
            x = [r + offset for r in resets]
            if len(x) == 1:  # one update: a point with its band as an error bar
                ax.errorbar(x, mean, yerr=[[mean[0] - lo[0]], [hi[0] - mean[0]]], marker="o", capsize=4,
                            color=color, label=s.label)
            else:
                ax.plot(x, mean, marker=".", color=color, label=s.label)
                ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
        if task.threshold is not None:
            ax.axhline(task.threshold, color="0.4", linestyle="--", linewidth=1, label=f"{task.threshold:g}")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("resets (refinement + training episodes)")
        if i == 0:
            ax.set_ylabel(f"mean training return over an update\nband: {band}")
        _set_title(ax, task, budget, f"{title}, from the IL params\ntraining episodes: {what}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_png(FigureCanvasAgg(fig), str(path))


def write_all(out: Path, task: Task, budget: Budget, rows: Sequence[Row], refinement: dict, metric: Any,
              seeds: Sequence[int], steps: dict, command: str, solved_at: Optional[float] = None,
              rl_skipped: bool = False) -> dict:
    """results.json, table.md and the plots; returns the results dict."""
    from polc.util.files import write_atomic

    results = {**results_json(task, budget, rows, refinement, metric, seeds, steps, command, solved_at),
               "rl_skipped": rl_skipped}
    write_json(out / RESULTS, results)
    write_atomic(str(out / TABLE), markdown(task, budget, rows, refinement, metric, seeds,
                                            results["step_seconds_total"], command, solved_at, rl_skipped))
    plot_rounds(out / ROUNDS_PNG, task, budget, rows, refinement, metric)
    plot_curves(out / CURVES_PNG, task, budget, out, refinement)
    return results

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


def markdown(task: Task, budget: Budget, rows: Sequence[Row], refinement: dict, metric: Any,
             seeds: Sequence[int], seconds: float, command: str) -> str:
    """The table and what it means, as Markdown."""
    unit = f" ({metric.unit})" if metric.unit else ""
    name = "Return" if metric.is_return else metric.name[0].upper() + metric.name[1:]
    lines = [f"# {task.name}: the paper's {'Table 1' if task.rl else task.figure}, measured", "",
             f"`{command}`{' (quick: a reduced run that exercises every step)' if budget.quick else ''}. "
             f"{len(seeds)} unseen evaluation seeds ({seeds[0]}..{seeds[-1]}), {metric.direction}. "
             f"Wall time {_clock(seconds)} on this machine.", ""]
    if refinement:
        who = ("the bundled SCRIPTED session (hand-written replies played back; no model was called)"
               if refinement.get("scripted") else f"the model {refinement.get('llm')}")
        lines += [f"The refined structure is the last round of `polc refine` with {who}: round "
                  f"{refinement['final_round']}, {refinement['llm_calls']} LLM calls, {refinement['resets']} "
                  f"resets (rollouts the model analysed).", ""]
    sampled = any(r.sampled_mean is not None for r in rows)
    lines += [f"| Method | Demo | LLM calls | Resets | {name}{unit}, mean actions |"
              + (f" {name}{unit}, sampled actions |" if sampled else ""),
              "|---|---|---|---|---|" + ("---|" if sampled else "")]
    for r in rows:
        demo = "-" if r.stage == "demo" else str(r.demos)
        calls = "-" if r.stage == "demo" else str(r.llm_calls)
        resets = "-" if r.stage == "demo" else str(r.resets)
        lines.append(f"| {r.method} | {demo} | {calls} | {resets} | {_pm(r.mean, r.std, metric)} |"
                     + (f" {_pm(r.sampled_mean, r.sampled_std, metric)} |" if sampled else ""))
    lines += ["", "Mean actions: the policy acts on its action means (IL fits them; this is the table's main "
              "column)."
              + (" Sampled actions: each action drawn from the policy's declared noise (what RL trains)."
                 if sampled else " (No sampled column: an action of these structures declares no noise.)")
              + " Resets count every environment episode used for refinement and training, not evaluation. "
              "The initial structure is the task's hand-written `initial.pol` (no LLM call).", ""]
    notes = [f"- {r.method}: {r.note}" for r in rows if r.note and r.stage == "RL"]
    if notes:
        lines += ["RL (training episodes, sampled actions):", *notes, ""]
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
                 seeds: Sequence[int], steps: dict, command: str) -> dict:
    return {"experiment": task.name, "env": task.env, "command": command, "budget": budget.to_json(),
            "metric": {"key": metric.key, "name": metric.name, "unit": metric.unit,
                       "higher_is_better": metric.higher_is_better},
            "evaluation": {"seeds": list(seeds), "main": "mean actions", "beside": "sampled actions (noise seed 0)"},
            "rows": [r.to_json() for r in rows], "refinement": refinement,
            "step_seconds": steps, "wall_seconds": round(sum(steps.values()), 1)}


def plot_rounds(path: Path, task: Task, rows: Sequence[Row], refinement: dict, metric: Any) -> Optional[str]:
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
    ax.set_title(f"{task.name}: {task.figure} ({who})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save_png(FigureCanvasAgg(fig), str(path))


def plot_curves(path: Path, task: Task, out: Path, refinement: dict) -> Optional[str]:
    """Training return against resets for every structure's RL run (refinement resets
    included for the refined structure, as the table counts them)."""
    runs = [(s, out / "rl" / s.key / "log.json") for s in task.structures]
    runs = [(s, p) for s, p in runs if p.exists()]
    if not runs:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..plot.figures import save_png

    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for s, p in runs:
        log = read_json(p)["log"]
        offset = refinement.get("resets", 0) if s.source == "refine" else 0
        ax.plot([r["resets"] + offset for r in log], [r["return_mean"] for r in log], marker=".", label=s.label)
    if task.threshold is not None:
        ax.axhline(task.threshold, color="0.4", linestyle="--", linewidth=1, label=f"{task.threshold:g}")
    ax.set_xlabel("resets (refinement + training episodes)")
    ax.set_ylabel("mean training return (sampled actions)")
    ax.set_title(f"{task.name}: RL from the IL params", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_png(FigureCanvasAgg(fig), str(path))


def write_all(out: Path, task: Task, budget: Budget, rows: Sequence[Row], refinement: dict, metric: Any,
              seeds: Sequence[int], steps: dict, command: str) -> dict:
    """results.json, table.md and the plots; returns the results dict."""
    from polc.files import write_atomic

    results = results_json(task, budget, rows, refinement, metric, seeds, steps, command)
    write_json(out / RESULTS, results)
    write_atomic(str(out / TABLE), markdown(task, budget, rows, refinement, metric, seeds,
                                            results["wall_seconds"], command))
    plot_rounds(out / ROUNDS_PNG, task, rows, refinement, metric)
    plot_curves(out / CURVES_PNG, task, out, refinement)
    return results

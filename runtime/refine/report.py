"""What a run shows: progress while it runs, the per-round table, summary.json, and the
paper's Figure 4 (return per round; Figure 5 for the door: its distance per round) and
Figure 6 (chosen latents, first round against last) as PNG. Every score is the
environment's metric (`scores`), the return unless its spec names another.
"""

from __future__ import annotations

import time
from typing import Any, Optional, Sequence

from ..envs.metric import RETURN
from . import scores
from .budget import cost_text
from .rundir import RunDir, write_json


class Progress:
    """One live line on stderr: run elapsed, round, phase (rich), plus notices and a line per
    finished round. `quiet` keeps only notices and errors."""

    def __init__(self, quiet: bool = False, withhold_scores: bool = False):
        from rich.console import Console
        from rich.progress import Progress as Bar
        from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.withhold_scores = withhold_scores  # --quiet-scores: print nothing the model may not see
        self.bar = Bar(SpinnerColumn(), TimeElapsedColumn(), TextColumn("{task.description}"),
                       console=self.console, transient=True, disable=quiet)
        self.task = self.bar.add_task("starting", total=None)
        self.phase_start = time.monotonic()

    def __enter__(self) -> "Progress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, soft_wrap=True)

    def phase(self, k: int, what: str) -> None:
        self.phase_start = time.monotonic()
        self.bar.update(self.task, description=f"round {k}: {what}")

    def notice(self, text: str) -> None:
        self.console.print(f"notice: {text}", markup=False, soft_wrap=True)

    def round_done(self, m: dict, settings: Any, metric: Any = RETURN) -> None:
        if self.quiet:
            return
        move = (m.get("move") or {}).get("kind") or ("final" if m.get("final") else "-")
        ev = m.get("eval")
        ret = scores.score_text(ev["mean"], ev["std"], metric) if ev else f"no {metric.name}"
        llm = m["llm"]
        cost = "" if "cost_usd" not in llm else ", cost unknown" if llm["cost_usd"] is None else \
            f", {cost_text(llm['cost_usd'])}"
        population = m.get("candidates")
        pop = (f", best of {population['asked']} candidates (#{population['chosen']})"
               if isinstance(population, dict) else "")
        seen = ("unseen-seed score withheld (--quiet-scores)" if self.withhold_scores else
                f"{ret} over {len(ev['seeds']) if ev else 0} unseen seeds{scores.success_text(ev)}")
        line = (f"round {m['round']} done: {seen}, "
                f"{llm['calls']} LLM call(s), {llm['input_tokens'] + llm['output_tokens']:,} tokens{cost}, "
                f"move {move}{pop}, {m['seconds']:.0f} s")
        if m.get("end"):
            line += f"; run ends: {m['end']}"
        self.say(line)


# ---- the table -------------------------------------------------------------------------


def columns(metric: Any = RETURN, cost: bool = False, success: Optional[str] = None) -> tuple[str, ...]:
    """The table's header; the third column is the environment's metric, `success` (a heading
    from `scores.success_column`) adds the task's success rate beside it, and `cost` adds
    "cost (USD)" after the tokens (a run whose model has a price)."""
    return ("round", "structure", scores.column(metric), *((success,) if success else ()), "LLM calls",
            "input tokens", "output tokens",
            *(("cost (USD)",) if cost else ()), "env resets", "wall time", "move")


COLUMNS = columns()


def priced(history: Sequence[dict]) -> bool:
    """Whether the table shows costs: some round that called the model has a known cost (a
    scripted session, or a model the price table does not know, shows tokens only; the
    summary says why). A round without calls (the final one) costs $0 whatever the price,
    so it says nothing of whether the model has one."""
    return any(isinstance(m["llm"].get("cost_usd"), (int, float)) and m["llm"].get("calls") for m in history)


def total_cost(history: Sequence[dict]) -> Optional[float]:
    """The run's cost in USD; None when a round's is unknown or was never priced."""
    costs = [m["llm"].get("cost_usd") for m in history]
    if not costs or any(not isinstance(c, (int, float)) for c in costs):
        return None
    return round(sum(costs), 6)


def rows(history: Sequence[dict], metric: Any = RETURN) -> list[list[str]]:
    """One row of strings per round, then a total row."""
    out = []
    cost, success = priced(history), scores.success_column(history)
    for m in history:
        ev = m.get("eval")
        move = (m.get("move") or {}).get("kind") or ("(final)" if m.get("final") else "-")
        if m.get("end") and move in ("-", "(final)") and not m.get("final"):
            move = "(ended)"
        structure = f"{m['policy_name']} {m['structure_sha256'][:6]}" if m.get("policy_name") else "-"
        out.append([str(m["round"]), structure,
                    scores.mean_std(ev["mean"], ev["std"], metric) if ev else "-",
                    *([scores.success_cell(ev)] if success else []), str(m["llm"]["calls"]),
                    f"{m['llm']['input_tokens']:,}", f"{m['llm']['output_tokens']:,}",
                    *([cost_text(m["llm"].get("cost_usd"))] if cost else []), str(m.get("resets", 0)),
                    _duration(m["seconds"]), move])
    t = totals(history)
    out.append(["total", "", "", *([""] if success else []), str(t["llm_calls"]), f"{t['input_tokens']:,}", f"{t['output_tokens']:,}",
                *([cost_text(t["cost_usd"])] if cost else []), str(t["resets"]), _duration(t["seconds"]), ""])
    return out


def totals(history: Sequence[dict]) -> dict:
    return {"rounds": len(history),
            "llm_calls": sum(m["llm"]["calls"] for m in history),
            "input_tokens": sum(m["llm"]["input_tokens"] for m in history),
            "output_tokens": sum(m["llm"]["output_tokens"] for m in history),
            "resets": sum(m.get("resets", 0) for m in history),
            "eval_episodes": sum(m.get("eval_episodes", 0) for m in history),
            "repairs": sum(m["llm"].get("repairs", 0) for m in history),
            "regenerations": sum(m.get("regenerations", 0) for m in history),
            "tests": sum(m.get("tests", 0) for m in history),
            "prompt_mismatches": sum(m["llm"].get("mismatches", 0) for m in history),
            "cost_usd": total_cost(history),
            "candidate_calls": sum(_population(m, "calls") for m in history),
            "candidate_resets": sum(_population(m, "resets") for m in history),
            "seconds": round(sum(m["seconds"] for m in history), 1)}


def _population(m: dict, key: str) -> int:
    c = m.get("candidates")
    return int(c.get(key, 0)) if isinstance(c, dict) else 0


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds < 3600 else \
        f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def table_text(history: Sequence[dict], metric: Any = RETURN, withhold_scores: bool = False) -> str:
    """The per-round table as plain text (fixed-width columns), for the terminal and logs;
    `withhold_scores` leaves out the unseen seeds' score and success columns (`--quiet-scores`)."""
    cost = priced(history)
    header = columns(metric, cost, scores.success_column(history))
    body = [list(header)] + rows(history, metric)
    if withhold_scores:
        scored = 2 if scores.success_column(history) else 1  # the metric's column, and the success rate's
        body = [r[:2] + r[2 + scored:] for r in body]
        header = body[0]
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    right = set(range(2, len(header) - 1))

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(body[0]), rule] + [line(r) for r in body[1:-1]] + [rule, line(body[-1])])


# ---- summary.json ----------------------------------------------------------------------


def write_summary(run: RunDir, history: Sequence[dict], status: str, notice: Optional[str],
                  metric: Any = RETURN) -> dict:
    """summary.json: the run's settings, every round's metrics, totals and the best round (by
    the metric's direction); `metric` describes what eval.mean / eval.std / eval.scores hold."""
    config = run.config
    best = scores.best(history, metric)
    unit = f", {metric.unit}" if metric.unit else ""
    summary = {"run": str(run.path), "task": config["task"], "env": config["env"], "llm": config["llm"],
               "scripted": config.get("scripted", False), "notice": notice, "status": status,
               "command": config.get("command"), "settings": config["settings"],
               "metric": scores.metric_json(metric),
               "returns": "mean ± std of the undiscounted return over unseen evaluation seeds, per round"
                          if metric.is_return else
                          f"eval.mean ± eval.std: the {metric.name}{unit} ({metric.direction}) over unseen "
                          "evaluation seeds, per round; eval.scores per seed, eval.returns the returns beside it",
               "resets": "episodes whose traces or scores the model was given: the traced ones, the declared "
                         "weights' beside them, the validation episodes (the paper's Table 1 count, without "
                         "final evaluation); eval_episodes counts the evaluation episodes",
               "cost": cost_note(history, config),
               "budget": config.get("budget"), "budget_stop": config.get("budget_stop"),
               "candidates": "each REVISE move asked for {0} revisions; totals.candidate_calls and "
                             "totals.candidate_resets are what the population cost beyond one revision (its "
                             "episodes are in resets too)".format(config["settings"].get("candidates", 1))
                             if config["settings"].get("candidates", 1) > 1 else None,
               "rounds": list(history), "totals": totals(history),
               "best_round": best["round"] if best else None,
               "table": table_text(history, metric).splitlines()}
    write_json(run.path / "summary.json", summary)
    return summary


def cost_note(history: Sequence[dict], config: dict) -> str:
    """One sentence on what the run cost and where the prices come from."""
    if not any("cost_usd" in m["llm"] for m in history):
        if config.get("scripted"):
            return "no cost: the replies are a scripted recording, no model was called"
        return "not priced (no price table was used)"
    sources = ", ".join(config.get("prices") or []) or "polc's price table"
    total = total_cost(history)
    if total is not None:
        return (f"{cost_text(total)} at the rates in {sources} (USD per million tokens; prices change and the "
                "table can be stale)")
    return (f"unknown: {config.get('llm')} has no price in {sources}; its tokens are counted. Add it to "
            "~/.config/polc/prices.toml or a --prices FILE (docs/llm.md)")


# ---- figures -----------------------------------------------------------------------------


def figure_returns(history: Sequence[dict], output: str, title: str, metric: Any = RETURN) -> Optional[str]:
    """Figure 4: the metric's mean per round with ± std bars and each seed's value as dots
    (the return for Car Racing; the door's min handle-to-target distance, as the paper's
    Figure 5, with its direction on the axis)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    evaluated = [m for m in history if m.get("eval")]
    if not evaluated:
        return None
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    x = [m["round"] for m in evaluated]
    ax.errorbar(x, [m["eval"]["mean"] for m in evaluated], yerr=[m["eval"]["std"] for m in evaluated],
                marker="o", capsize=4, lw=1.5, label="mean ± std")
    for m in evaluated:
        values = m["eval"].get("scores", m["eval"]["returns"])
        ax.scatter([m["round"]] * len(values), values, s=10, color="0.5", alpha=0.6, zorder=3)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{m['round']}\n{(m.get('move') or {}).get('kind', 'final' if m.get('final') else '')}"
                        for m in evaluated], fontsize=8)
    ax.set_xlabel("round (and the move that ended it)")
    ax.set_ylabel(scores.axis_label(metric, len(evaluated[0]["eval"]["seeds"])))
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    from ..plot.figures import save_png

    return save_png(FigureCanvasAgg(fig), output)


def choose_latents(first: Any, last: Any, wanted: Optional[Sequence[str]] = None, n: int = 4) -> list[str]:
    """Columns to compare: `wanted` (bare latent or state names, or full columns), else the
    latents and states that changed most between the rounds (scalar, not negligibly small)
    and those the last round added, up to `n`; the action means when the rounds share no latent."""
    import numpy as np

    def full(name: str) -> str:
        if "." in name:
            return name
        state = f"state.{name}"  # a policy's memory is traced as state.NAME (docs/language.md, "Memory")
        return state if state in first.columns or state in last.columns else f"latent.{name}"

    if wanted:
        return [full(w) for w in wanted if full(w) in first.columns or full(w) in last.columns]

    def scalar(t: Any, c: str) -> bool:
        return c.startswith(("latent.", "state.")) and not t.columns[c].shape and t.columns[c].dtype == "float32"

    def values(t: Any, c: str) -> Any:
        v = np.asarray(t.column(c), np.float64)
        return v[np.isfinite(v)]

    def negligible(v: Any) -> bool:
        return v.size == 0 or float(np.ptp(v)) < 1e-2

    scored, added = [], []
    for c in (c for c in last.columns if scalar(last, c)):
        b = values(last, c)
        if c in first.columns and scalar(first, c):
            a = values(first, c)
            if negligible(a) and negligible(b):
                continue
            change = abs(a.mean() - b.mean()) / (a.std() + b.std() + 1e-9) + abs(np.log((b.std() + 1e-9) / (a.std() + 1e-9)))
            scored.append((-change, c))
        elif not negligible(b):
            added.append(c)
    common = [c for _, c in sorted(scored)]
    chosen = common[:max(1, n - min(2, len(added)))] + added[:2]
    chosen += [c for c in common if c not in chosen][:n - len(chosen)]
    if chosen:
        return chosen[:n]
    return [c for c in last.columns if c.startswith("mean.") and c in first.columns][:n]


def figure_latents(first: Any, last: Any, first_round: int, last_round: int, output: str,
                   wanted: Optional[Sequence[str]] = None) -> Optional[str]:
    """Figure 6: chosen latents over the first traced episode, first round against last round."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = choose_latents(first, last, wanted)
    if not names:
        return None
    fig = Figure(figsize=(8.0, 1.6 + 1.8 * len(names)), layout="constrained")
    axes = fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        for table, label, color in ((first, f"round {first_round}", "C0"), (last, f"round {last_round}", "C3")):
            if name not in table.columns:
                continue
            ep = table.column("episode")
            sel = ep == ep.min()
            ax.plot(table.column("step")[sel], np.asarray(table.column(name), np.float64)[sel], lw=1.0,
                    color=color, label=label)
        ax.set_ylabel(name.split(".", 1)[1], fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("step (first traced episode)")
    fig.suptitle("latents before and after refinement", fontsize=10)
    from ..plot.figures import save_png

    return save_png(FigureCanvasAgg(fig), output)

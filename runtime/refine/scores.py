"""How a run speaks of its score: the environment's metric (`spec.metric`), not always the return.

Car Racing is scored by the return (higher is better, one decimal); the door by the minimum
handle-to-target distance (metres, lower is better, four decimals). Every place the loop
prints, plots, prompts or saves a score goes through these functions, so a return reads
exactly as it always did and any other metric carries its name, unit and direction:

    score_text(0.1133, 0.1846, DOOR_METRIC)
        -> "min handle-to-target distance 0.1133 ± 0.1846 m (lower is better)"
    score_text(612.31, 80.1, RETURN) -> "return 612.3 ± 80.1"

metrics.json keeps `eval.mean` / `eval.std` as the metric's mean and std, and `eval.scores`
(per seed) beside `eval.returns`, with `eval.metric` (its key) and `eval.higher_is_better`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence


def _decimals(metric: Any) -> int:
    """Decimals shown: a return to 0.1, a distance to 0.1 mm."""
    return 1 if metric.is_return else 4


def _saved(metric: Any) -> int:
    """Decimals kept in JSON."""
    return 2 if metric.is_return else 4


def number(value: float, metric: Any) -> str:
    return f"{value:.{_decimals(metric)}f}"


def mean_std(mean: float, std: float, metric: Any) -> str:
    """`612.3 ± 80.1` (return) or `0.1133 ± 0.1846` (the door's distance)."""
    return f"{number(mean, metric)} ± {number(std, metric)}"


def unit_text(metric: Any) -> str:
    """` m` after a number of the door's distance; nothing after a return."""
    return f" {metric.unit}" if metric.unit else ""



def score_text(mean: float, std: float, metric: Any) -> str:
    """`return 612.3 ± 80.1`, or `min handle-to-target distance 0.1133 ± 0.1846 m (lower is better)`."""
    if metric.is_return:
        return f"return {mean_std(mean, std, metric)}"
    return f"{metric.name} {mean_std(mean, std, metric)}{unit_text(metric)} ({metric.direction})"


def per_seed_text(seeds: Sequence[int], returns: Sequence[float], scores: Optional[Sequence[float]],
                  metric: Any, successes: Optional[Sequence[bool]] = None) -> str:
    """Each traced episode's score: `return 938.1 on seed 1, 255.0 on seed 2`, or
    `min handle-to-target distance 0.5412 m on seed 1, 0.1021 m on seed 2 (lower is better;
    returns 3.2, 480.1)`; with the env's success flags, `...; success on seed 2 only)`."""
    if metric.is_return or scores is None:
        text = "return " + ", ".join(f"{r:.1f} on seed {s}" for s, r in zip(seeds, returns))
        return text + (f" ({_successes(seeds, successes)})" if successes is not None else "")
    values = ", ".join(f"{number(v, metric)}{unit_text(metric)} on seed {s}" for s, v in zip(seeds, scores))
    return (f"{metric.name} {values} ({metric.direction}; "
            f"return{'s' if len(returns) > 1 else ''} {', '.join(f'{r:.1f}' for r in returns)}"
            + (f"; {_successes(seeds, successes)}" if successes is not None else "") + ")")


def _successes(seeds: Sequence[int], successes: Sequence[bool]) -> str:
    """`success on every seed`, `success on no seed`, or `success on seed 2 only`."""
    won = [str(s) for s, ok in zip(seeds, successes) if ok]
    if len(won) == len(seeds):
        return "the environment reports success on every seed"
    if not won:
        return "the environment reports success on no seed"
    return f"the environment reports success on seed{'s' if len(won) > 1 else ''} {', '.join(won)} only"


def column(metric: Any) -> str:
    """The table's score column: `return (mean ± std)`, or
    `min handle-to-target distance, m (mean ± std, lower is better)`."""
    if metric.is_return:
        return "return (mean ± std)"
    unit = f", {metric.unit}" if metric.unit else ""
    return f"{metric.name}{unit} (mean ± std, {metric.direction})"


def axis_label(metric: Any, n_seeds: int) -> str:
    if metric.is_return:
        return f"return over {n_seeds} unseen seeds"
    unit = f" ({metric.unit})" if metric.unit else ""
    return f"{metric.name}{unit}\n{n_seeds} unseen seeds, {metric.direction}"


def eval_json(result: Any, metric: Any) -> dict:
    """metrics.json's `eval` from an `EvalResult`: `mean`/`std` are the metric's, `scores` its
    per-seed values, `returns` the per-seed returns (the same numbers for the return)."""
    keep = _saved(metric)
    out = {"seeds": [int(s) for s in result.seeds], "returns": [round(float(r), 2) for r in result.returns],
           "mean": round(result.mean, keep), "std": round(result.std, keep),
           "metric": metric.key, "higher_is_better": metric.higher_is_better,
           "scores": [round(float(v), keep) for v in result.values]}
    if getattr(result, "successes", None) is not None:  # the env's own success flag (the door)
        out.update(success_rate=round(result.success_rate, 4), successes=[bool(x) for x in result.successes])
    if getattr(result, "solved_at", None) is not None:  # the task's "solved" score (Car Racing: 900)
        out.update(solved_at=result.solved_at, solved_share=round(result.solved_share, 4))
    return out


def success_column(history: Sequence[dict]) -> Optional[str]:
    """The heading of the success column for rounds' metrics.json (None when no evaluated
    round has one): the env's success flag where it reports one, else the task's "solved"
    share."""
    evs = [m.get("eval") or {} for m in history]
    if any(e.get("success_rate") is not None for e in evs):
        return "success rate"
    solved = [e["solved_at"] for e in evs if e.get("solved_share") is not None]
    return f"solved (score {'>=' if _higher(evs) else '<='} {solved[0]:g})" if solved else None


def _higher(evs: Sequence[dict]) -> bool:
    return next((bool(e["higher_is_better"]) for e in evs if "higher_is_better" in e), True)


def success_cell(ev: Optional[dict]) -> str:
    """`0.90 (9 of 10)` from a round's `eval`: the success rate, else the solved share; `-` if none."""
    if not ev:
        return "-"
    n = len(ev.get("seeds", []))
    for key in ("success_rate", "solved_share"):
        if ev.get(key) is not None:
            return f"{ev[key]:.2f} ({round(ev[key] * n)} of {n})"
    return "-"


def success_text(ev: Optional[dict]) -> str:
    """`, success 0.90 (9 of 10)` or `, solved (score >= 900) 0.90 (9 of 10)` for a sentence; '' if none."""
    heading = success_column([{"eval": ev}]) if ev else None
    return "" if heading is None else f", {heading.replace(' rate', '')} {success_cell(ev)}"


def rounded(values: Sequence[float], metric: Any) -> list[float]:
    return [round(float(v), _saved(metric)) for v in values]


def metric_json(metric: Any) -> dict:
    """summary.json's description of the metric."""
    return {"key": metric.key, "name": metric.name, "unit": metric.unit,
            "higher_is_better": metric.higher_is_better, "direction": metric.direction, "doc": metric.doc}


def best(history: Sequence[dict], metric: Any) -> Optional[dict]:
    """The evaluated round with the best mean in the metric's direction (the first of equals)."""
    evaluated = [m for m in history if m.get("eval")]
    if not evaluated:
        return None
    sign = 1.0 if metric.higher_is_better else -1.0
    return max(evaluated, key=lambda m: sign * m["eval"]["mean"])

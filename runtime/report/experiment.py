"""An experiment on the page (`polc report results/car_racing`): the paper's Table 1 as
measured, with the paper's numbers beside it, the per-round scores (Figure 4, or the
door's Figure 5), the RL learning curves, and how many resets each structure needed to
reach the solved score (900 for Car Racing).

It reads what `polc experiment` writes (polc.runtime.experiment.report): results.json,
the plots rounds.png and rl_curves.png, and the RL logs rl/<structure>/seed<k>/log.json.
The paper's numbers are those of /work/shared/paper/FACTS.md (the paper's Table 1 and
its door revisions), quoted, never measured here; a quick run's numbers are marked as
not comparable with them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import page
from .page import Chart, ReportError, Series, esc, num
from .run import MetricView

# The paper's Table 1 (Car Racing): (structure, stage, RL budget) -> (LLM calls, resets, return).
PAPER_TABLE1 = {
    ("expert", "demo", None): ("-", "-", "871.0 ± 12.8 (human)"),
    ("mlp", "IL", None): ("0", "0", "636.6 ± 258.6"),
    ("mlp", "RL", "low"): ("0", "400", "591.8 ± 330.5"),
    ("mlp", "RL", "high"): ("0", "2000", "850.2 ± 101.4"),
    ("initial", "IL", None): ("1", "0", "766.5 ± 100.4"),
    ("initial", "RL", "low"): ("1", "400", "657.0 ± 37.3"),
    ("initial", "RL", "high"): ("1", "2000", "901.1 ± 14.0"),
    ("refined", "IL", None): ("9", "4", "882.0 ± 29.3"),
    ("refined", "RL", "low"): ("9", "404", "900.5 ± 14.2"),
    ("refined", "RL", "high"): ("9", "2004", "906.5 ± 24.0"),
}
PAPER_MLES = ("MLES (LLM program evolution)", "2016", "8064", "847.1 ± 132.5")
# The paper's door-opening revisions: min handle-to-target distance, mean ± std over 10 configurations.
PAPER_DOOR = ("0.548 ± 0.0", "0.545 ± 0.008", "0.540 ± 0.023", "0.110 ± 0.059")

_REACHED = re.compile(r"first reached ([0-9.]+) after (\d+) resets(.*)$")
_NEVER = re.compile(r"never reached ([0-9.]+) \(last ([-0-9.]+)\)")


def read_results(path: Path) -> dict:
    f = path / "results.json"
    try:
        results = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"cannot read '{f}': {e}") from None
    except ValueError as e:
        raise ReportError(f"'{f}' is not valid JSON ({e}); it is not a results file polc experiment wrote") from None
    if not isinstance(results, dict) or not isinstance(results.get("rows"), list) or \
            not all(isinstance(r, dict) and {"method", "structure", "stage", "mean", "std"} <= set(r)
                    for r in results["rows"]):
        raise ReportError(f"'{f}' has no list of rows (method, structure, stage, mean, std); it is not a results "
                          "file polc experiment wrote")
    return results


def _metric(results: dict) -> MetricView:
    m = results.get("metric") or {}
    return MetricView(str(m.get("name", "return")), str(m.get("key", "return")), str(m.get("unit", "") or ""),
                      bool(m.get("higher_is_better", True)))


def _levels(rows: list[dict]) -> dict[int, str]:
    """Each RL row's budget as the paper names it: of a structure's RL rows the fewest resets
    are "low", the most "high"."""
    out = {}
    for s in {r["structure"] for r in rows}:
        rl = sorted((r["resets"], i) for i, r in enumerate(rows) if r["structure"] == s and r["stage"] == "RL")
        for j, (_, i) in enumerate(rl):
            out[i] = "low" if j == 0 and len(rl) > 1 else "high" if j == len(rl) - 1 and len(rl) > 1 else "RL"
    return out


def table1(results: dict) -> str:
    from ..refine.scores import mean_std

    metric, rows = _metric(results), results["rows"]
    levels = _levels(rows)
    paper = results.get("experiment") == "car_racing"
    pm = (lambda m, s: "-" if m is None else mean_std(m, s or 0.0, metric))  # noqa: E731
    sampled = any(r.get("sampled_mean") is not None for r in rows)
    solved = any(r.get("solved_share") is not None for r in rows)
    header = ["Method", "Demo", "LLM calls", "Resets", f"{metric.name}, mean actions"]
    header += [f"{metric.name}, sampled actions"] * sampled
    header += [f"≥ {num(results.get('solved_at'))}, mean actions"] * solved
    header += ["paper: LLM calls", "paper: resets", f"paper: {metric.name}"] * paper
    body = []
    for i, r in enumerate(rows):
        demo = r["stage"] == "demo"
        cells = [r["method"], "-" if demo else str(r.get("demos", "-")), "-" if demo else str(r.get("llm_calls", "-")),
                 "-" if demo else str(r.get("resets", "-")), pm(r["mean"], r["std"])]
        cells += [pm(r.get("sampled_mean"), r.get("sampled_std"))] * sampled
        cells += ["-" if r.get("solved_share") is None else f"{r['solved_share']:.2f}"] * solved
        if paper:
            cells += list(PAPER_TABLE1.get((r["structure"], r["stage"], levels.get(i)), ("", "", "")))
        body.append(cells)
    if paper:
        body.append([PAPER_MLES[0] + " (paper only)", "", "", "", "-"] + ["-"] * (sampled + solved) + list(PAPER_MLES[1:]))
    note = ("<p>Mean ± std over the unseen evaluation seeds "
            f"{esc(_seeds(results))}; resets count every episode used for refinement and training, not evaluation. "
            "The paper's columns are quoted from the paper (its Table 1: a human demonstration, 10 tracks), "
            "not measured here.</p>") if paper else ""
    return page.table(header, body) + note


def _seeds(results: dict) -> str:
    seeds = (results.get("evaluation") or {}).get("seeds") or []
    return f"({len(seeds)}: {seeds[0]}..{seeds[-1]})" if seeds else ""


def rounds_section(results: dict, out: Path) -> str:
    ref = results.get("refinement") or {}
    rounds = [r for r in ref.get("rounds", []) if isinstance(r, dict) and r.get("mean") is not None]
    if not rounds:
        return page.missing("This experiment has no refinement rounds.")
    from ..refine.scores import mean_std

    metric = _metric(results)
    series = Series("refined structure + IL, per round", [r["round"] for r in rounds], [r["mean"] for r in rounds],
                    err=[r.get("std", 0.0) for r in rounds],
                    tips=[f"{mean_std(r['mean'], r.get('std', 0.0), metric)} (move {r.get('move') or '-'})"
                          for r in rounds])
    refs = [(r["mean"], f"{r['method']}: {num(r['mean'])}") for r in results["rows"]
            if r["stage"] == "demo" or (r["stage"] == "IL" and r["structure"] != "refined")]
    chart = page.line_chart(Chart(f"{results.get('experiment', '?')}: {metric.name} per refinement round", "round",
                                  metric.name, [series], hlines=refs,
                                  xticks=[(r["round"], f"{r['round']} {r.get('move') or ''}") for r in rounds]))
    header = ["round", f"{metric.name} (mean ± std)", "move"]
    body = [[str(r["round"]), mean_std(r["mean"], r.get("std", 0.0), metric), r.get("move") or "-"] for r in rounds]
    paper = ""
    if results.get("experiment") == "door":  # the paper's rounds are not this run's: side by side, not row by row
        paper = (f"<p>The paper's revisions (min handle-to-target distance over 10 configurations): "
                 f"{esc(' → '.join(PAPER_DOOR))}.</p>")
    who = ("the bundled SCRIPTED session (replies played back, no model called)" if ref.get("scripted")
           else f"the model {ref.get('llm', '?')}")
    text = (f"<p>Refined with {esc(who)}: {esc(ref.get('llm_calls', '?'))} LLM calls, {esc(ref.get('resets', '?'))} "
            f"resets; {esc(ref.get('status', ''))}.</p>")
    link = ""
    if ref.get("run"):
        link = f"<p>The run: <code>{esc(ref['run'])}</code> (<code>polc report {esc(ref['run'])}</code> shows it).</p>"
    return (text + chart + page.table(header, body) + paper + link
            + _png(out / "rounds.png", "the experiment's own per-round plot"))


def _png(f: Path, alt: str, open_: bool = False) -> str:
    if not f.is_file():
        return page.missing(f"{f} is missing.")
    data = f.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return page.missing(f"{f} is not a PNG image.")
    return page.details(alt + f" ({f.name})", page.png(data, alt), open_)


def curves_section(results: dict, out: Path) -> str:
    """The RL curves from the RL logs (mean training return against resets, refinement
    resets included for the refined structure), the plot polc experiment drew, and the
    resets each structure needed to reach the solved score."""
    from ..experiment.report import curve

    budget = results.get("budget") or {}
    ref = results.get("refinement") or {}
    from ..experiment.plan import TASKS

    task = TASKS.get(str(results.get("experiment")))
    labels = {st.key: st.label for st in task.structures} if task else {}
    series, problems = [], []
    rl_dir = out / "rl"
    keys = sorted(d.name for d in rl_dir.iterdir() if d.is_dir()) if rl_dir.is_dir() else []
    for key in keys:
        logs = []
        for k in range(int(budget.get("rl_seeds", 1))):
            f = rl_dir / key / f"seed{k}" / "log.json"
            if not f.is_file():
                continue
            try:
                log = json.loads(f.read_text(encoding="utf-8"))["log"]
                if log:
                    logs.append(log)
            except (ValueError, KeyError, TypeError, OSError) as e:
                problems.append(f"{f} cannot be read ({e}).")
        if logs:
            try:
                resets, mean, lo, hi, band = curve(logs)
            except (KeyError, TypeError) as e:
                problems.append(f"the RL logs of {key} lack {e}.")
                continue
            offset = ref.get("resets", 0) if key == "refined" else 0
            x = [r + offset for r in resets]
            series.append(Series(labels.get(key, key), x, mean, tips=[f"{num(m)} (band {num(a)}..{num(b)}: {band})"
                                                     for m, a, b in zip(mean, lo, hi)]))
    body = "".join(page.missing(p) for p in problems)
    solved = results.get("solved_at")
    if series:
        body += page.line_chart(Chart("RL from the IL params: mean training return (sampled actions)",
                                      "resets", "training return", series,
                                      hlines=[(solved, f"solved: {num(solved)}")] if solved is not None else []))
    elif not any(r["stage"] == "RL" for r in results["rows"]):
        return body + "<p>This experiment has no RL rows (the paper reports none for this task).</p>"
    elif not (out / "rl_curves.png").is_file():
        body += page.missing("No RL logs (rl/<structure>/seed<k>/log.json) and no rl_curves.png in this directory.")
    body += _png(out / "rl_curves.png", "the experiment's own RL curves", open_=not series) if (out / "rl_curves.png").is_file() else ""
    return body + resets_to_solved(results)


def resets_to_solved(results: dict) -> str:
    """Per structure, from its RL rows' notes (polc.runtime.experiment.run.reached): the
    resets to reach the threshold, refinement resets included, or the last value seen."""
    rows = []
    for r in results["rows"]:
        if r["stage"] != "RL" or not r.get("note"):
            continue
        m, n = _REACHED.search(r["note"]), _NEVER.search(r["note"])
        if m:
            rows.append([r["method"], f"{m.group(2)}{m.group(3)}"])
        elif n:
            rows.append([r["method"], f"not reached in {r.get('resets', '?')} (last {n.group(2)})"])
        else:
            rows.append([r["method"], r["note"]])
    if not rows:
        return ""
    return ("<h3>Resets to reach the solved score</h3><p>The mean training return over consecutive updates "
            "(sampled actions), as polc experiment counts it.</p>" + page.table(["RL run", "resets"], rows))


def _quick_notice(results: dict) -> str:
    """What a quick run's numbers are, as polc experiment says it in its table."""
    from ..experiment.plan import Budget
    from ..experiment.report import quick_notice

    try:
        return quick_notice(Budget(**results.get("budget", {})))
    except TypeError:  # a budget of another polc version: say the gist
        return "QUICK RUN: it exercises every step; its numbers are not results and not comparable with the " \
               "full run's or the paper's"


def experiment_page(path: str | Path) -> str:
    out = Path(path)
    results = read_results(out)
    name = results.get("experiment", out.name)
    figure = "Table 1" if name == "car_racing" else "Figure 5" if name == "door" else "results"
    overview = ""
    if results.get("quick"):
        overview += f'<p class="notice">{esc(_quick_notice(results))}.</p>'
    if results.get("command"):
        total = results.get("step_seconds_total", results.get("wall_seconds"))  # the older name
        overview += f"<p>Command: <code>{esc(results['command'])}</code>; compute time (the steps' own times, " \
                    f"summed) {esc(num(total))} s.</p>"
    sections = [("table", f"The paper's {figure}, measured", overview + table1(results)),
                ("rounds", "Score per refinement round", rounds_section(results, out)),
                ("rl", "RL curves", curves_section(results, out))]
    subtitle = f"polc experiment {name}: env {results.get('env', '?')}, {len(results['rows'])} rows"
    return page.document(f"polc experiment {name}" + (" (QUICK RUN)" if results.get("quick") else ""), subtitle,
                         sections)


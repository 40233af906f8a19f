"""A refinement run on the page (`polc report runs/NAME`): the score per round (the paper's
Figure 4), then per round the structure (highlighted, and its diff against the round
before), its dataflow graph, the fitted weights with their constraints (a weight pinned
at a bound marked), the analysis code and what it printed, the model's move and
reasoning, polc's diagnostics, tokens and resets; then the chosen latents of the first
and last traced round over an episode (Figure 6).

The run directory is the one `polc refine` writes (polc.runtime.refine.rundir). A run
that is not one (no run.json, another format) or whose summary.json is not valid is
refused (`ReportError`); inside a round, a missing or damaged file (a killed run, a
hand-edited file) is said on the page where it would have been shown, and the rest of
the page is drawn. Files of a run are read, never written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from polc.text import constraint

from . import page
from .page import Chart, ReportError, Series, esc, num
from .source import diff, highlight

_ROUND = re.compile(r"^round_(\d{2,})$")
_ANALYSIS = re.compile(r"^analysis_(\d+)\.py$")


@dataclass(frozen=True)
class MetricView:
    """What the page needs of the run's metric (summary.json's `metric`), with the
    attributes polc.runtime.refine.scores formats numbers by."""

    name: str = "return"
    key: str = "return"
    unit: str = ""
    higher_is_better: bool = True

    @property
    def is_return(self) -> bool:
        return self.key == "return"

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"


@dataclass
class Round:
    k: int
    path: Path
    done: bool
    metrics: Optional[dict] = None
    problems: list[str] = field(default_factory=list)  # what is missing or damaged, as sentences

    def text(self, name: str) -> Optional[str]:
        f = self.path / name
        try:
            return f.read_text(encoding="utf-8") if f.is_file() else None
        except (OSError, UnicodeDecodeError) as e:
            self.problems.append(f"{f} cannot be read ({e}).")
            return None

    def json(self, name: str) -> Optional[Any]:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            self.problems.append(f"{self.path / name} is not valid JSON ({e}).")
            return None


@dataclass
class Run:
    path: Path
    config: dict
    summary: Optional[dict]
    rounds: list[Round]
    metric: MetricView
    aside: list[str]  # rounds an earlier attempt left unfinished (round_03.interrupted-1)
    paused: list[str]  # of those, the ones a `manual:` session paused for a hand-written reply


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"cannot read {what} '{path}': {e}") from None
    except ValueError as e:
        raise ReportError(f"'{path}' is not valid JSON ({e}); it is not a {what} polc wrote") from None


def read_run(path: str | Path) -> Run:
    """The run directory at `path`, or a ReportError saying why it is not one."""
    from ..refine.rundir import RUN_FORMAT, WAITING

    p = Path(path)
    if not p.is_dir():
        raise ReportError(f"'{p}' is not a directory")
    if not (p / "run.json").is_file():
        raise ReportError(f"'{p}' is not a polc refine run directory (it has no run.json)")
    config = _read_json(p / "run.json", "run.json")
    if not isinstance(config, dict) or config.get("format") != RUN_FORMAT:
        raise ReportError(f"'{p / 'run.json'}' is not a {RUN_FORMAT} file")
    summary = None
    if (p / "summary.json").exists():
        summary = _read_json(p / "summary.json", "summary.json")
        if not isinstance(summary, dict) or not isinstance(summary.get("rounds"), list) or \
                not all(isinstance(m, dict) for m in summary["rounds"]):
            raise ReportError(f"'{p / 'summary.json'}' has no list of rounds; it is not a summary polc refine wrote")
    found = sorted((int(m.group(1)), d) for d in p.iterdir() if d.is_dir() and (m := _ROUND.match(d.name)))
    rounds = []
    for k, d in found:
        r = Round(k, d, (d / "done").is_file())
        r.metrics = r.json("metrics.json")
        if r.metrics is not None and not isinstance(r.metrics, dict):
            r.problems.append(f"{d / 'metrics.json'} is not a JSON object.")
            r.metrics = None
        if r.metrics is None and summary is not None:  # summary.json holds the same numbers
            r.metrics = next((m for m in summary["rounds"] if m.get("round") == k), None)
        if r.metrics is None:
            r.problems.append(f"round {k} has no metrics" + ("" if r.done else " (it did not finish)") + ".")
        rounds.append(r)
    mj = (summary or {}).get("metric") or {}
    metric = MetricView(str(mj.get("name", "return")), str(mj.get("key", "return")), str(mj.get("unit", "")),
                        bool(mj.get("higher_is_better", True)))
    aside = sorted(d.name for d in p.iterdir() if d.is_dir() and ".interrupted-" in d.name)
    paused = [name for name in aside if (p / name / WAITING).is_file()]
    return Run(p, config, summary, rounds, metric, [n for n in aside if n not in paused], paused)


# ---- the score per round ---------------------------------------------------------------------


def _evaluated(run: Run) -> list[dict]:
    return [r.metrics for r in run.rounds if r.metrics and isinstance(r.metrics.get("eval"), dict)
            and isinstance(r.metrics["eval"].get("mean"), (int, float))]


def _move(m: dict) -> str:
    move = m.get("move") or {}
    return move.get("kind") or ("final" if m.get("final") else "-")


def scores_section(run: Run) -> str:
    from ..refine.scores import mean_std

    ms = _evaluated(run)
    if not ms:
        return page.missing("No round was evaluated: there is no score to plot.")
    metric = run.metric
    ev = [m["eval"] for m in ms]
    series = Series(f"{metric.name}, mean ± std", [m["round"] for m in ms], [e["mean"] for e in ev],
                    err=[e.get("std", 0.0) for e in ev], dots=[e.get("scores", e.get("returns", [])) for e in ev],
                    tips=[f"{mean_std(e['mean'], e.get('std', 0.0), metric)} over {len(e.get('seeds', []))} "
                          f"unseen seeds (move {_move(m)})" for m, e in zip(ms, ev)])
    ticks = [(m["round"], f"{m['round']} {_move(m)}") for m in ms]
    chart = page.line_chart(Chart(f"{run.path.name}: {metric.name} per round ({metric.direction})",
                                  "round", metric.name + (f" ({metric.unit})" if metric.unit else ""), [series],
                                  xticks=ticks))
    return chart + "<p>Grey dots: each unseen seed's score. Hover a round to read its numbers.</p>" + _table(run)


def _table(run: Run) -> str:
    from ..refine.report import columns, priced, rows
    from ..refine.scores import success_column

    history = [r.metrics for r in run.rounds if r.metrics]
    try:
        return page.table(columns(run.metric, priced(history), success_column(history)), rows(history, run.metric))
    except (KeyError, TypeError) as e:
        return page.missing(f"The per-round table cannot be drawn: a round's metrics lack {e}.")


# ---- one round -------------------------------------------------------------------------------


def _program(text: str, file: str) -> tuple[Optional[Any], Optional[str]]:
    """(checked program, None) or (None, why not)."""
    import polc

    try:
        return polc.loads(text, file, analyze=False), None
    except polc.PolError as e:
        return None, f"{file} does not pass polc check:\n" + polc.render_all(e.diagnostics, text)


def pinned(w: Any, value: Any) -> list[str]:
    """The bounds (with the element) that a fitted weight sits on, by the diagnostics' rule
    (polc.runtime.diagnostics.checks.at_bounds)."""
    from ..diagnostics.checks import at_bounds, element

    return [f"{w.name}{element(w.type.shape, b.index)} at its {b.side} bound {num(b.bound)}"
            for b in at_bounds(w, value)]


def weights_table(program: Any, params: Optional[dict]) -> str:
    weights = (params or {}).get("weights") if isinstance(params, dict) else None
    rows = []
    for w in program.typed.weights:
        value = weights.get(w.name) if isinstance(weights, dict) else None
        marks = pinned(w, value) if value is not None else []
        shown = json.dumps(value) if value is not None else "(not fitted)"
        cell = esc(shown) + "".join(f'<br><span class="pinned">pinned: {esc(m)}</span>' for m in marks)
        prior = str(w.prior) if w.prior is not None else ""
        rows.append([esc(w.name), cell, esc(constraint(w.lo, w.hi)), esc(json.dumps(w.init)), esc(prior), esc(w.doc or "")])
    if not rows:
        return "<p>This structure declares no weights.</p>"
    fit = (params or {}).get("fit") if isinstance(params, dict) else None
    note = ""
    if isinstance(fit, dict):
        note = (f"<p>Fit: loss {esc(fit.get('loss', '?'))}, validation {esc(num(fit.get('val_loss')))}, "
                f"train {esc(num(fit.get('train_loss')))}, {esc(fit.get('epoch', '?'))} epochs "
                f"(restart {esc(fit.get('restart', '?'))}), {esc(num(fit.get('seconds')))} s.</p>")
    return note + page.table(["weight", "fitted value", "constraint", "declared", "prior", "doc"], rows, raw=True)


def _analyses(r: Round) -> str:
    infos = {a.get("file"): a for a in (r.metrics or {}).get("analyses", []) if isinstance(a, dict)}
    files = sorted((int(m.group(1)), f.name) for f in r.path.iterdir() if (m := _ANALYSIS.match(f.name)))
    out = []
    for n, name in files:
        info = infos.get(name, {})
        state = "" if not info else (" (ran)" if info.get("ok") else f" (failed: {info.get('error') or '?'})")
        printed = r.text(name[:-3] + ".txt")
        out.append(f"<h4>{esc(name)}{esc(state)}</h4>" + page.pre(r.text(name) or "", "code")
                   + ("<p>What it printed:</p>" + page.pre(printed) if printed is not None
                      else page.missing(f"{name[:-3]}.txt (what it printed) is missing.")))
    return "".join(out) or "<p>No analysis code in this round.</p>"


def _exchanges(r: Round) -> str:
    raw = r.text("exchanges.jsonl")
    if raw is None:
        return "<p>No LLM exchange in this round.</p>"
    out = []
    for i, line in enumerate(raw.splitlines(), 1):
        try:
            x = json.loads(line)
        except ValueError:
            r.problems.append(f"{r.path / 'exchanges.jsonl'} line {i} is not JSON (a torn write?).")
            continue
        if not isinstance(x, dict):
            continue
        head = (f"exchange {x.get('index', i - 1)}: {x.get('purpose', '?')} ({x.get('model', '?')}, "
                f"{x.get('input_tokens', '?')} in / {x.get('output_tokens', '?')} out tokens)")
        prompt = "\n\n".join(f"[{m.get('role')}]\n{m.get('text', '')}" for m in x.get("messages", [])
                             if isinstance(m, dict))
        out.append(page.details(head, "<p>Reply:</p>" + page.pre(str(x.get("reply", "")))
                                + page.details("the prompt", page.pre(prompt))))
    return "".join(out)


def _decision(r: Round) -> str:
    m = r.metrics or {}
    move = m.get("move") or {}
    parts = []
    if move:
        parts.append(f'<p><span class="move">{esc(move.get("kind", "?"))}</span>: {esc(move.get("summary", ""))}</p>')
        parts += [f"<p>{esc(n)}</p>" for n in move.get("notes", []) if isinstance(n, str)]
    elif m.get("final"):
        parts.append("<p>Final round: evaluated, no move asked.</p>")
    if m.get("end"):
        parts.append(f'<p class="notice">The run ended here: {esc(m["end"])}</p>')
    return "".join(parts) or "<p>No move recorded.</p>"


def _numbers(r: Round, metric: MetricView) -> str:
    from ..refine.scores import score_text, success_text

    m = r.metrics or {}
    llm = m.get("llm") or {}
    ev = m.get("eval") or {}
    rows = []
    if ev.get("mean") is not None:
        rows.append(["score", f"{score_text(ev['mean'], ev.get('std', 0.0), metric)} over {len(ev.get('seeds', []))} "
                              f"unseen seeds {ev.get('seeds', [])}{success_text(ev)}"])
    if llm:
        rows.append(["LLM", f"{llm.get('calls', 0)} call(s), {llm.get('input_tokens', 0):,} input and "
                            f"{llm.get('output_tokens', 0):,} output tokens; repairs {llm.get('repairs', 0)}, "
                            f"reply retries {llm.get('reply_retries', 0)}, prompts differing from a recording "
                            f"{llm.get('mismatches', 0)}"])
        if llm.get("cost") is not None:
            rows.append(["cost", str(llm["cost"])])
    rows.append(["resets", f"{m.get('resets', 0)} traced episode(s) given to the model (seeds "
                           f"{m.get('rollout_seeds', [])}, returns {m.get('rollout_returns', [])}); "
                           f"{m.get('eval_episodes', 0)} evaluation episode(s)"])
    if m.get("seconds") is not None:
        rows.append(["time", f"{num(m['seconds'])} s " + json.dumps(m.get("phases", {}))])
    return page.table(["", ""], rows)


def _checks(r: Round) -> str:
    """The revisions that failed `polc check` before a repair, with what it said."""
    out = []
    for f in sorted(r.path.glob("*.check.txt")):
        pol = f.name[:-len(".check.txt")] + ".pol"
        out.append(page.details(f"{pol}: polc check said", highlight(r.text(pol) or "") + page.pre(r.text(f.name) or "")))
    return "".join(out)


def round_section(run: Run, i: int) -> str:
    r = run.rounds[i]
    out = []
    if not r.done:
        out.append(page.missing(f"Round {r.k} did not finish (no done marker): what it wrote so far is shown."))
    source = r.text("policy.pol")
    program = None
    if source is None:
        out.append(page.missing(f"{r.path / 'policy.pol'} is missing: no structure to show."))
    else:
        out.append("<h3>Structure</h3>" + highlight(source))
        prev = next((run.rounds[j].text("policy.pol") for j in range(i - 1, -1, -1)
                     if run.rounds[j].text("policy.pol") is not None), None)
        if prev is not None:
            out.append("<h3>Changes from the round before</h3>"
                       + diff(prev, source, f"round_{run.rounds[i - 1].k:02d}/policy.pol", f"round_{r.k:02d}/policy.pol"))
        program, why = _program(source, str(r.path / "policy.pol"))
        if program is None:
            out.append(page.missing(why))
        else:
            from polc.graph import to_svg

            out.append("<h3>Dataflow graph</h3>" + page.inline_svg(to_svg(program.typed), f"r{r.k:02d}"))
    params = r.json("params.json")
    if params is None:
        if not any("params.json" in p for p in r.problems):  # a damaged one is said at the top
            out.append("<h3>Fitted weights</h3>" + page.missing(f"{r.path / 'params.json'} is missing: no fit."))
    elif program is not None:
        out.append("<h3>Fitted weights</h3>" + weights_table(program, params))
    elif isinstance(params, dict) and isinstance(params.get("weights"), dict):  # no checked structure to read
        out.append("<h3>Fitted weights</h3><p>(without their constraints: the structure does not check)</p>"
                   + page.table(["weight", "fitted value"], [[k, json.dumps(v)] for k, v in params["weights"].items()]))
    out.append("<h3>Numbers</h3>" + _numbers(r, run.metric))
    out.append("<h3>Analysis</h3>" + _analyses(r))
    diag = r.text("diagnostics.txt")
    out.append("<h3>polc's diagnostics</h3>" + (page.pre(diag) if diag is not None else "<p>None in this round.</p>"))
    out.append("<h3>The model's move</h3>" + _decision(r) + _checks(r))
    out.append("<h3>LLM exchanges</h3>" + _exchanges(r))
    if r.problems:
        out.insert(0, "".join(page.missing(p) for p in r.problems))
    return "".join(out)


# ---- latents (Figure 6) ----------------------------------------------------------------------


def _task_latents(run: Run) -> tuple[str, ...]:
    """The latents the task's task.md names for Figure 6 (none when the task folder is gone)."""
    from ..task import TaskError, load_task

    try:
        return load_task(str(run.config.get("task", ""))).latents
    except (TaskError, OSError, ValueError):
        return ()


def latents_section(run: Run) -> str:
    from ..io.table import TableError, read_table
    from ..refine.report import choose_latents
    from .trace import latent_charts

    traced, notes = [], []
    for r in run.rounds:
        f = r.path / "trace.parquet"
        if not f.is_file():
            continue
        try:
            traced.append((r.k, read_table(str(f))))
        except TableError as e:
            notes.append(page.missing(f"{e}."))
    if not traced:
        return "".join(notes) + page.missing("No round has a readable trace: no latents to plot.")
    (k0, first), (k1, last) = traced[0], traced[-1]
    names = choose_latents(first, last, _task_latents(run) or None)
    pairs = [(f"round {k0}", first)] + ([(f"round {k1}", last)] if k1 != k0 else [])
    return "".join(notes) + "<p>Hover a plot to read the step and the values.</p>" + latent_charts(pairs, names)


# ---- the page ----------------------------------------------------------------------------------


def run_page(path: str | Path) -> str:
    """The whole page of the run at `path` (ReportError when it is not a run directory)."""
    run = read_run(path)
    s = run.summary or {}
    task = run.config.get("task", "?")
    model = s.get("llm") or run.config.get("llm") or "not recorded"
    subtitle = f"task {task}, model {model}, {len(run.rounds)} round(s)"
    if s.get("status"):
        subtitle += f", status: {s['status']}"
    overview = ""
    if s.get("notice"):
        overview += f'<p class="notice">{esc(s["notice"])}</p>'
    if run.summary is None:
        overview += page.missing(f"{run.path / 'summary.json'} is missing (the run stopped before its first round "
                                 "ended, or was killed): the rounds are read from their own files.")
    if run.paused:
        overview += (f"<p>Pauses for a hand-written reply (a <code>manual:</code> session; each round ran again "
                     f"on <code>--resume</code>): {esc(', '.join(run.paused))}.</p>")
    if run.aside:
        overview += (f"<p>Unfinished attempts kept aside (a round stopped by an error or an interruption; it "
                     f"ran again on <code>--resume</code>): {esc(', '.join(run.aside))}.</p>")
    if s.get("command"):
        overview += f"<p>Command: <code>{esc(s['command'])}</code></p>"
    sections = [("scores", "Score per round (Figure 4)", overview + scores_section(run))]
    for i, r in enumerate(run.rounds):
        m = r.metrics or {}
        title = f"Round {r.k}" + (f": {m.get('policy_name')}" if m.get("policy_name") else "") + \
            (f", move {_move(m)}" if m else "")
        sections.append((f"round-{r.k}", title, round_section(run, i)))
    sections.append(("latents", "Latents over an episode (Figure 6)", latents_section(run)))
    return page.document(f"polc refine run {run.path.name}", subtitle, sections)

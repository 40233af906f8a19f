"""The conversation of one round, by feedback mode (see loop.py): the prompts it sends,
the analyses it runs in the sandbox, and the move it ends with.

    analysis  [system, round + rollout + analysis-request] -> code; sandbox;
              + [feedback (output + diagnostics) + moves] -> move; TEST repeats the last two
    table     [system, round + rollout + table (CSV + diagnostics) + moves] -> move
    none      [system, round + moves] -> move

A REVISE move's program is checked and repaired in the same conversation, and the
checked text is saved as next.pol.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Optional, Sequence

from ..llm import Message
from . import context, replies, templates
from .converse import Caller, ask, check_and_repair
from .record import Round, add_time
from .runcontext import RunContext
from .work import Fitted, fmt_weights

TEST_LINE = ("- TEST: you need more evidence before deciding. Say what you want to find out and give "
             "new analysis code (complete, defining analyze(df)) in one ```python block; it runs on the "
             "same table and you see its output. A TEST does not use up a round: this round goes on with "
             "the same structure and rollout ({left} more TEST move(s) allowed in it after this one; then "
             "REVISE or STOP).\n")
LAST_ROUND = ("\nThis is the last round: a revision will still be fitted and evaluated, but you will not "
              "see its results.\n")


def validation_text(val: dict, metric: Any, instance: str) -> str:
    """The validation episodes' score as the rollout section states it: mean ± std, the worst two
    and the success count where the environment reports success, on seeds that are neither the
    traced training ones nor the final evaluation's, with the weights the trace ran (the fitted
    ones, or the declared ones where they were kept)."""
    from .scores import number, score_text

    values = val.get("scores") or val["returns"]
    order = sorted(range(len(values)), key=lambda i: values[i], reverse=not metric.higher_is_better)
    unit = f" {metric.unit}" if metric.unit else ""
    worst = ", ".join(f"{number(values[i], metric)}{unit} on seed {val['seeds'][i]}" for i in order[:2])
    successes = val.get("successes")
    success = ("" if successes is None else
               f"; the environment reports success on {sum(successes)} of {len(successes)}")
    return (f"On {len(values)} validation {instance}(s) (seeds {', '.join(map(str, val['seeds']))}: untraced, neither "
            f"the training {instance}s above nor the final evaluation's) the same weights score "
            f"{score_text(val['mean'], val['std'], metric)}; worst: {worst}{success}")


def moved_weights(fitted: dict, declared: Any) -> str:
    """`k_look = 0.1863 (declared 0.1), k_gas = 4 (unmoved)`: each fitted weight (4 significant
    digits) beside its declared initial value, so the prompt shows how far the fit moved it."""
    init = {w.name: w.init for w in declared}
    parts = []
    for name, value in fitted.items():
        now = fmt_weights({name: value})
        before = fmt_weights({name: _listed(init[name])}) if name in init else None
        same = before is not None and before.split(" = ", 1)[1] == now.split(" = ", 1)[1]
        parts.append(now if before is None else f"{now} ({'unmoved' if same else 'declared ' + before.split(' = ', 1)[1]})")
    return ", ".join(parts)


def _listed(v: Any) -> Any:
    return [_listed(x) for x in v] if isinstance(v, (tuple, list)) else float(v)


def prior_text(priors: dict, rows: int) -> str:
    """What held the weights besides the demonstration, and how strongly ('' when nothing did):
    the declared priors, and the pull of the weights without one toward their declared values."""
    declared, pulled, scale = priors.get("declared") or {}, priors.get("pulled") or [], priors.get("prior_scale")
    if not declared and not pulled:
        return ""
    parts = []
    if declared:
        parts.append("the declared priors " + ", ".join(f"{k} ~ {v}" for k, v in declared.items()))
    if pulled and scale:
        parts.append(f"a normal prior of std {scale:g} on the unconstrained value of each weight without one "
                     f"({', '.join(pulled)}), which holds it near its declared value (for a weight `>= a` or "
                     f"`<= b` the unconstrained value is log |w - bound|: a factor of about {math.exp(scale):.3g} "
                     "per std)")
    return (f"Besides the demonstration's {rows} training rows, the fit weighed {'; and '.join(parts)}. Each prior "
            "counts about as much as one more row: it decides a weight only where the rows say little about it.\n")


@dataclass
class Exchange:
    """What a round's conversation did, for the loop to record in the round (`record`), also
    when it stopped part way (an unusable reply): the analyses it ran, its TEST moves, the
    revision's name, a population's outcome, and the seconds it spent per phase."""

    analyses: list[dict] = field(default_factory=list)
    tests: Optional[int] = None          # TEST moves, once a move other than TEST was made
    next_policy: Optional[str] = None
    candidates: Optional[dict] = None    # `population.Outcome.summary`
    candidate_resets: int = 0            # the population's episodes (resets beyond one revision)
    phases: dict[str, float] = field(default_factory=dict)  # sandbox, candidates

    def record(self, m: Round) -> None:
        m.phases.update(self.phases)
        if self.analyses:
            m.analyses = list(self.analyses)
        m.next_policy = self.next_policy or m.next_policy
        if self.candidates is not None:
            m.candidates = self.candidates
            m.resets = (m.resets or 0) + self.candidate_resets
        if self.tests is not None:
            m.tests = self.tests


class Dialogue:
    """The model's side of round `k` (`m`: the round so far, read for the prompts); what it
    did is in `exchange`."""

    def __init__(self, ctx: RunContext, history: Sequence[Round], k: int, program: Any, text: str, fitted: Fitted,
                 call: Caller, m: Round):
        self.ctx, self.history, self.k, self.program, self.text, self.fitted, self.call, self.m = \
            ctx, history, k, program, text, fitted, call, m
        self.s = ctx.settings
        self.d = ctx.run.round_dir(k)
        self.exchange = Exchange()
        self._tests = 0  # TEST moves of the round, once it ended in another move
        self._tests_so_far = 0  # TEST moves made so far in this round (what the moves prompt counts)
        self._move_prompt: list[Message] = []  # the request of the last move: further candidates are asked it

    def run(self) -> replies.Move:
        mode = self.s.feedback
        system = Message("system", templates.template("system"))
        head = self._round_text()
        if mode == "analysis":
            request = templates.render("analysis-request", output_chars=self.s.output_chars,
                                       cpu_seconds=self.s.analysis_cpu_seconds,
                                       array_example=context.array_example(self._trace().columns),
                                       demo_rows=self.ctx.demo.num_rows,
                                       demo_columns=context.column_list(self.ctx.demo.columns))
            messages = [system, Message("user", head + "\n" + self._rollout_text() + "\n" + request)]
            self.ctx.ui.phase(self.k, "LLM: writing analysis code")
            code, messages = ask(self.call, messages, replies.parse_analysis, "analysis code",
                                 "Reply with the analysis code, defining analyze(df), in one ```python block.",
                                 self.s.max_reply_retries)
            move, messages = self._analysis_rounds(code, messages)
        else:
            body = head + "\n"
            if mode == "table":
                body += self._rollout_text() + "\n" + self._table_text() + "\n"
            body += self._moves(allow_test=False)
            messages = [system, Message("user", body)]
            self.ctx.ui.phase(self.k, "LLM: choosing a move")
            move, messages = self._ask_move(messages, allow_test=False)
        if move.kind == "REVISE":
            self._revise(move, messages)
        self.exchange.tests = self._tests  # recorded only when a move other than TEST was made
        return move

    def _analysis_rounds(self, code: str, messages: list[Message]):
        """Run the analysis, send its output, get a move; a TEST move starts over with new code."""
        n = 1
        while True:
            self._tests_so_far = n - 1
            output, status = self._run_analysis(code, n)
            allow_test = n - 1 < self.s.max_tests  # n - 1 TEST moves so far
            feedback = templates.render("feedback", analysis_status=status, analysis_output=output,
                                        diagnostics=self._diagnostics(), moves=self._moves(allow_test))
            messages = messages + [Message("user", feedback)]
            self.ctx.ui.phase(self.k, "LLM: choosing a move")
            move, messages = self._ask_move(messages, allow_test)
            if move.kind != "TEST":
                self._tests = n - 1
                return move, messages
            code, n = move.code, n + 1

    def _ask_move(self, messages: list[Message], allow_test: bool):
        allowed = ("REVISE", "TEST", "STOP") if allow_test else ("REVISE", "STOP")
        self._move_prompt = list(messages)  # what further candidate revisions are asked with
        return ask(self.call, messages, partial(replies.parse_move, allowed=allowed), "move",
                   f"Name one move on a line of its own (`MOVE: {'`, `MOVE: '.join(allowed)}`) and give what "
                   "it needs: the complete program in one ```pol block for REVISE"
                   + (", the analysis code in one ```python block for TEST" if allow_test else "") + ".",
                   self.s.max_reply_retries)

    def _revise(self, move: replies.Move, messages: list[Message]) -> None:
        if self.s.candidates > 1:
            from .candidates.revise import Population

            outcome = Population(self.ctx, self.k, self.call, move, messages, self._move_prompt).run()
            self.exchange.next_policy, self.exchange.candidates = outcome.next_policy, outcome.summary
            self.exchange.candidate_resets = outcome.resets
            self.exchange.phases["candidates"] = outcome.seconds
            return
        self.ctx.ui.phase(self.k, "checking the revision")
        program, text, _ = check_and_repair(self.call, messages, move.pol, f"{self.d.name}/next.pol",
                                            self.ctx.task.env, self.s.max_repairs, self.s.max_reply_retries,
                                            self.ctx.run.saver(self.d, "revision"))
        self.ctx.run.write(f"{self.d.name}/next.pol", text)
        self.exchange.next_policy = program.typed.name

    # ---- sandbox ------------------------------------------------------------------------

    def _run_analysis(self, code: str, n: int) -> tuple[str, str]:
        from ..sandbox.process import Limits, run_analysis

        self.ctx.run.write(f"{self.d.name}/analysis_{n}.py", code)
        self.ctx.ui.phase(self.k, f"sandbox: running analysis {n}")
        t = time.monotonic()
        result = run_analysis(code, self.d / "trace.parquet",
                              Limits(cpu_seconds=self.s.analysis_cpu_seconds,
                                     wall_seconds=self.s.analysis_wall_seconds), demo=self.ctx.task.demo)
        add_time(self.exchange.phases, "sandbox", t)
        output = result.output
        if len(output) > self.s.feedback_chars:
            output = (output[:self.s.feedback_chars]  # the model's own output: say where and why it was cut
                      + f"\n[cut here: your analysis printed {len(output)} characters, the limit is "
                        f"{self.s.feedback_chars}; print less]")
        status = ("It ran without errors." if result.ok  # no timing: a prompt must not vary from run to run
                  else f"It failed: {result.error} Its output up to that point:")
        self.ctx.run.write(f"{self.d.name}/analysis_{n}.txt",
                                (result.output if result.ok else f"{result.output}\n[{result.error}]") + "\n")
        self.exchange.analyses.append({"file": f"analysis_{n}.py", "ok": result.ok, "error": result.error,
                                                  "seconds": round(result.seconds, 2), "limit": result.limit})
        return (output.rstrip() or "(nothing printed)"), status

    # ---- prompt pieces ------------------------------------------------------------------

    def _round_text(self) -> str:
        f = self.fitted.info
        keep = self.m.keep or {}
        if keep.get("kept") == "declared":  # the fit lost in closed loop: say so, not "fitted ... (unmoved)"
            why = keep.get("reason", "").split("; the declared weights are kept")[0].rstrip(".")
            weights = (f"This round runs the declared weights, not the fitted ones: {why}. The declared weights: "
                       f"{fmt_weights(self.fitted.weights)}.\n")
        else:
            weights = (f"Fitted weights, each with its declared value where the fit moved it: "
                       f"{moved_weights(self.fitted.weights, self.program.typed.weights)}.\n")
        source, other = self._fit_source()
        fit = (f"Fitted to {source} ({f['rows_train'] + f['rows_val']} steps) by imitation learning, "
               f"validation loss {f['val_loss']:.4g}. " + other + weights
               + prior_text(f.get("priors") or {}, f["rows_train"]))
        outside = self._outside_ranges()
        if outside:
            fit += f"\n{outside}\nThe fit used every row as it is.\n"
        warnings = [d for d in self.program.warnings]
        if warnings:
            from polc.messages import render_all

            fit += f"\n`polc check` warnings:\n```text\n{render_all(warnings, self.text).rstrip()}\n```\n"
        return templates.render("round", task=self.ctx.task.text.rstrip(), round=self.k, last=self.s.rounds - 1,
                                history=context.history(self.history, self.s.feedback, self.ctx.metric,
                                                        self.ctx.task.instance, current=self.m),
                                pol=self.text.rstrip(), fit=fit)

    def _fit_source(self) -> tuple[str, str]:
        """(what the weights were fitted to, a sentence on the other fit): the demonstration and
        "" (the words every prompt had before --recovery), or with --recovery which of the two
        fits (with and without the recovery laps) was kept and their scores on the training seeds."""
        rec = self.m.recovery
        if not rec:
            return "the demonstration", ""
        laps = f"recovery laps (the expert's actions perturbed, `polc demos --perturb {rec['perturb']}`)"
        if "clean" not in rec:
            return "the demonstration alone", f"{rec.get('reason', 'The fit with ' + laps + ' failed')}. "
        where = f"on the training {self.ctx.task.instance}s"
        if rec["kept"] == "with_recovery":
            return (f"the demonstration and {laps}", f"This fit scored {rec['with_recovery']:.4g} {where}, the "
                    f"fit to the demonstration alone {rec['clean']:.4g}, so this one is used. ")
        return ("the demonstration", f"A fit with {laps} beside it scored {rec['with_recovery']:.4g} {where}, "
                f"this one {rec['clean']:.4g}, so this one is used. ")

    def _outside_ranges(self) -> str:
        """Where the demonstration leaves this structure's declared ranges ('' if nowhere)."""
        from ..io.demo_check import out_of_range, range_report

        demo = self.ctx.demo
        return range_report(out_of_range(demo, self.program.typed), demo.num_rows, "The demonstration")

    def _trace(self) -> Any:
        from ..io.table import read_table

        return read_table(str(self.d / "trace.parquet"))

    def _rollout_text(self) -> str:
        m = self.m
        returns = context.returns_text(m.rollout_seeds, m.rollout_returns, m.rollout_scores, self.ctx.metric,
                                       m.rollout_successes)
        if m.declared_scores is not None:
            returns += ". " + self._closed_loop_text()
        if m.validation:
            returns += ". " + validation_text(m.validation, self.ctx.metric, self.ctx.task.instance)
        return templates.render("rollout", episodes=len(self.ctx.seeds), instance=self.ctx.task.instance,
                                seeds=", ".join(map(str, self.ctx.seeds)), max_steps=self.ctx.spec.max_steps,
                                returns=returns, schema=context.trace_schema(self._trace().columns))

    def _closed_loop_text(self) -> str:
        """The declared weights' score beside the fitted one's, on the same training seeds."""
        import numpy as np

        from ..il.closed_loop import ClosedLoop

        metric = self.ctx.metric
        m = self.m
        fitted = m.rollout_scores or m.rollout_returns
        check = ClosedLoop(self.ctx.spec.schema.name, tuple(m.rollout_seeds), np.asarray(m.declared_scores, float),
                           np.asarray(fitted, float), "return" if metric.is_return else metric.key,
                           metric.higher_is_better)
        kept_declared = (m.keep or {}).get("kept") == "declared"
        fitted_mean = m.closed_loop["fitted"] if kept_declared else check.fitted_mean
        verdict = ("so imitation learning made this structure WORSE in closed loop: the demonstration may not "
                   "excite some terms (consider priors `~ normal(mu, sigma)` on them, or fewer free weights)"
                   if kept_declared or check.worse else "so imitation learning did not make it worse")
        if kept_declared:  # keep-better: the trace and the scores above are the declared weights'
            verdict += "; the declared weights were kept, and the trace and the scores above are theirs"
        return (f"With its declared weights (before fitting) the same structure scores {check.declared_mean:.4g} "
                f"on average on these {self.ctx.task.instance}s, fitted {fitted_mean:.4g}, {verdict}")

    def _table_text(self) -> str:
        table = self._trace()
        return templates.render("table", rows=table.num_rows, csv=context.table_csv(table),
                                diagnostics=self._diagnostics())

    def _diagnostics(self) -> str:
        report = self.ctx.run.read(f"{self.d.name}/diagnostics.txt") or "(none)"
        return templates.render("diagnostics", report=report.rstrip())

    def _moves(self, allow_test: bool) -> str:
        left = self.s.max_tests - self._tests_so_far - 1
        return templates.render("moves", test_move="`MOVE: TEST` " if allow_test else "",
                                test_line=TEST_LINE.format(left=left) if allow_test else "",
                                last_round=LAST_ROUND if self.k == self.s.rounds - 1 else "")

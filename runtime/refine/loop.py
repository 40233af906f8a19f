"""The refinement loop (the paper's method), one round at a time, resumable.

A round k:

    structure   round 0: the task's initial.pol (or one the model generates);
                round k > 0: the revision the model made in round k - 1
    fit         imitation learning on the demonstration; a structure that cannot be
                fitted (non-finite loss, divergence) is sent back for a regeneration,
                at most `max_regenerations` times
    rollout     traced episodes on training seeds -> trace.parquet
    evaluate    untraced episodes on unseen seeds (never shown to the model); a fitted
                structure whose action is not finite in either (`NonFiniteAction`) has no
                score: it is sent back for a regeneration like an unfittable one
    diagnose    polc's built-in diagnostics of the rollout
    converse    by feedback mode:
                  analysis  the model writes analysis code from the task, the structure and
                            the trace's schema (never its values); it runs in the sandbox;
                            its output and the diagnostics go back
                  table     the whole trace as CSV, and the diagnostics
                  none      no execution feedback at all
                and the model answers with one move: REVISE (a new program: checked,
                repaired at most `max_repairs` times), TEST (more analysis code; analysis
                mode only, at most `max_tests` per round) or STOP.

Rounds 0 .. rounds-1 end in a move; a revision from the last of them is fitted and
evaluated in one final round without a move. The run ends at STOP, after that final
round, or when a round cannot go on (no fittable or checkable structure, no usable
reply: the round's metrics then say `"unusable_replies": true`). Environment resets are
counted as in the paper's Table 1: the episodes whose traces the model is given
(refinement interactions; fitting uses none); evaluation episodes are counted separately.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from ..llm import Message
from ..task import Task, TaskError
from . import context, replies, scores, templates
from .converse import (PROGRAM_EXPECTED, Caller, NoUsableReply, RevisionRejected, ask,
                       check_and_repair)
from .budget import Budget, Meter, spent_in
from .record import Round
from .rundir import WAITING, RunDir, write_json
from .runcontext import RunContext
from .scripted import TOKEN_ESTIMATE, Choice, WaitingForReply, open_backend
from .work import (FitFailed, Fitted, Settings, check, declared_scores, environment, evaluate_on,
                   evaluate_returns, fit_program, keep_choice, metric_of, rollout_seeds, traced_rollout,
                   training_scores, validation_seeds, with_declared)



class RoundEnd(Exception):
    """The run cannot go on after this round; str(e) says why. `unusable`: because the
    model's replies could not be used (garbage, programs that never check or never fit)."""

    def __init__(self, message: str, unusable: bool = False):
        super().__init__(message)
        self.unusable = unusable


def _non_finite(e: BaseException) -> bool:
    """`e` is an `envs.NonFiniteAction` (imported only here: gymnasium is heavy)."""
    from ..envs.finite import NonFiniteAction

    return isinstance(e, NonFiniteAction)


def generate(call: Caller, task: Task, spec: Any, settings: Settings, file: str,
             on_attempt=lambda *a: None) -> tuple[Any, str]:
    """One request for an initial structure, checked and repaired: (program, text)."""
    prompt = templates.render("generate", task=task.text.rstrip(), env=task.env,
                              observations=context.env_fields(spec.schema.obs),
                              actions=context.env_fields(spec.schema.actions))
    messages = [Message("system", templates.template("system")), Message("user", prompt)]
    text, messages = ask(call, messages, replies.parse_program, "generate", PROGRAM_EXPECTED,
                         settings.max_reply_retries)
    program, text, _ = check_and_repair(call, messages, text, file, task.env, settings.max_repairs,
                                        settings.max_reply_retries, on_attempt)
    return program, text


class Loop:
    """One run: `rounds()` goes round by round until the run ends (see the module docstring),
    yielding each complete round to its caller (who writes the summary); `run()` just runs it."""

    def __init__(self, run: RunDir, task: Task, settings: Settings, choice: Choice, ui: Any,
                 backend: Optional[Any] = None, prices: Optional[Any] = None, budget: Budget = Budget()):
        from ..io.demo_check import non_finite_columns, partial_note
        from ..io.table import TableError, read_table

        self.run_dir, self.task, self.settings, self.choice, self.ui = run, task, settings, choice, ui
        self.spec = environment(task.env, settings)
        self.metric = metric_of(self.spec)  # what a round is scored by (spec.metric; the return by default)
        try:
            self.demo = read_table(str(task.demo))
        except TableError as e:
            raise TaskError(f"the task's demonstration cannot be used: {e}.") from None
        bad = non_finite_columns(self.demo)
        if bad:  # no structure fits these rows: asking the model for another would not help
            raise TaskError(f"the task's demonstration {task.demo} holds non-finite values: "
                            + ", ".join(f"{name} in {rows} of {self.demo.num_rows} rows" for name, rows in bad)
                            + "; record it again (polc demos).")
        partial = partial_note(self.demo)
        if partial:
            ui.notice(partial + "; every round is fitted to those episodes")
        self.seeds = rollout_seeds(self.spec, self.demo.metadata.get("seeds", []), settings.rollout_episodes)
        self.validation = validation_seeds(self.spec, self.demo.metadata.get("seeds", []), self.seeds,
                                           settings.validation_episodes)
        self.recovery = self._recovery_demos() if settings.recovery else None  # --recovery: the table
        self.ctx = RunContext(run, task, settings, ui, self.spec, self.metric, self.demo, tuple(self.seeds),
                              tuple(self.validation))
        self.history = [_recorded(run, k) for k in run.complete_rounds()]
        self.calls = sum(m.llm["calls"] for m in self.history)
        # `backend` replaces the one `choice` names (tests); it must already be at request `calls`.
        self.backend = backend if backend is not None else open_backend(choice, start=self.calls,
                                                                        timeout=settings.llm_timeout)
        self.meter = self._meter(prices, budget)
        write_seeds(run, self)

    def _recovery_demos(self) -> Any:
        """--recovery: the expert's perturbed laps on the demonstration's own seeds, recorded once
        into the run directory (`recovery.parquet`; a resumed run reuses them) and read."""
        from ..il.recovery import RECOVERY_FILE, Recovery, record_recovery
        from ..io.table import read_table

        s = self.settings
        seeds = [int(x) for x in self.demo.metadata.get("seeds") or []]
        if not seeds:
            raise TaskError(f"--recovery: the demonstration {self.task.demo} names no seeds to record the "
                            "recovery laps on (record it with `polc demos`).")
        path = str(self.run_dir.path / RECOVERY_FILE)
        self.ui.notice(f"recovery demonstrations: the expert on seed(s) {', '.join(map(str, seeds))} with "
                       f"--perturb {s.recovery} -> {path}")
        try:
            full = getattr(self.spec, "spec", self.spec)  # whole episodes, as the demonstration (--quick cuts rollouts)
            return read_table(record_recovery(full, Recovery(s.recovery, expert=s.expert), seeds, path))
        except ValueError as e:
            raise TaskError(f"--recovery {s.recovery}: {e}.") from None

    def _meter(self, prices: Any, budget: Budget) -> Meter:
        """The run's meter, starting from everything the run has spent: its complete rounds and
        any it paid for and redoes (moved aside as round_NN.interrupted-M, or not finished)."""
        done = set(self.run_dir.complete_rounds())
        paid = [self.run_dir.round_dir(k) / "exchanges.jsonl" for k in sorted(done)]
        paid += sorted(p / "exchanges.jsonl" for p in self.run_dir.path.glob("round_*")
                       if p.is_dir() and p.name not in {f"round_{k:02d}" for k in done})
        tokens, usd, outputs = spent_in(paid, prices)
        return Meter(prices, budget, self.choice.spec, tokens, usd, outputs)

    @property
    def finished(self) -> bool:
        return bool(self.history) and bool(self.history[-1].end)

    def run(self) -> None:
        for _ in self.rounds():
            pass

    def rounds(self) -> Iterator[Round]:
        """Each round as it completes (saved, its exchanges collected), until the run ends."""
        while not self.finished:
            k = len(self.history)
            record = self.round(k)
            self.history.append(record)
            self.calls += record.llm["calls"]
            self.run_dir.collect_exchanges([m.round for m in self.history])
            write_seeds(self.run_dir, self)
            self.ui.round_done(record.to_json(), self.settings, self.metric)
            yield record

    # ---- one round ---------------------------------------------------------------------

    def round(self, k: int) -> Round:
        s = self.settings
        final = k >= s.rounds
        d = self.run_dir.begin_round(k)
        token_note = TOKEN_ESTIMATE if self.choice.kind in ("scripted", "manual") else None
        call = Caller(self.backend, d, self.calls, self.ui.notice, token_note, self.meter, s.max_reply_chars)
        m = Round(k, final)
        start = time.monotonic()
        try:
            program, text = self._structure(k, call, d)
            fitted, program, text = self._fit(k, program, text, call, m, final)
            if not final:
                self._converse(k, program, text, fitted, call, m)
            else:
                m.end = "the last revision was fitted and evaluated"
        except RoundEnd as e:
            m.end = str(e)
            if e.unusable:
                m.unusable_replies = True
        except WaitingForReply as e:  # a `manual:` session's normal pause: say so where the round stays
            self.run_dir.write(f"{d.name}/{WAITING}", str(e) + "\n")
            raise
        m.llm = call.counts.to_json()
        m.seconds = round(time.monotonic() - start, 2)
        if m.move_kind == "STOP":
            m.end = "the model chose STOP"
        self.run_dir.finish_round(k, m.to_json())
        return m

    def _structure(self, k: int, call: Caller, d: Path) -> tuple[Any, str]:
        file = f"{d.name}/policy.pol"  # diagnostics the model reads name files relative to the run
        if k > 0:
            text = self.run_dir.read(f"round_{k - 1:02d}/next.pol")
            if text is None:
                raise RoundEnd(f"round {k - 1} left no revision (next.pol) to continue from")
            result = check(text, file, self.task.env)
            if result.program is None:  # checked when it was made; only a polc change gets here
                raise RoundEnd(f"the revision of round {k - 1} no longer passes polc check:\n{result.report}")
            return result.program, text
        if self.task.initial is not None:
            text = self.task.initial.read_text(encoding="utf-8")
            result = check(text, self.task.initial.name, self.task.env)
            if result.program is None:
                raise TaskError(f"{self.task.initial} does not pass polc check --env {self.task.env}:\n"
                                f"{result.report}")
            return result.program, text
        self.ui.phase(k, "LLM: writing the initial structure")
        try:
            return generate(call, self.task, self.spec, self.settings, file, self.run_dir.saver(d, "generated"))
        except (NoUsableReply, RevisionRejected) as e:
            raise RoundEnd(f"no initial structure: {e}", unusable=True) from None

    def _fit(self, k: int, program: Any, text: str, call: Caller, m: Round,
             final: bool) -> tuple[Fitted, Any, str]:
        """Fit, then observe (rollout, evaluation, diagnostics). A structure that cannot be
        fitted, or whose fitted actions are not finite in the rollout, is kept as
        `unfittable-N` / `nonfinite-N` and sent back for a regeneration with the reason."""
        s, d = self.settings, self.run_dir.round_dir(k)
        regenerations = 0
        while True:
            self.ui.phase(k, "fitting to the demonstration")
            t = time.monotonic()
            try:
                try:
                    fitted = fit_program(program, self.demo, s)
                finally:
                    m.timed("fit", t)
                if self.recovery is not None:
                    fitted = self._with_recovery(k, program, fitted, m)
                self._keep(k, fitted, program, text, m)
                fitted = self._observe(k, fitted, program, text, m, final)
                break
            except (FitFailed, ValueError) as e:
                if not isinstance(e, FitFailed) and not _non_finite(e):
                    raise
                regenerations += 1
                stem = f"{'unfittable' if isinstance(e, FitFailed) else 'nonfinite'}-{regenerations}"
                self.run_dir.write(f"{d.name}/{stem}.pol", text)
                self.run_dir.write(f"{d.name}/{stem}.txt", str(e) + "\n")
                if not isinstance(e, FitFailed) and (d / "params.json").is_file():
                    (d / "params.json").replace(d / f"{stem}.params.json")
                what = "fitting failed" if isinstance(e, FitFailed) else "the fitted policy's action was not finite"
                if regenerations > s.max_regenerations:
                    m.regenerations = regenerations - 1
                    how = "fitted" if isinstance(e, FitFailed) else "rolled out with finite actions"
                    raise RoundEnd(f"the structure could not be {how} after {s.max_regenerations} "
                                   f"regenerations: {e}", unusable=True) from None
                self.ui.notice(f"round {k}: {what} ({e}); asking for a regeneration "
                               f"({regenerations} of {s.max_regenerations})")
                template = "regenerate" if isinstance(e, FitFailed) else "nonfinite"
                program, text = self._regenerate(k, text, str(e), regenerations, call, template)
        m.regenerations = regenerations
        return fitted, program, text

    def _with_recovery(self, k: int, program: Any, clean: Fitted, m: Round) -> Fitted:
        """--recovery: the structure fitted again with the recovery laps beside the demonstration,
        and the better of the two fits on the training seeds kept (docs/results.md, "Causal
        confusion": the laps lift some structures and cost others, and the training seeds
        ranked the two fits as the unseen tracks did); `m.recovery` says which and why."""
        from ..il.recovery import RECOVERY_FILE

        s = self.settings
        self.ui.phase(k, "fitting to the demonstration and the recovery laps")
        t = time.monotonic()
        record = {"demos": [RECOVERY_FILE], "perturb": s.recovery, "laps": len(self.demo.metadata.get("seeds") or []),
                  "seeds": list(self.seeds)}
        try:
            mixed = fit_program(program, self.demo, s, [self.recovery])
        except FitFailed as e:
            m.recovery = {**record, "kept": "clean", "reason": f"The fit with the recovery laps failed: {e}"}
            return clean
        finally:
            m.timed("fit", t)
        self.ui.phase(k, f"closed loop: both fits on the {len(self.seeds)} training seed(s)")
        t = time.monotonic()
        try:
            plain, with_laps = training_scores([clean, mixed], self.spec, self.seeds, s)
        except ValueError as e:  # a non-finite action: the clean fit goes on (its own rollout says if it was it)
            if not _non_finite(e):
                raise
            m.recovery = {**record, "kept": "clean", "reason": f"A fit's action was not finite on the training "
                                                               f"seeds, so the fit to the demonstration alone is used: {e}"}
            return clean
        finally:
            m.timed("rollout", t)
        a, b = sum(plain) / len(plain), sum(with_laps) / len(with_laps)
        better = b > a if self.metric.higher_is_better else b < a
        m.recovery = {**record, "clean": round(a, 4), "with_recovery": round(b, 4),
                      "kept": "with_recovery" if better else "clean", "episodes": 2 * len(self.seeds)}
        kept = mixed if better else clean
        return kept._replace(info={**kept.info, "recovery": m.recovery})

    def _keep(self, k: int, fitted: Fitted, program: Any, text: str, m: Round) -> None:
        """Save the fitted structure and its params, and what the metrics say of them."""
        from ..io.demo_check import out_of_range
        from ..io.params import save_params, structure_sha256

        d = self.run_dir.round_dir(k)
        self.run_dir.write(f"{d.name}/policy.pol", text)
        save_params(str(d / "params.json"), fitted.policy, fitted.params, fitted.info)
        m.policy_name, m.structure_sha256 = program.typed.name, structure_sha256(program.typed)
        m.fit = {k2: fitted.info[k2] for k2 in ("loss", "val_loss", "train_loss", "restart", "epoch", "seconds")}
        m.weights = fitted.weights
        outside = out_of_range(self.demo, program.typed)
        m.demo_outside_ranges = [{"column": f.column, "rows": f.rows, "by": f.by if math.isfinite(f.by) else "inf"}
                                 for f in outside] or None

    def _regenerate(self, k: int, text: str, error: str, attempt: int, call: Caller,
                    template: str = "regenerate") -> tuple[Any, str]:
        s, d = self.settings, self.run_dir.round_dir(k)
        kind = "an unfittable" if template == "regenerate" else "a non-finite"
        self.ui.phase(k, f"LLM: regenerating {kind} structure ({attempt} of {s.max_regenerations})")
        prompt = templates.render(template, task=self.task.text.rstrip(), attempt=attempt,
                                  max_attempts=s.max_regenerations, error=error.rstrip(), pol=text.rstrip())
        messages = [Message("system", templates.template("system")), Message("user", prompt)]
        try:
            new, messages = ask(call, messages, replies.parse_program, f"regeneration {attempt}",
                                PROGRAM_EXPECTED, s.max_reply_retries)
            program, new, _ = check_and_repair(call, messages, new, f"{d.name}/policy.pol", self.task.env,
                                               s.max_repairs, s.max_reply_retries,
                                               self.run_dir.saver(d, f"regenerated-{attempt}"))
        except (NoUsableReply, RevisionRejected) as e:
            raise RoundEnd(f"no fittable structure: {e}", unusable=True) from None
        return program, new

    def _observe(self, k: int, fitted: Fitted, program: Any, text: str, m: Round, final: bool) -> Fitted:
        """Traced rollout, the closed-loop choice between the fitted and the declared weights
        (`Settings.keep`, as `polc fit --keep`), evaluation and built-in diagnostics; the
        weights kept."""
        from ..io.params import save_params
        from ..trace.meta import TraceMeta

        s, d = self.settings, self.run_dir.round_dir(k)
        self.ui.phase(k, f"rollout: {len(self.seeds)} traced episode(s)")
        t = time.monotonic()
        tp = fitted.policy.program
        meta = TraceMeta.of(tp, "policy.pol", fitted.params, "params.json", self.spec, self.seeds, refine_round=k)
        traced = traced_rollout(fitted, self.spec, self.seeds, str(d / "trace.parquet"), meta.to_json(), s)
        m.timed("rollout", t)
        shown = not final and s.feedback != "none"
        m.rollout_seeds, m.rollout_returns = list(self.seeds), [round(r, 2) for r in traced.returns]
        m.rollout_scores, m.resets = scores.rounded(traced.scores, self.metric), len(self.seeds) if shown else 0
        if shown or s.keep == "best":  # the same tracks with the declared weights: did fitting help?
            self.ui.phase(k, f"closed loop: the declared weights on the {len(self.seeds)} training seed(s)")
            t = time.monotonic()
            declared = declared_scores(fitted, self.spec, self.seeds, s)
            m.timed("rollout", t)
            m.declared_scores, m.resets = scores.rounded(declared, self.metric), 2 * len(self.seeds)
            check, choice = keep_choice(traced.scores, declared, self.seeds, self.metric, self.task.env, s.keep)
            m.closed_loop, m.keep = check.to_json(), choice.to_json()
            if choice.kept == "declared":  # polc fit's default: never hand back a worse fit without saying so
                self.ui.notice(f"round {k}: kept the declared weights: {choice.reason}")
                fitted = with_declared(fitted, choice)
                save_params(str(d / "params.json"), fitted.policy, fitted.params, fitted.info)
                meta = meta.with_params(fitted.params)
                t = time.monotonic()
                traced = traced_rollout(fitted, self.spec, self.seeds, str(d / "trace.parquet"), meta.to_json(), s)
                m.timed("rollout", t)
                m.weights, m.rollout_returns = fitted.weights, [round(r, 2) for r in traced.returns]
                m.rollout_scores, m.resets = scores.rounded(traced.scores, self.metric), 3 * len(self.seeds)
        if m.recovery and "episodes" in m.recovery:  # the two fits scored on the training seeds
            m.resets += m.recovery["episodes"]
        if traced.successes is not None:  # of the rollout kept (the declared weights' when they won)
            m.rollout_successes = traced.successes
        if shown and self.validation:  # scores the model is told: how the policy does beyond its two tracks
            self.ui.phase(k, f"validation: {len(self.validation)} untraced episode(s)")
            t = time.monotonic()
            val = evaluate_on(fitted, self.spec, self.validation, s)
            m.timed("validation", t)
            m.validation = scores.eval_json(val, self.metric)
            m.resets += len(self.validation)
        self.ui.phase(k, f"evaluating on {s.eval_episodes} unseen seed(s)")
        t = time.monotonic()
        ev = evaluate_returns(fitted, self.spec, s)
        m.timed("eval", t)
        m.eval = scores.eval_json(ev, self.metric)
        # the traced episodes are resets when they were shown or chose the weights, else evaluation
        m.eval_episodes = len(ev.seeds) + (0 if shown or s.keep == "best" else len(self.seeds))
        self.ui.phase(k, "built-in diagnostics")
        t = time.monotonic()
        report = builtin_diagnostics(program, str(d / "trace.parquet"), fitted, str(self.task.demo), self.task.expect)
        m.timed("diagnostics", t)
        self.run_dir.write(f"{d.name}/diagnostics.txt", report.rstrip() + "\n")
        return fitted

    # ---- the conversation --------------------------------------------------------------

    def _converse(self, k: int, program: Any, text: str, fitted: Fitted, call: Caller, m: Round) -> None:
        from .dialogue import Dialogue

        dialogue = Dialogue(self.ctx, self.history, k, program, text, fitted, call, m)
        try:
            move = dialogue.run()
        except NoUsableReply as e:
            raise RoundEnd(str(e), unusable=True) from None
        except RevisionRejected as e:
            raise RoundEnd(f"the revision was rejected: {e}", unusable=True) from None
        finally:  # what the conversation did up to where it stopped is the round's too
            dialogue.exchange.record(m)
        m.move = {"kind": move.kind, "summary": replies.summary(move.prose), "notes": list(move.notes)}
        revision = self.run_dir.read(f"round_{k:02d}/next.pol") if move.kind == "REVISE" else None
        if revision is not None:  # what later rounds' history says the revision changed
            from .changes import structure_changes

            m.move["changes"] = structure_changes(text, revision)


def builtin_diagnostics(program: Any, trace_path: str, fitted: Fitted, demo_path: str, expect: Any = None) -> str:
    """polc's built-in diagnostics of a rollout, as the text the model reads (or the one
    sentence saying why they could not be computed).

    The prompt must not depend on where the run directory is: the report names its inputs
    and trims itself to a character budget, so a longer path would even change which
    findings fit. It is computed from a private directory holding links named trace.parquet
    and demo.parquet (the one place the loop changes the working directory, and back)."""
    import os
    import tempfile

    from ..diagnostics import DiagnosticsError, builtin_report

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="polc-diagnostics-") as tmp:
        os.symlink(os.path.abspath(trace_path), os.path.join(tmp, "trace.parquet"))
        os.symlink(os.path.abspath(demo_path), os.path.join(tmp, "demo.parquet"))
        os.chdir(tmp)
        try:  # the model can run no command: what does not fit is left out, not pointed at
            return builtin_report(program, "trace.parquet", params=fitted.params, demo="demo.parquet",
                                  expect=expect).text(elsewhere=None)
        except DiagnosticsError as e:
            return f"The built-in diagnostics could not be computed: {e}"
        finally:
            os.chdir(cwd)


def write_seeds(run: RunDir, loop: "Loop") -> None:
    """seeds.json: every seed the loop draws, so that a replayed run can be checked against
    this one: the fit's (its validation split and restarts), the traced rollout's training
    seeds, the unseen evaluation seeds, the declared weights' key, and each round's
    candidate order (`--candidates`)."""
    from ..trace.evaluate import eval_seeds

    s = loop.settings
    write_json(run.path / "seeds.json", {
        "seed": s.seed,
        "fit": {"seed": s.seed, "restarts": s.restarts, "split": f"numpy default_rng({s.seed})",
                "restart_keys": f"jax.random.fold_in(PRNGKey({s.seed}), restart)"},
        "rollout": list(loop.seeds), "validation": list(loop.validation), "eval": [int(x) for x in eval_seeds(loop.spec, s.eval_episodes)],
        "declared_weights_key": "jax.random.PRNGKey(0)",
        "candidate_order": {str(m.round): m.candidates["order"] for m in loop.history
                            if isinstance(m.candidates, dict)},
        "candidates_scored_on": list(loop.seeds) if s.candidates > 1 else []})


def _recorded(run: RunDir, k: int) -> Round:
    """Complete round k's record as metrics.json holds it."""
    from .rundir import RunDirError

    try:
        return Round.from_json(run.metrics(k))
    except ValueError as e:
        raise RunDirError(f"{run.round_dir(k) / 'metrics.json'} cannot be used ({e}).") from None


def write_config(settings: Settings, choice: Choice, task: Task, command: str) -> dict:
    return {"task": str(task.dir), "env": task.env, "llm": choice.spec, "llm_kind": choice.kind,
            "scripted": choice.scripted, "settings": settings.to_json(), "command": command,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}



"""Phase 3: static analysis of a typed program: ranges, signs, directions, intents.

    analysis = analyze_program(tp)
    analysis.intervals["slip_c"]      # Interval: the range of every obs, weight, latent and action
    analysis.diagnostics              # warnings W0402-W0409 and errors E0401, E0405
    analysis.intents                  # one IntentResult per `expect`: proved / refuted / unknown

Ranges come from observation ranges and weight constraints (an undeclared
one is (-inf, inf)) pushed through every operation with interval arithmetic
(`intervals.py`); the abstract interpreter (`abstract.py`) also tracks the
direction of change in one variable. An intent claims its property for EVERY
weight value its constraint allows and every observation in its declared
range. Each is decided in four steps:

1. Abstract analysis: the target's interval (range intents) or its direction
   in the variable, with the graph cut at the variable (monotonicity).
   Success proves it.
2. Deciding weights: for each weight the target reads whose constraint allows
   both signs, re-run step 1 with the weight held to one sign. If that proves
   the intent, it holds only if fitting keeps that sign: warning W0406 says
   which constraint to declare.
3. A numeric search for a counterexample with the reference interpreter
   (`counterexample.py`; along sequences of observations from the initial
   state for a target computed from states, `sequences.py`, so a witness only
   uses states an episode reaches). Found: the intent is false, error E0405
   with the concrete weights and values.
4. Otherwise unknown, warning W0407 saying where the analysis lost track and
   what the search tried.

One pass over the whole program gives the ranges and diagnostics; every
other pass (steps 1 and 2) evaluates only the target's cone downstream of
what it changes (`abstract.run_cone`), and step 3 runs only the cone too, so
the work per intent follows the size of its cone, not of the program
(`Analysis.evaluations` counts it).

Nothing here imports jax: `polc check` runs this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .. import errors
from ..check import typed as T
from .abstract import CONST, Pass, run_cone, run_pass
from ..messages import Diagnostic
from .fixpoint import state_ranges
from .intervals import Interval
from ..util.text import bounds

PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"


@dataclass(frozen=True)
class IntentResult:
    intent: T.Intent
    status: str  # "proved", "refuted" or "unknown"
    detail: str  # one line: what was shown, the counterexample, or why it is open
    diagnostic: Optional[Diagnostic] = None  # the W0406 / W0407 / E0405 reported for it, if any
    evaluations: int = 0  # expression nodes the abstract passes for this intent alone computed (a pass shared
    #                       with other intents of its variable is counted in Analysis.evaluations)


@dataclass(frozen=True)
class Analysis:
    """What the analysis found. `intervals` holds one range per name (the hull
    over the elements); for an action it is the range of the clipped value, and
    `"<action>.mean"` / `"<action>.std"` hold its mean's and noise std's ranges.
    `elementwise` has the same keys with a range per element. `evaluations`
    counts the expression nodes the abstract interpreter computed, over the
    program-wide pass and every intent: the analysis' work, the program's
    size plus the sizes of the intents' cones (not the program's size once per
    intent)."""

    intervals: dict[str, Interval]
    diagnostics: list[Diagnostic]
    intents: list[IntentResult]
    elementwise: dict[str, Interval] = field(default_factory=dict)
    evaluations: int = 0

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]


def analyze_program(tp: T.TypedProgram) -> Analysis:
    """Analyse a checked program: ranges, diagnostics and the verdict on every intent."""
    ranges, unbounded = state_ranges(tp)
    base = run_pass(tp, report=True, restrict=ranges)
    for st in tp.states:  # a `next` expression's own warnings (a division by zero, a float32 overflow)
        base.expr(st.update, base.env)
    for st in unbounded:
        base.emit(errors.state_unbounded(st.update.span, st.name, str(ranges[st.name])))
    elementwise: dict[str, Interval] = {name: a.iv for name, a in base.env.items()}
    for name, a in base.means.items():
        elementwise[name + ".mean"] = a.iv
    for name, a in base.stds.items():
        elementwise[name + ".std"] = a.iv
    # One cone pass per variable for all the monotonicity intents in it (their cones' union),
    # not one per intent: intents along a chain share their cones, and a pass each made the
    # work grow with the square of the program.
    by_var: dict[str, list[str]] = {}
    for intent in tp.intents:
        if isinstance(intent, T.MonoIntent):
            by_var.setdefault(intent.var, []).append(intent.target)
    shared = {var: run_cone(base, targets, var) for var, targets in by_var.items()}
    results = [decide(tp, intent, base, shared.get(getattr(intent, "var", None))) for intent in tp.intents]
    diagnostics = base.diagnostics + [r.diagnostic for r in results if r.diagnostic is not None]
    diagnostics.sort(key=lambda d: (0, 0) if d.span is None else (d.span.line, d.span.column))
    work = base.evaluated + sum(p.evaluated for p in shared.values()) + sum(r.evaluations for r in results)
    return Analysis({k: v.hull() for k, v in elementwise.items()}, diagnostics, results, elementwise, work)


# ---- intents --------------------------------------------------------------------------------


def _holds(intent: T.Intent, p: Pass) -> tuple[bool, str]:
    """Whether one abstract pass proves the intent; else why not."""
    a = p.env[intent.target]
    if isinstance(intent, T.MonoIntent):
        if a.dir in (CONST, intent.direction):
            return True, f"{intent.target} is {intent.direction} in {intent.var}"
        if a.dir == "unknown":
            return False, a.why or f"the direction of {intent.target} in {intent.var} is not known"
        return False, f"the rules only show {intent.target} {a.dir} in {intent.var}"
    h = a.iv.hull()
    lo, hi = float(h.lo), float(h.hi)
    ok_lo = lo > intent.lo if intent.lo_strict else lo >= intent.lo
    ok_hi = hi < intent.hi if intent.hi_strict else hi <= intent.hi
    if ok_lo and ok_hi:
        return True, f"{intent.target} lies in {h}"
    return False, f"{intent.target} can only be bounded to {h}"


def _deciding_weight(tp: T.TypedProgram, intent: T.Intent, base: Pass) -> tuple[Optional[tuple[T.Weight, str]], int]:
    """A weight of either sign whose sign, once fixed, proves the intent; and
    the expression nodes evaluated looking for it. Only weights in the
    target's cone can matter, and each retry redoes only the cone's part
    downstream of the weight or the variable."""
    var = intent.var if isinstance(intent, T.MonoIntent) else None
    used = base.deps.ancestors(intent.target)
    work = 0
    for w in tp.weights:
        if w.name not in used or w.name == var or not (w.lo < 0 < w.hi):
            continue
        for lo, hi in ((w.lo, 0.0), (0.0, w.hi)):
            restricted = {w.name: Interval(lo, hi).broadcast_to(w.type.shape)}
            p = run_cone(base, intent.target, var, restricted)
            work += p.evaluated
            if _holds(intent, p)[0]:
                return (w, f"{w.type} {bounds(lo, hi)}"), work  # what to declare, e.g. `real <= 0`
    return None, work


def decide(tp: T.TypedProgram, intent: T.Intent, base: Pass, shared: Optional[Pass] = None) -> IntentResult:
    """Prove, refute, or explain one intent (steps 1 to 4 of the module docstring).

    `base` is the program-wide pass (`run_pass(tp, report=True)`): a range
    intent reads its result, and every other pass here redoes only the
    target's cone (`abstract.run_cone`). `shared`: a monotonicity intent's first pass
    made already, over several intents' cones in its variable (`analyze_program`); its
    work is counted there, not in this intent's `evaluations`."""
    var = intent.var if isinstance(intent, T.MonoIntent) else None
    if var is not None and shared is not None:
        first, work = shared, 0
    else:
        first = run_cone(base, intent.target, var) if var is not None else base
        work = first.evaluated if var is not None else 0
    proved, why = _holds(intent, first)
    if proved:
        return IntentResult(intent, PROVED, why, evaluations=work)
    found, more = _deciding_weight(tp, intent, base)
    work += more
    if found is not None:
        w, constraint = found
        d = errors.intent_depends_on_sign(intent.span, intent.text, w.name, constraint)
        return IntentResult(intent, UNKNOWN, f"holds only if weight {w.name} is declared {constraint}", d, work)
    # Imported here, not at the top: a clean check proves every intent before this
    # point, and the search (with the reference interpreter) costs the start-up of
    # every `polc check` otherwise.
    from . import sequences

    var_iv = base.env[var].iv if var is not None else None
    witness = sequences.search(tp, intent, var_iv)
    if witness is not None:
        d = errors.intent_refuted(intent.span, intent.text, witness)
        return IntentResult(intent, REFUTED, witness, d, work)
    reason = f"{why}, and {sequences.budget(tp, intent)} found no counterexample"
    return IntentResult(intent, UNKNOWN, reason, errors.intent_unknown(intent.span, intent.text, reason), work)


__all__ = ["Analysis", "IntentResult", "analyze_program", "decide", "PROVED", "REFUTED", "UNKNOWN"]

"""Built-in diagnostics of a rollout trace: the checks an analyst writes every time, done once.

    report = builtin_report(program, "trace.parquet", params="fit.params", demo="demo.parquet")
    report.findings          # (Finding(check, severity, subject, message), ...)
    print(report.text())     # compact plain text for a person or an LLM, problems first

No LLM and no JAX: everything is recomputed with the NumPy reference interpreter
(`polc.analysis.reference`) on the logged steps, a program's memory (`state`s) read from
the trace or stepped along each episode. The checks, in report order:

    trace           the trace belongs to the program (columns, structure hash); partial runs
    weights         every weight.* column constant within each episode (and across them);
                    inside its constraint; equal to the params given
    signs           constrained weights the fit pushed against their bound
    intents         every `expect` checked ON THE DATA (see below)
    reconstruction  every latent and action mean recomputed from the logged observations
                    and weights, compared with the logged columns (max abs error)
    obs_range       observations outside their declared ranges (fraction of steps, worst value)
    branches        clip() always / never saturated, relu() never positive, if/where
                    conditions and comparisons constant, min/max with one side never chosen,
                    action means outside the action's range
    latents         summary statistics of every latent and action mean
    states          memory: a real state whose `next` reads itself (an integral, a phase)
                    on a bound of its range at a large share of steps (saturated: a
                    wound-up integrator), or still moving one way at an episode's end
                    (drifting); states the trace lacks are stepped from the logged
                    observations (see memory.py)
    echo            for each action whose mean reads an observation that echoes an action
                    (the schema's `echoes`, W0509): how far setting it to 0 moves the action,
                    beside the action's mean magnitude (`echoes`; default: the trace's env's)
    demo            the policy's actions against the demonstration's at matched states
    task            what the task declares (task.md's `constant:` and `moves:`): names it
                    requires constant pass instead of warning; an action on a bound of its
                    range while the observation it moves does not follow (see task.py)

Intents on the data. For `expect T decreasing in V` the partial effect of V on T is
measured at every logged state with the reference interpreter: the graph is cut at V
(as the static analysis does), V is moved by +-h (h = 1e-3 of V's spread on the trace)
with everything else at its logged value, and T is recomputed. A monotone T can never
move the wrong way between V - h and V + h, however it bends (clip, relu, kinks), so
any state where it does refutes the intent on the data; states where T does not move
(a saturated clip) are counted as not responding. This was chosen over a rank
correlation of V and T along the trace, which confounds V with everything that moves
with it. The message also says whether the static analysis proves the intent once the
weights are fixed to their fitted values. A range intent (`expect T in [a, b]`) is
checked on the logged values of T.

Severities: "error" (a claim or an invariant is false: non-finite values, a mismatch
on reconstruction, an intent refuted on the data), "warning" (likely a problem: a
weight at its bound, a dead branch, observations out of range, a drifting weight),
"info" (worth knowing), "ok" (the check passed).

Inputs. `program`: a `polc.Program` or a `TypedProgram`. `trace`, `demo`: a Parquet path
or a pandas DataFrame in the step-table format (`polc.runtime.io.table`). `params`: None
(weights from the trace's weight.* columns; mlp blocks then cannot be recomputed), a
params file path, a params file's parsed JSON, or the runtime's params dict
(UNCONSTRAINED values by weight name plus flax trees by mlp key, as `policy.init`,
`fit` and `load_params` give). Bad inputs raise `DiagnosticsError` with one sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from polc.check.typed import TypedProgram

from . import checks as C, memory as M, values as V
from .base import CHECKS, SEVERITIES, TEXT_BUDGET, DiagnosticsError, Finding, _jsonable, load_params, load_steps, \
    verify_trace_of
from .demo import check_demo
from .echo import check_echo, echoes_of
from .task import Expectations, check_blocked, expected_constants
from .text import ELSEWHERE, render


@dataclass(frozen=True)
class Report:
    """What `builtin_report` found. `findings` are in check order; `header` says what
    was analysed; `tables` are pre-rendered blocks by check (the latent statistics, the
    worst demo states); `data` holds the numbers behind them, JSON-able."""

    findings: tuple[Finding, ...]
    header: str = ""
    tables: tuple[tuple[str, str], ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def problems(self) -> tuple[Finding, ...]:
        """Errors, then warnings, each in check order."""
        return tuple(f for sev in ("error", "warning") for f in self.findings if f.severity == sev)

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}

    def to_json(self) -> dict:
        return {"header": self.header, "counts": self.counts(),
                "findings": [f.to_json() for f in self.findings], "data": _jsonable(self.data)}

    def text(self, budget: int = TEXT_BUDGET, elsewhere: Optional[str] = ELSEWHERE) -> str:
        """Plain text, problems first, grouped by check; about `budget` characters at most.
        The findings that do not fit are counted and `elsewhere` says where to read them;
        `elsewhere=None` leaves them out unmentioned (a prompt: its reader runs no command)."""
        return render(self, budget, elsewhere)


# ---- the report -----------------------------------------------------------------------------


def _typed(program: Any) -> TypedProgram:
    if isinstance(program, TypedProgram):
        return program
    tp = getattr(program, "typed", None)
    if isinstance(tp, TypedProgram):
        return tp
    raise DiagnosticsError(f"program must be a polc.Program or a TypedProgram, not {type(program).__name__}.")


def builtin_report(program: Any, trace: Any, params: Any = None, demo: Any = None,
                   echoes: Optional[Mapping[str, Sequence[str]]] = None,
                   expect: Optional[Expectations] = None) -> Report:
    """Run every built-in check on a rollout trace of `program` (see the module docstring).
    `expect`: what the task declares (`polc.runtime.diagnostics.task`): the names it requires
    constant, and which observation each action moves (the blocked-push check).

    Raises `DiagnosticsError` (one sentence) when the trace cannot be read or is not a
    trace of this program, or the params or demonstration do not fit it."""
    run_order = (C.check_trace, C.check_weights, C.check_signs, C.check_intents, V.check_reconstruction,
                 V.check_obs_range, V.check_branches, V.check_latents, M.check_states)

    tp = _typed(program)
    steps = load_steps(trace, tp, "trace")
    verify_trace_of(tp, steps)
    p = load_params(params, tp)
    demo_steps = load_steps(demo, tp, "demonstration") if demo is not None else None
    ctx = C.Context.of(tp, steps, p)
    findings: list[Finding] = []
    tables: list[tuple[str, str]] = []
    data: dict[str, Any] = {}
    for check in run_order:
        out = check(ctx)
        findings += out.findings
        tables += out.tables
        data.update(out.data)
    out = check_echo(ctx, echoes_of(steps.metadata) if echoes is None else echoes)
    findings += out.findings
    data.update(out.data)
    if demo_steps is not None:
        out = check_demo(ctx, demo_steps)
        findings += out.findings
        tables += out.tables
        data.update(out.data)
    if expect:
        findings = expected_constants(findings, expect) + check_blocked(ctx, expect)
    n_ep = len(np.unique(steps.episode))
    header = (f"Diagnostics of policy {tp.name} on {steps.name}: {n_ep} episode{'s' if n_ep != 1 else ''}, "
              f"{steps.rows} steps; weights from {p.source}"
              + (f"; demonstration {demo_steps.name} ({demo_steps.rows} steps)" if demo_steps is not None else "")
              + ".")
    order = {c: i for i, c in enumerate(CHECKS)}
    findings.sort(key=lambda f: order.get(f.check, len(order)))
    return Report(tuple(findings), header, tuple(tables), data)


__all__ = ["Report", "builtin_report"]

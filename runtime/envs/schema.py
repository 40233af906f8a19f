"""What an environment publishes about its observations and actions, and the
check of a Pol program's `obs` / `action` declarations against it.

`Field` and `EnvSchema` are plain frozen data (no gymnasium, no jax), so
`polc check --env` stays light. `check_program_against(tp, schema)` returns
located diagnostics; every message comes from one constructor below, in the
style of `polc.errors` (one sentence and a hint). Codes: E0500 unknown
environment, E0501-E0502 observations, W0503 observation range, E0504-E0507
actions, E0508 an environment that cannot be loaded (a bad schema file), W0509
an action that reads an observation echoing an action (`polc.analysis.echo`, from the
schema's `echoes`), E0510 a policy that declares a hidden (privileged) observation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from polc.frontend.ast import Span
from polc.messages import Diagnostic
from polc.analysis.echo import check_echoes
from polc.errors import closest, fmt_shape
from polc.check.typed import TypedProgram
from polc.text import bounds, brackets, interval

_PHASE = "Environment"


@dataclass(frozen=True)
class Field:
    """One named observation or action: `shape` () for a scalar; every element
    lies in [lo, hi] (the environment guarantees it, clipping where it must)."""

    name: str
    shape: tuple[int, ...]
    lo: float
    hi: float
    doc: str
    # The actions this observation echoes: it follows them so closely (an actuator's
    # own state, e.g. the wheels' angle after `steer`) that on a demonstration it
    # predicts them almost perfectly. `polc check --env` warns when an action reads it (W0509).
    echoes: tuple[str, ...] = ()
    # Privileged: in the environment's observation dict, so an expert and a trace read it, but
    # no policy may declare it (E0510): e.g. the velocity of a partially observed pendulum.
    hidden: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        """`speed in [0, 1.5]`, `tiles[12, 4] in [-10, 10]`, `gap >= 0`."""
        return f"{self.name}{brackets(self.shape)} {bounds(self.lo, self.hi)}".rstrip()


@dataclass(frozen=True)
class EnvSchema:
    """The observation and action fields of one environment, in a fixed order."""

    name: str  # the polc name, e.g. "car_racing"
    env_id: str  # the gymnasium id, e.g. "polc/CarRacing-v0"
    version: str  # bumped whenever a field's meaning, shape or range changes
    obs: tuple[Field, ...]
    actions: tuple[Field, ...]

    def obs_field(self, name: str) -> Optional[Field]:
        return next((f for f in self.obs if f.name == name), None)

    def action_field(self, name: str) -> Optional[Field]:
        return next((f for f in self.actions if f.name == name), None)

    def policy_obs(self) -> tuple[Field, ...]:
        """The observations a policy may declare (all but the hidden ones)."""
        return tuple(f for f in self.obs if not f.hidden)

    def echoes(self) -> dict[str, tuple[str, ...]]:
        """{observation: the actions it echoes}, for the observations that echo one."""
        return {f.name: f.echoes for f in self.obs if f.echoes}


# ---- diagnostics: one constructor per kind ------------------------------------------


def _err(code: str, span: Optional[Span], message: str, hint: Optional[str] = None) -> Diagnostic:
    return Diagnostic("error", code, _PHASE, span, message, hint)


def _warn(code: str, span: Optional[Span], message: str, hint: Optional[str] = None) -> Diagnostic:
    return Diagnostic("warning", code, _PHASE, span, message, hint)


def _listing(fields: Iterable[Field]) -> str:
    return ", ".join(f.describe() for f in fields)


def unknown_env(name: str, known: Sequence[str]) -> Diagnostic:
    near = closest(name, known)
    msg = f'There is no environment "{name}".' + (f' Did you mean "{near}"?' if near else "")
    return _err("E0500", None, msg, "Known environments: " + ", ".join(sorted(known)) + ".")


def env_unusable(name: str, reason: str) -> Diagnostic:
    return _err("E0508", None, f'The environment "{name}" cannot be loaded: {reason}',
                "Fix the schema file or the id it names (docs/environments.md has the contract).")


def obs_missing(span: Optional[Span], name: str, schema: EnvSchema) -> Diagnostic:
    offered = schema.policy_obs()
    near = closest(name, [f.name for f in offered])
    msg = f'The environment "{schema.name}" has no observation "{name}".'
    if near:
        msg += f' Did you mean "{near}"?'
    return _err("E0501", span, msg, "It offers: " + _listing(offered) + ".")


def obs_hidden(span: Optional[Span], name: str, schema: EnvSchema) -> Diagnostic:
    return _err("E0510", span,
                f'The observation "{name}" of environment "{schema.name}" is privileged (hidden = true): '
                "the expert and the trace see it, a policy does not.",
                f'Remove the declaration and estimate "{name}" from what the policy observes: '
                + _listing(schema.policy_obs()) + ".")


def obs_shape(span: Optional[Span], name: str, declared: tuple[int, ...], field: Field,
              env: str) -> Diagnostic:
    return _err("E0502", span,
                f'The observation "{name}" is declared {fmt_shape(declared)}, but environment "{env}" '
                f"gives it shape {fmt_shape(field.shape)}.",
                f"Declare it as {_decl('obs', field)}.")


def _decl(kind: str, field: Field) -> str:
    """The declaration that matches `field`, as Pol source in backquotes."""
    rhs = " = ..." if kind == "action" else ""
    return f"`{kind} {field.name} : {f'real{brackets(field.shape)} {bounds(field.lo, field.hi)}'.rstrip()}{rhs}`"


def obs_range_narrower(span: Optional[Span], name: str, lo: float, hi: float, field: Field,
                       env: str) -> Diagnostic:
    return _warn("W0503", span,
                 f'The observation "{name}" is declared in {interval(lo, hi)}, but environment "{env}" '
                 f"only guarantees {interval(field.lo, field.hi)}, so the analysis reasons from a range "
                 "the observations can leave.",
                 f"Declare the environment's range: {_decl('obs', field)}.")


def action_missing(span: Optional[Span], names: Sequence[str], schema: EnvSchema) -> Diagnostic:
    missing = [schema.action_field(n) for n in names]
    which = ", ".join(f'"{n}"' for n in names)
    s = "s" if len(names) > 1 else ""
    return _err("E0504", span,
                f'The policy does not declare the action{s} {which} that environment "{schema.name}" needs.',
                "Declare every action the environment takes, e.g. "
                + "; ".join(_decl("action", f) for f in missing if f) + ".")


def action_unknown(span: Optional[Span], name: str, schema: EnvSchema) -> Diagnostic:
    near = closest(name, [f.name for f in schema.actions])
    msg = f'The environment "{schema.name}" has no action "{name}".'
    if near:
        msg += f' Did you mean "{near}"?'
    return _err("E0505", span, msg, "Its actions are: " + _listing(schema.actions) + ".")


def action_shape(span: Optional[Span], name: str, declared: tuple[int, ...], field: Field,
                 env: str) -> Diagnostic:
    return _err("E0506", span,
                f'The action "{name}" is declared {fmt_shape(declared)}, but environment "{env}" '
                f"takes shape {fmt_shape(field.shape)}.",
                f"Declare it as {_decl('action', field)}.")


def action_range_outside(span: Optional[Span], name: str, lo: float, hi: float, field: Field,
                         env: str) -> Diagnostic:
    declared = "has no declared range" if math.isinf(lo) and math.isinf(hi) else f"is declared in {interval(lo, hi)}"
    return _err("E0507", span,
                f'The action "{name}" {declared}, which is not inside the range '
                f'{interval(field.lo, field.hi)} that environment "{env}" accepts.',
                f"Declare a range inside the environment's, e.g. {_decl('action', field)}; "
                "the declared range is where the action is clipped.")


# ---- the check -----------------------------------------------------------------------


def _name_spans(tp: TypedProgram, tree=None) -> tuple[dict[tuple[str, str], Span], Optional[Span]]:
    """(kind, name) -> the span of the declaration's name, and the policy header's name span.

    The typed program keeps whole-declaration spans; the names' own spans come from its
    untyped AST, `tree` when the caller has it (the language server), else from re-parsing
    its source (a few milliseconds, and it keeps the typed contract as is)."""
    from polc.frontend import ast
    from polc.messages import PolError
    from polc.frontend.parse import parse_program

    prog = tree
    if prog is None:
        if not tp.source:
            return {}, None
        try:
            prog = parse_program(tp.source, tp.file)
        except PolError:
            return {}, None
    spans: dict[tuple[str, str], Span] = {}
    header = None
    for d in prog.decls:
        if isinstance(d, ast.ObsDecl):
            spans[("obs", d.name)] = d.name_span
        elif isinstance(d, ast.ActionDecl):
            spans[("action", d.name)] = d.name_span
        elif isinstance(d, ast.PolicyDecl) and header is None:
            header = d.name_span
    return spans, header


def _inside(lo: float, hi: float, outer_lo: float, outer_hi: float) -> bool:
    """[lo, hi] lies inside [outer_lo, outer_hi], up to the 6 significant digits
    the messages print (so a range copied from a message is accepted)."""
    def tol(x: float) -> float:
        return 1e-5 * max(1.0, abs(x)) if math.isfinite(x) else 0.0

    return lo >= outer_lo - tol(outer_lo) and hi <= outer_hi + tol(outer_hi)


def check_program_against(tp: TypedProgram, schema: EnvSchema, tree=None) -> list[Diagnostic]:
    """Diagnostics for the program's `obs` and `action` declarations against `schema`.

    Observations: each declared one must exist (E0501), not be hidden (E0510:
    privileged, for the expert and the trace), with the same shape (E0502); a
    declared range narrower than the environment's is a warning (W0503). Actions:
    every environment action must be declared (E0504), no unknown ones (E0505), same shapes (E0506), declared range inside the
    environment's (E0507). Echoes: an action whose mean reads an observation
    that echoes an action (W0509, at the read). `tree`: the program's untyped AST, when
    the caller has it (the names' spans are then not re-parsed)."""
    spans, header = _name_spans(tp, tree)
    out: list[Diagnostic] = []
    for o in tp.obs:
        span = spans.get(("obs", o.name), o.span)
        f = schema.obs_field(o.name)
        if f is None:
            out.append(obs_missing(span, o.name, schema))
        elif f.hidden:
            out.append(obs_hidden(span, o.name, schema))
        elif tuple(o.type.shape) != f.shape:
            out.append(obs_shape(span, o.name, tuple(o.type.shape), f, schema.name))
        elif not _inside(f.lo, f.hi, o.lo, o.hi):
            out.append(obs_range_narrower(span, o.name, o.lo, o.hi, f, schema.name))
    declared = {a.name for a in tp.actions}
    missing = [f.name for f in schema.actions if f.name not in declared]
    if missing:
        out.append(action_missing(header, missing, schema))
    for a in tp.actions:
        span = spans.get(("action", a.name), a.span)
        f = schema.action_field(a.name)
        if f is None:
            out.append(action_unknown(span, a.name, schema))
        elif tuple(a.type.shape) != f.shape:
            out.append(action_shape(span, a.name, tuple(a.type.shape), f, schema.name))
        elif not _inside(a.lo, a.hi, f.lo, f.hi):
            out.append(action_range_outside(span, a.name, a.lo, a.hi, f, schema.name))
    readable = {f.name for f in schema.policy_obs()}
    known = {o.name for o in tp.obs if o.name in readable}
    out += check_echoes(tp, {o: a for o, a in schema.echoes().items() if o in known})
    return out

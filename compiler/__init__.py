"""polc: the compiler for Pol, a small typed dataflow language for structured control policies.

    program = polc.load("initial.pol")     # parse + check (+ analysis); raises polc.PolError
    policy = program.compile()             # lower to jitted JAX (imports jax on first use)
    params = policy.init(jax.random.PRNGKey(0))
    actions, latents = policy.apply(params, obs)

Phases, each a module, imports only going forward:
    parse -> check -> analyze -> lower (and emit, fmt, graph as back ends).

The modules by phase (stanc3 keeps these as folders; at 35 modules, none over 600
lines, one flat package with the phase in the entry module's name reads as well
and keeps the names users import short, `polc.typed`, `polc.intervals`):
    front end   ast, parse (with lalr, the LALR driver over grammar/pol_tables.py), syntax_errors, check,
                check_expr, consts, elements, typed, errors; record (the frozen dataclass of ast and typed)
    analysis    analyze (the entry), abstract, intervals (with element_rules, one element's
                ranges, and floats, small arrays in plain Python), directions, rational, deps,
                counterexample
    back end    lower, emit, emit_c (C99, with c_expr), reference (the NumPy interpreter lower is tested against), transforms
    tools       fmt, graph (with layout, its box placement); diagnostics (rendering), files, cli (the driver)
Nothing here imports the runtime, and nothing `polc check` needs imports jax or numpy
(numpy is for the back ends and the counterexample search).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from .messages import Diagnostic, InternalCompilerError, PolError, render, render_all
from .check.typed import TypedProgram

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.program import Analysis
    from .backend.lower import CompiledPolicy

__version__ = "0.1.0"


@dataclass(frozen=True)
class Program:
    """A parsed and checked Pol program.

    `typed` is the typed program (names, shapes, ranges, docs: the schema);
    `warnings` are the diagnostics that did not stop compilation."""

    typed: TypedProgram
    warnings: tuple[Diagnostic, ...]
    analysis: Optional["Analysis"] = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.typed.name

    @property
    def source(self) -> str:
        return self.typed.source

    def compile(self) -> "CompiledPolicy":
        """Lower to JAX: a `CompiledPolicy` of pure, jittable functions."""
        from .backend.lower import lower

        return lower(self.typed)


def loads(text: str, file: str = "<string>", analyze: bool = True) -> Program:
    """Parse and check Pol source text. Raises `PolError` carrying every error."""
    from .check.program import check_program
    from .frontend.parse import parse_program

    typed, warnings = check_program(parse_program(text, file))
    analysis = None
    if analyze:
        from .analysis.program import analyze_program

        analysis = analyze_program(typed)
        warnings = warnings + [d for d in analysis.diagnostics if not d.is_error]
        errors = [d for d in analysis.diagnostics if d.is_error]
        if errors:  # every analysis finding at once: the warnings too, not one fix later
            raise PolError(sorted(errors + list(warnings), key=_position), text)
    return Program(typed, tuple(warnings), analysis)


def _position(d: Diagnostic) -> tuple:
    return (0, 0) if d.span is None else (d.span.line, d.span.column)


def load(path: str, analyze: bool = True) -> Program:
    """Parse and check a `.pol` file."""
    with open(path, encoding="utf-8") as f:
        return loads(f.read(), path, analyze=analyze)


__all__ = [
    "Program", "load", "loads", "PolError", "InternalCompilerError", "Diagnostic",
    "TypedProgram", "render", "render_all", "__version__",
]

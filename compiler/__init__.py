"""polc: the compiler for Pol, a small typed dataflow language for structured control policies.

    program = polc.load("initial.pol")     # parse + check (+ analysis); raises polc.PolError
    policy = program.compile()             # lower to jitted JAX (imports jax on first use)
    params = policy.init(jax.random.PRNGKey(0))
    actions, latents = policy.apply(params, obs)

Phases in order, each a room (a subpackage) importing only itself and earlier rooms
(tests/project/test_import_order.py reads every import to check it):

    util/      helpers with no Pol knowledge, the runtime's too: `files` (write_atomic),
               `record`, `floats`. Imports nothing of polc, so both sides can share it.
    messages   `Span`, `Diagnostic`, `PolError` and their stanc3-style rendering; `errors`
               has one constructor per message kind and every phrase a message is built
               from. Every phase reports through these two, so they come before all phases.
    frontend/  text -> untyped ast: `parse` (with `lalr`, the driver of grammar/pol_tables.py),
               `syntax_errors`, `ast`. Its own room: nothing in it knows what a name means.
    check/     untyped ast -> `typed` program + warnings: `program` (the entry), `expr`,
               `_consts`, `_elements`, `priors`, over the shared tables of `_state`.
               Separate from analysis because a program must check before it is analysed.
    analysis/  what the typed program computes without running it: `program` (the entry:
               `analyze_program`), `intervals`, `element_rules`, `abstract`, `deps`, `echo`,
               `counterexample` with the NumPy `reference` interpreter and the constraint
               `transforms`, `fixpoint` (the proved ranges of states, by widening). One room because its parts feed each other, none the checker.
    backend/   typed program -> something that runs: `lower` (JAX), `emit` (Python, HLO,
               JSON), `emit_c` (C99). Last: only it needs jax.
    the rest   the public API here, `cli` (the driver), and tools over any earlier room:
               `fmt`, `graph` (with `layout`), `highlight` (Pygments), `watch`, `text` (a
               claim as text; numbers and ranges are `util/text`, which every room uses).
Modules with a leading underscore are their room's own; each room's `__init__` names its
entry point. Nothing here imports the runtime, and nothing `polc check` needs imports jax
or numpy (numpy is for the back ends and the counterexample search).
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

"""The tables one program's checking fills in, owned by one class its parts share.

The checker is three parts over the same tables: `program._Checker` (declarations,
intents, the program), `expr.ExprChecker` (one expression's type and shape) and
`_consts.ConstChecker` (folding `const`s). Each part subclasses `CheckerState`, so
what an expression rule reads (`kinds`, `types`, `consts`...) is declared here, with
its meaning, rather than set in one part's `__init__` and read in another's methods.
"""

from __future__ import annotations

from typing import Optional, Union

from ..frontend import ast
from ..messages import Diagnostic, source_lines
from . import typed as T
from .typed import Type


class CheckerState:
    """One program's checking tables. Names map to their declaration, kind and type
    as declarations are collected; expressions read them."""

    def __init__(self, prog: ast.Program):
        self.prog = prog
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.decls: dict[str, ast.Decl] = {}
        self.types: dict[str, Type] = {}  # resolved types of every declared value
        self.kinds: dict[str, str] = {}  # "obs", "weight", "const", "latent", "action"...
        self.typed_nodes: dict[str, Union[T.Latent, T.Action]] = {}
        self.poisoned: set[str] = set()  # names whose declaration had an error: reads of them are silent
        self.consts: dict[str, float] = {}  # every constant that folded, by name
        self.const_used: set[str] = set()
        self.typed_states: dict[str, T.State] = {}  # the states whose declaration checked, by name
        self.prog_header: Optional[ast.PolicyDecl] = None  # `policy NAME`, once declarations are collected
        self._mlp_count: dict[str, int] = {}  # the mlps in each declaration so far (their weights' names)
        self._current = ""  # the declaration being checked
        self._lines: Optional[list[str]] = None

    def error(self, d: Diagnostic) -> None:
        """Report `d` and go on checking."""
        self.errors.append(d)

    def text(self, span: ast.Span) -> str:
        """The source text under `span` (lines of a multi-line span joined by one space)."""
        if self._lines is None:  # split once: intents quote their claims, hundreds in a big program
            self._lines = source_lines(self.prog.text)
        lines = self._lines
        if span.line == span.end_line:
            return lines[span.line - 1][span.column - 1: span.end_column - 1]
        parts = [lines[span.line - 1][span.column - 1:]]
        parts += lines[span.line: span.end_line - 1]
        parts.append(lines[span.end_line - 1][: span.end_column - 1])
        return " ".join(p.strip() for p in parts)


__all__ = ["CheckerState"]

"""Phase 2, named constants: `const lookahead = 6`, folded before anything reads them.

`ConstChecker` is the part of the checker (`program._Checker`) that folds every
`const` to its number (other constants first, a cycle or a non-constant
reported once), resolves constant dimensions of types, and counts which
constants are used (an unused one is W0109). Expressions read a constant as
the number it folded to (`expr.ExprChecker.expr_Name`), so nothing after
the checker knows constants exist.
"""

from __future__ import annotations

import math
from typing import Optional

from ..frontend import ast
from .. import errors
from . import typed as T
from ._state import CheckerState
from .expr import MAX_ELEMENTS, const_names, fold


class ConstChecker(CheckerState):
    """Constants, over the checker's tables (`CheckerState`: `kinds`, `decls`, `consts`, `const_used`)."""

    def check_consts(self) -> list[T.Constant]:
        """Fold every `const`, those it reads first (an iterative depth-first order: a chain of
        constants may be longer than Python's stack); a cycle or a non-constant is reported once."""
        decls = {n: d for n, d in self.decls.items() if self.kinds[n] == "const"}
        out: list[T.Constant] = []
        state: dict[str, int] = {}
        for root in decls:
            if root in state:
                continue
            stack = [root]
            state[root] = 1
            todo = [(root, iter(const_names(decls[root].expr)))]
            while todo:
                n, it = todo[-1]
                for name in it:
                    m = name.id
                    if m not in decls:
                        continue
                    if state.get(m) == 1:
                        loop = stack[stack.index(m):]
                        self.error(errors.bad_const(decls[m].name_span, m, "depends on itself: "
                                                    + " -> ".join(loop + [m])))
                        state[m] = 3  # failed: reported once
                    elif m not in state:
                        state[m] = 1
                        stack.append(m)
                        todo.append((m, iter(const_names(decls[m].expr))))
                        break
                else:
                    todo.pop()
                    stack.pop()
                    if state[n] == 1:
                        state[n] = 2
                        c = self.fold_const(decls[n])
                        if c is not None:
                            out.append(c)
        return out

    def fold_const(self, d: ast.ConstDecl) -> Optional[T.Constant]:
        for n in const_names(d.expr):
            kind = self.kinds.get(n.id)
            if kind is None:
                self.error(errors.undefined_name(n.span, n.id, self.kinds, prefer=("const",)))
                return None
            if kind != "const":
                self.error(errors.bad_const(n.span, d.name, errors.const_reads(n.id, kind), errors.CONST_READS_HINT))
                return None
            if n.id not in self.consts:
                return None  # reported where it failed
            self.const_used.add(n.id)
        v = fold(d.expr, self.consts)
        if v is None:
            self.error(errors.bad_const(d.expr.span, d.name, "is not a number expression"))
            return None
        if not math.isfinite(v):
            self.error(errors.bad_const(d.expr.span, d.name, errors.not_finite(v), errors.NOT_FINITE_HINT))
            return None
        self.consts[d.name] = v
        return T.Constant(d.name, v, d.doc, d.span)

    def used_consts(self, e: ast.Expr) -> dict[str, float]:
        """The constants' values, each constant `e` names counted as used."""
        todo = [e]
        while todo:
            x = todo.pop()
            if isinstance(x, ast.Vector):
                todo.extend(x.items)
                continue
            for n in const_names(x):
                if n.id in self.consts:
                    self.const_used.add(n.id)
        return self.consts

    def dims(self, spec: ast.TypeSpec, report: bool = True) -> Optional[tuple[int, ...]]:
        """The dimensions of a type, a constant's name replaced by its value."""
        out = []
        for n in spec.dims:
            if isinstance(n, int):
                out.append(n)
                continue
            kind = self.kinds.get(n.id)
            why = None
            if kind is None:
                if report:
                    self.error(errors.undefined_name(n.span, n.id, self.kinds, prefer=("const",)))
                return None
            if kind != "const":
                why = errors.not_a_constant(kind)
            elif n.id not in self.consts:
                return None  # the constant's own error is reported
            elif not float(self.consts[n.id]).is_integer():
                why = errors.not_whole(self.consts[n.id])
            if why is not None:
                if report:
                    self.error(errors.dim_not_integer(n.span, errors.quoted(n.id), why))
                return None
            self.const_used.add(n.id)
            if abs(self.consts[n.id]) > MAX_ELEMENTS:
                if report:
                    self.error(errors.too_large(spec.span, (int(self.consts[n.id]),), MAX_ELEMENTS))
                return None
            out.append(int(self.consts[n.id]))
        return tuple(out)

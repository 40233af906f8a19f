"""Phase 2, expressions: the type and static shape of every expression.

`ExprChecker` is the part of the checker (`program._Checker`) that types one
expression tree: names, operators, indexing, vector literals and builtin
calls (`mlp` included), with NumPy broadcasting. An expression that is wrong
reports one error and raises `_Poison`, which unwinds to its declaration.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Union

from ..frontend import ast
from .. import errors
from . import typed as T
from ..messages import Diagnostic, ice
from ._state import CheckerState
from .typed import BOOL, REAL, Type

# The most elements any one value may have (an 84x84x3 image fits): beyond it the
# analysis and the reference interpreter would allocate without bound.
MAX_ELEMENTS = 1 << 16
MAX_NDIM = 32  # as parse.MAX_NDIM for declared types
# The widest MLP layer.
MAX_LAYER = 1 << 14

FUNCTIONS = sorted(set(T.ELEMENTWISE) | set(T.BINARY_FUNCS) | set(T.REDUCTIONS) | set(T.GUARDS)
                   | {"clip", "where", "mlp"})


class _Poison(Exception):
    """An expression already reported as wrong; unwinds to its declaration."""


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> Optional[tuple[int, ...]]:
    """NumPy broadcasting of two static shapes, or None if they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def _int_literal(e: ast.Expr) -> Optional[int]:
    """The integer an index or keyword literal denotes, or None if it is not one."""
    sign = 1
    while isinstance(e, ast.Unary) and e.op in "-+":
        sign = -sign if e.op == "-" else sign
        e = e.operand
    if isinstance(e, ast.Number) and float(e.value).is_integer() and "." not in e.text and "e" not in e.text.lower():
        return sign * int(e.value)
    return None


def const_names(e: ast.Expr) -> list[ast.Name]:
    """The names an index or constant expression reads (numbers, names, arithmetic)."""
    if isinstance(e, ast.Name):
        return [e]
    if isinstance(e, ast.Unary):
        return const_names(e.operand)
    if isinstance(e, ast.Binary):
        return const_names(e.left) + const_names(e.right)
    return []


_FOLD = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def fold(e: ast.Expr, consts: dict[str, float]) -> Optional[float]:
    """The number a constant expression denotes (numbers, `consts`' names, `+ - * / ^`, signs),
    or None if it is not one. Division by zero and overflow give inf or nan, which the caller refuses."""
    if isinstance(e, ast.Number):
        return e.value
    if isinstance(e, ast.Name):
        return consts.get(e.id)
    if isinstance(e, ast.Unary) and e.op in "-+":
        x = fold(e.operand, consts)
        return None if x is None else (-x if e.op == "-" else x)
    if isinstance(e, ast.Binary) and e.op in ("+", "-", "*", "/", "^"):
        a, b = fold(e.left, consts), fold(e.right, consts)
        if a is None or b is None:
            return None
        try:
            if e.op == "/":
                return a / b if b != 0 else (math.nan if a == 0 else math.copysign(math.inf, a))
            if e.op == "^":
                out = a ** b
                return out if isinstance(out, float) else math.nan  # a complex root of a negative number
            return _FOLD[e.op](a, b)
        except (OverflowError, ZeroDivisionError):
            return math.inf
    return None


def _whole_refs(e: T.TExpr) -> list[T.Ref]:
    """The names `e` reads whole, in source order: not under an index, a reduction or an MLP
    (those change the shape of what they read)."""
    if isinstance(e, T.Ref):
        return [e]
    if isinstance(e, (T.Index, T.Reduce, T.Mlp)):
        return []
    return [r for c in T.children(e) for r in _whole_refs(c)]


class ExprChecker(CheckerState):
    """Expression typing over the checker's tables (`CheckerState`: `kinds`, `types`, `poisoned`, ...)."""

    def fail(self, d: Diagnostic):
        self.errors.append(d)
        raise _Poison()

    # ---- expressions -------------------------------------------------------------------------

    def expr(self, e: ast.Expr) -> T.TExpr:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise ice(f"no type rule for {type(e).__name__}")
        x = method(e)
        if math.prod(x.type.shape) > MAX_ELEMENTS:
            self.fail(errors.too_large(e.span, x.type.shape, MAX_ELEMENTS))
        if len(x.type.shape) > MAX_NDIM:  # vector literals nested 65 deep: numpy stops at 64
            self.fail(errors.limit_exceeded(e.span, errors.value_dimensions(len(x.type.shape)),
                                            errors.dimensions(MAX_NDIM)))
        return x

    def expr_Number(self, e: ast.Number) -> T.TExpr:
        return T.Const(e.value, Type(REAL), e.span)

    def expr_BoolLit(self, e: ast.BoolLit) -> T.TExpr:
        return T.Const(e.value, Type(BOOL), e.span)

    def int_value(self, e: ast.Expr) -> Optional[int]:
        """The integer an index, slice end or keyword denotes: a literal, or an expression of
        constants whose value is whole (`lookahead - 1`); None if it is neither."""
        i = _int_literal(e)
        if i is not None:
            return i
        names = const_names(e)
        for n in names:
            if n.id not in self.kinds:
                self.fail(errors.undefined_name(n.span, n.id, self.kinds, prefer=("const",)))
        if not names or any(self.kinds.get(n.id) != "const" for n in names):
            return None
        for n in names:
            self.const_used.add(n.id)
            if n.id not in self.consts:
                raise _Poison()  # a constant already reported as wrong
        v = fold(e, self.consts)
        if v is None or not math.isfinite(v) or not float(v).is_integer():
            return None
        return int(v)

    def expr_Name(self, e: ast.Name) -> T.TExpr:
        kind = self.kinds.get(e.id)
        if kind == "const":
            self.const_used.add(e.id)
            if e.id not in self.consts:
                raise _Poison()
            return T.Const(self.consts[e.id], Type(REAL), e.span)
        if kind is None:
            if self.prog_header is not None and e.id == self.prog_header.name:
                self.fail(errors.not_a_value(e.span, e.id, "policy"))
            if e.id in FUNCTIONS:
                self.fail(errors.not_a_value(e.span, e.id, "function"))
            self.fail(errors.undefined_name(e.span, e.id, self.kinds))
        if e.id in self.poisoned or e.id not in self.types:
            raise _Poison()
        return T.Ref(e.id, kind, self.types[e.id], e.span)

    def need(self, x: T.TExpr, base: str, what: str, hint: Optional[str] = None) -> None:
        if x.type.base != base:
            if hint is None and base == REAL:
                hint = errors.BOOL_TO_REAL_HINT
            self.fail(errors.type_mismatch(x.span, what, base, str(x.type), hint))

    def bshape(self, span: ast.Span, op: str, *xs: T.TExpr) -> tuple[int, ...]:
        shape: tuple[int, ...] = ()
        for x in xs:
            out = broadcast_shapes(shape, x.type.shape)
            if out is None:
                self.fail(errors.shape_mismatch(span, op, shape, x.type.shape))
            shape = out
        return shape

    def expr_Unary(self, e: ast.Unary) -> T.TExpr:
        x = self.expr(e.operand)
        if e.op == "not":
            self.need(x, BOOL, "The operand of `not`", errors.NOT_HINT)
            return T.Unary("not", x, x.type, e.span)
        self.need(x, REAL, errors.operand_of(e.op))
        return x if e.op == "+" else T.Unary("neg", x, x.type, e.span)

    def expr_Binary(self, e: ast.Binary) -> T.TExpr:
        left, right = self.expr(e.left), self.expr(e.right)
        op = T.BINARY_OPS[e.op]
        if op in ("and", "or"):
            self.need(left, BOOL, errors.operand_of(e.op, "left"), errors.AND_OR_HINT)
            self.need(right, BOOL, errors.operand_of(e.op, "right"), errors.AND_OR_HINT)
            base = BOOL
        elif op in ("eq", "ne") and left.type.base == BOOL and right.type.base == BOOL:
            base = BOOL
        else:
            self.need(left, REAL, errors.operand_of(e.op, "left"))
            self.need(right, REAL, errors.operand_of(e.op, "right"))
            base = BOOL if op in ("eq", "ne", "lt", "le", "gt", "ge") else REAL
        shape = self.bshape(e.op_span, e.op, left, right)
        return T.Binary(op, left, right, Type(base, shape), e.span)

    def expr_IfElse(self, e: ast.IfElse) -> T.TExpr:
        return self.select(e.span, "if", self.expr(e.cond), self.expr(e.then), self.expr(e.orelse))

    def select(self, span: ast.Span, what: str, c: T.TExpr, a: T.TExpr, b: T.TExpr) -> T.TExpr:
        example = self.text(c.span) if len(self.text(c.span)) <= 30 else "x"
        self.need(c, BOOL, errors.condition_of(what), errors.comparison_hint(example))
        if a.type.base != b.type.base:
            self.fail(errors.type_mismatch(b.span, errors.branches_of(what), errors.like_the_first(a.type.base),
                                           str(b.type)))
        shape = self.bshape(span, what, c, a, b)
        return T.Select(c, a, b, Type(a.type.base, shape), span)

    def expr_Vector(self, e: ast.Vector) -> T.TExpr:
        if not e.items:
            self.fail(errors.empty_vector(e.span))
        items = tuple(self.expr(i) for i in e.items)
        if any(i.type != items[0].type for i in items[1:]):
            self.fail(self.ragged(items))
        t = items[0].type
        return T.Stack(items, Type(t.base, (len(items),) + t.shape), e.span)

    def ragged(self, items: Sequence[T.TExpr]) -> Diagnostic:
        """E0209 at the odd item of a vector literal: the items of a type other than the most
        common one (on a tie, the one with fewer dimensions: a forgotten index makes a value
        bigger, not smaller), with a note at each whole-array latent it reads unindexed."""
        counts: dict[Type, int] = {}
        for i in items:
            counts[i.type] = counts.get(i.type, 0) + 1
        expected = max(counts, key=lambda t: (counts[t], -len(t.shape)))
        odd = next(i for i in items if i.type != expected)
        latents: dict[str, tuple[str, str, ast.Span, Optional[str]]] = {}
        if len(odd.type.shape) > len(expected.shape):
            for r in _whole_refs(odd):
                decl = self.decls.get(r.name)
                if r.kind == "latent" and r.type.shape and isinstance(decl, ast.LatentDecl):
                    source = decl.expr.id if isinstance(decl.expr, ast.Name) else None
                    latents.setdefault(r.name, (r.name, str(r.type), decl.name_span, source))
        return errors.ragged_vector(odd.span, str(expected), str(odd.type), latents=list(latents.values()))

    def expr_Subscript(self, e: ast.Subscript) -> T.TExpr:
        base = self.expr(e.base)
        items, out = self.resolve_items(e.items, base.type.shape, e.span)
        return T.Index(base, tuple(items), Type(base.type.base, tuple(out)), e.span)

    def resolve_items(self, given: Sequence[Union[ast.At, ast.Slice]], shape: tuple[int, ...], span: ast.Span
                      ) -> tuple[list[Union[int, tuple[int, int]]], list[int]]:
        """Indices and slices of a value of `shape`, normalised (ints, (start, stop) pairs),
        and the shape they select."""
        if len(given) > len(shape):
            self.fail(errors.too_many_indices(span, len(given), shape))
        items: list[Union[int, tuple[int, int]]] = []
        out: list[int] = []
        for axis, it in enumerate(given):
            size = shape[axis]
            if isinstance(it, ast.At):
                i = self.int_value(it.index)
                if i is None:
                    self.fail(errors.index_not_constant(it.span))
                if not -size <= i < size:
                    self.fail(errors.index_out_of_bounds(it.span, i, size, axis))
                items.append(i % size)
            else:
                ends = []
                for bound, default in ((it.start, 0), (it.stop, size)):
                    if bound is None:
                        ends.append(default)
                        continue
                    j = self.int_value(bound)
                    if j is None:
                        self.fail(errors.index_not_constant(bound.span))
                    if not -size <= j <= size:
                        self.fail(errors.index_out_of_bounds(bound.span, j, size, axis))
                    ends.append(j + size if j < 0 else j)
                if ends[0] >= ends[1]:
                    self.fail(errors.empty_slice(it.span, ends[0], ends[1]))
                items.append((ends[0], ends[1]))
                out.append(ends[1] - ends[0])
        out += list(shape[len(given):])
        return items, out

    # ---- calls ---------------------------------------------------------------------------

    def kwargs(self, e: ast.Call, allowed: Sequence[str]) -> dict[str, ast.Kwarg]:
        out: dict[str, ast.Kwarg] = {}
        for k in e.kwargs:
            if k.name not in allowed:
                self.fail(errors.unknown_keyword(k.name_span, e.func, k.name, allowed))
            if k.name in out:
                self.fail(errors.duplicate_keyword(k.name_span, e.func, k.name))
            out[k.name] = k
        return out

    def arity(self, e: ast.Call, expected: str, ok: bool) -> None:
        if not ok:
            self.fail(errors.wrong_arity(e.span, e.func, expected, len(e.args)))

    def expr_Call(self, e: ast.Call) -> T.TExpr:
        f = e.func
        if f not in FUNCTIONS:
            if f in self.kinds:
                self.fail(errors.not_a_function(e.func_span, f, self.kinds[f]))
            self.fail(errors.unknown_function(e.func_span, f, FUNCTIONS))
        if f == "mlp":
            return self.call_mlp(e)
        if f == "nan_to_num":
            return self.call_nan_to_num(e)
        reducing = f in T.REDUCTIONS and (len(e.args) == 1 or f in ("sum", "mean", "norm"))
        kw = self.kwargs(e, ("axis",) if reducing else ())
        if reducing:
            self.arity(e, "1 argument (and optionally `axis = k`)", len(e.args) == 1)
            x = self.expr(e.args[0])
            self.need(x, REAL, errors.argument_of(f))
            axis = None
            shape: tuple[int, ...] = ()
            if "axis" in kw:
                axis = self.int_value(kw["axis"].value)
                if axis is None:
                    self.fail(errors.bad_keyword_value(kw["axis"].value.span, f, "axis", "an integer literal"))
                if not -x.type.ndim <= axis < x.type.ndim:
                    self.fail(errors.bad_axis(kw["axis"].value.span, axis, x.type.ndim))
                axis %= x.type.ndim
                shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
            return T.Reduce(f, x, axis, Type(REAL, shape), e.span)
        args = tuple(self.expr(a) for a in e.args)
        if f in T.ELEMENTWISE:
            self.arity(e, "1 argument", len(args) == 1)
            self.need(args[0], REAL, errors.argument_of(f))
            return T.Apply(f, args, args[0].type, e.span)
        if f in T.BINARY_FUNCS:
            expected = "1 argument (a reduction) or 2 (elementwise)" if f in ("min", "max") else "2 arguments"
            self.arity(e, expected, len(args) == 2)
            for i, a in enumerate(args):
                self.need(a, REAL, errors.argument_of(f, i))
            return T.Apply(f, args, Type(REAL, self.bshape(e.span, f, *args)), e.span)
        if f == "clip":
            self.arity(e, "3 arguments (x, lo, hi)", len(args) == 3)
            for i, a in enumerate(args):
                self.need(a, REAL, errors.argument_of("clip", i))
            return T.Apply(f, args, Type(REAL, self.bshape(e.span, f, *args)), e.span)
        if f == "isfinite":
            self.arity(e, "1 argument", len(args) == 1)
            self.need(args[0], REAL, "The argument of `isfinite`")
            return T.Apply(f, args, Type(BOOL, args[0].type.shape), e.span)
        if f == "where":
            self.arity(e, "3 arguments (condition, then, else)", len(args) == 3)
            return self.select(e.span, "where", *args)
        raise ice(f"function {f} has no type rule")

    def call_nan_to_num(self, e: ast.Call) -> T.TExpr:
        """`nan_to_num(x; nan = 0, posinf = v, neginf = v)`: x with nan replaced by `nan`, and +inf
        and -inf by `posinf` and `neginf` (each `nan`'s value unless given). Replacements are
        numbers or constants, as the analysis must know them."""
        kw = self.kwargs(e, ("nan", "posinf", "neginf"))
        self.arity(e, "1 argument (and optionally `nan`, `posinf`, `neginf` values)", len(e.args) == 1)
        x = self.expr(e.args[0])
        self.need(x, REAL, "The argument of `nan_to_num`")
        values: dict[str, float] = {}
        for name in ("nan", "posinf", "neginf"):
            if name not in kw:
                values[name] = values.get("nan", 0.0)
                continue
            v = kw[name].value
            names = const_names(v)
            for n in names:
                if self.kinds.get(n.id) == "const":
                    self.const_used.add(n.id)
            folded = fold(v, self.consts) if all(self.kinds.get(n.id) == "const" for n in names) else None
            if folded is None or not math.isfinite(folded):
                self.fail(errors.bad_keyword_value(v.span, "nan_to_num", name, "a finite number or constant"))
            values[name] = folded
        reps = tuple(T.Const(values[n], Type(REAL), (kw[n].value.span if n in kw else e.span))
                     for n in ("nan", "posinf", "neginf"))
        return T.Apply("nan_to_num", (x,) + reps, x.type, e.span)

    def call_mlp(self, e: ast.Call) -> T.TExpr:
        kw = self.kwargs(e, ("hidden", "out", "activation"))
        if not e.args:
            self.fail(errors.wrong_arity(e.span, "mlp", "at least 1 input", 0))
        inputs = tuple(self.expr(a) for a in e.args)
        for i, x in enumerate(inputs):
            self.need(x, REAL, errors.mlp_input(i))
        hidden: tuple[int, ...] = (64, 64)
        if "hidden" in kw:
            v = kw["hidden"].value
            sizes = [self.int_value(i) for i in v.items] if isinstance(v, ast.Vector) else [None]
            if not sizes or any(s is None or not 0 < s <= MAX_LAYER for s in sizes):
                self.fail(errors.bad_keyword_value(v.span, "mlp", "hidden",
                                                   errors.layer_sizes(MAX_LAYER)))
            hidden = tuple(sizes)
        out = 0
        if "out" in kw:
            n = self.int_value(kw["out"].value)
            if n is None or not 0 < n <= MAX_LAYER:
                self.fail(errors.bad_keyword_value(kw["out"].value.span, "mlp", "out",
                                                   errors.integer_from_1(MAX_LAYER)))
            out = n
        activation = "tanh"
        if "activation" in kw:
            v = kw["activation"].value
            if not (isinstance(v, ast.Name) and v.id in T.ACTIVATIONS):
                self.fail(errors.bad_keyword_value(v.span, "mlp", "activation",
                                                   errors.one_of(T.ACTIVATIONS)))
            activation = v.id
        k = self._mlp_count.get(self._current, 0)
        self._mlp_count[self._current] = k + 1
        key = f"{self._current}.mlp" + (str(k) if k else "")
        return T.Mlp(key, inputs, hidden, out, activation, Type(REAL, (out,) if out else ()), e.span)

"""Phase 2: untyped AST -> `TypedProgram` plus warnings.

Resolves names, orders declarations into a DAG (a cycle is an error naming
it), infers the type and static shape of every expression, and validates
ranges, weight constraints and initial values, noise and intents. Errors are
collected (one per offending expression) rather than stopping at the first;
an expression that failed yields no type, and whatever depends on it is
skipped silently so one mistake is reported once.

Entry point: `check_program(prog) -> (TypedProgram, warnings)`, raising
`PolError` with every error found.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Union

from . import ast, errors, typed as T
from .diagnostics import Diagnostic, PolError, ice, source_lines
from .errors import fmt_num
from .typed import BOOL, REAL, Type

# The most elements any one value may have (an 84x84x3 image fits): beyond it the
# analysis and the reference interpreter would allocate without bound.
MAX_ELEMENTS = 1 << 16
# The widest MLP layer.
MAX_LAYER = 1 << 14

FUNCTIONS = sorted(set(T.ELEMENTWISE) | set(T.BINARY_FUNCS) | set(T.REDUCTIONS) | {"clip", "where", "mlp"})


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


def _const_value(e: ast.Expr) -> Optional[Union[float, tuple]]:
    """A weight's initial value: a number or a (nested) vector literal of numbers."""
    sign = 1.0
    while isinstance(e, ast.Unary) and e.op in "-+":
        sign = -sign if e.op == "-" else sign
        e = e.operand
    if isinstance(e, ast.Number):
        return sign * e.value
    if isinstance(e, ast.Vector) and sign == 1.0 and e.items:
        items = [_const_value(i) for i in e.items]
        if any(i is None for i in items):
            return None
        return tuple(items)
    return None


def _shape_of(v) -> Optional[tuple[int, ...]]:
    if not isinstance(v, tuple):
        return ()
    shapes = {_shape_of(x) for x in v}
    if len(shapes) != 1 or None in shapes:
        return None
    return (len(v),) + shapes.pop()


def _ragged(e: ast.Expr) -> tuple[ast.Span, tuple[int, ...], tuple[int, ...]]:
    """In a constant literal whose rows differ in shape: the first odd item, the
    shape of the first item and its own."""
    while isinstance(e, ast.Unary):
        e = e.operand
    if isinstance(e, ast.Vector):
        shapes = [_shape_of(_const_value(i)) for i in e.items]
        for item, shape in zip(e.items, shapes):
            if shape is None:
                return _ragged(item)
            if shape != shapes[0]:
                return item.span, shapes[0], shape
    raise ice("a ragged literal with no ragged part")


def _flat(v) -> list[float]:
    return [x for item in v for x in _flat(item)] if isinstance(v, tuple) else [v]


def _fill(shape: tuple[int, ...], x: float):
    return x if not shape else tuple(_fill(shape[1:], x) for _ in range(shape[0]))


def _inside(x: float, lo: float, hi: float) -> float:
    """A start value strictly inside (lo, hi), near `x`: a small step from the bound it crossed."""
    if lo > -math.inf and hi < math.inf:
        step = 0.01 * (hi - lo)
    else:
        step = 0.01 * max(1.0, abs(lo if lo > -math.inf else hi))
    return lo + step if x <= lo else hi - step


def _constraint_text(lo: float, hi: float) -> str:
    if lo > -math.inf and hi < math.inf:
        return f"in [{fmt_num(lo)}, {fmt_num(hi)}]"
    if lo > -math.inf:
        return f">= {fmt_num(lo)}"
    if hi < math.inf:
        return f"<= {fmt_num(hi)}"
    return "(none)"


class _Checker:
    def __init__(self, prog: ast.Program):
        self.prog = prog
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.decls: dict[str, ast.Decl] = {}
        self.types: dict[str, Type] = {}  # resolved types of every declared value
        self.kinds: dict[str, str] = {}
        self.typed_nodes: dict[str, Union[T.Latent, T.Action]] = {}
        self.poisoned: set[str] = set()
        self._mlp_count: dict[str, int] = {}
        self._current = ""
        self._lines: Optional[list[str]] = None
        self._reads: dict[str, set[str]] = {}

    # ---- helpers ---------------------------------------------------------------------

    def error(self, d: Diagnostic) -> None:
        self.errors.append(d)

    def fail(self, d: Diagnostic):
        self.errors.append(d)
        raise _Poison()

    def text(self, span: ast.Span) -> str:
        if self._lines is None:  # split once: intents quote their claims, hundreds in a big program
            self._lines = source_lines(self.prog.text)
        lines = self._lines
        if span.line == span.end_line:
            return lines[span.line - 1][span.column - 1: span.end_column - 1]
        parts = [lines[span.line - 1][span.column - 1:]]
        parts += lines[span.line: span.end_line - 1]
        parts.append(lines[span.end_line - 1][: span.end_column - 1])
        return " ".join(p.strip() for p in parts)

    # ---- declarations ------------------------------------------------------------------

    def collect(self) -> Optional[ast.PolicyDecl]:
        header = None
        for d in self.prog.decls:
            if isinstance(d, ast.PolicyDecl):
                if header is not None:
                    self.error(errors.duplicate_policy(d.span, header.span))
                else:
                    header = d
                continue
            if isinstance(d, ast.ExpectDecl):
                continue
            if d.name in self.decls:
                self.error(errors.duplicate_name(d.name_span, d.name, self.decls[d.name].name_span))
                continue
            self.decls[d.name] = d
            self.kinds[d.name] = {ast.ObsDecl: "obs", ast.WeightDecl: "weight",
                                  ast.LatentDecl: "latent", ast.ActionDecl: "action"}[type(d)]
        return header

    def decl_type(self, spec: ast.TypeSpec) -> Optional[Type]:
        if any(n <= 0 for n in spec.dims):
            self.error(errors.bad_dims(spec.span, spec.dims))
            return None
        if math.prod(spec.dims) > MAX_ELEMENTS:
            self.error(errors.too_large(spec.span, tuple(spec.dims), MAX_ELEMENTS))
            return None
        return Type(spec.base, tuple(spec.dims))

    def range_of(self, rng: Optional[ast.Range], name: str, typ: Optional[Type]) -> tuple[float, float]:
        if rng is None:
            return -math.inf, math.inf
        if typ is not None and typ.base == BOOL:
            self.error(errors.range_on_bool(rng.span, name))
            return -math.inf, math.inf
        lo = rng.lo.value if rng.lo is not None else -math.inf
        hi = rng.hi.value if rng.hi is not None else math.inf
        if not lo < hi or lo == math.inf or hi == -math.inf:
            self.error(errors.empty_range(rng.span, lo, hi))
            return -math.inf, math.inf
        return lo, hi

    def real_io(self, d, kind: str) -> Optional[Type]:
        typ = self.decl_type(d.type)
        if typ is not None and typ.base != REAL:
            self.error(errors.non_real_io(d.type.span, kind, d.name))
            return None
        return typ

    def check_obs(self, d: ast.ObsDecl) -> Optional[T.Obs]:
        typ = self.real_io(d, "observation")
        lo, hi = self.range_of(d.range, d.name, typ)
        if typ is None:
            return None
        self.types[d.name] = typ
        return T.Obs(d.name, typ, lo, hi, d.doc, d.span)

    def check_weight(self, d: ast.WeightDecl) -> Optional[T.Weight]:
        typ = self.real_io(d, "weight")
        lo, hi = self.range_of(d.range, d.name, typ)
        if typ is None:
            return None
        self.types[d.name] = typ
        value = _const_value(d.init)
        if value is None:
            self.error(errors.init_not_constant(d.init.span, d.name))
            return None
        shape = _shape_of(value)
        if shape is None:
            span, first, other = _ragged(d.init)
            self.error(errors.ragged_vector(span, str(Type(REAL, first)), str(Type(REAL, other)), d.name))
            return None
        if shape == () and typ.shape:
            value = _fill(typ.shape, value)
        elif shape != typ.shape:
            self.error(errors.init_shape(d.init.span, d.name, typ.shape, shape))
            return None
        for x in _flat(value):
            if not math.isfinite(x):
                self.error(errors.infinite_init(d.init.span, d.name))
                return None
            if not lo < x < hi:
                self.error(errors.init_outside(d.init.span, d.name, x, _constraint_text(lo, hi),
                                               _inside(x, lo, hi)))
                return None
        return T.Weight(d.name, typ, lo, hi, value, d.doc, d.span)

    # ---- dependency order ------------------------------------------------------------------

    def reads(self, d: ast.Decl) -> list[ast.Name]:
        """Every name a latent or action reads, in source order."""
        out: list[ast.Name] = []

        def walk(e) -> None:
            if isinstance(e, ast.Name):
                out.append(e)
            elif isinstance(e, ast.Unary):
                walk(e.operand)
            elif isinstance(e, ast.Binary):
                walk(e.left); walk(e.right)
            elif isinstance(e, ast.IfElse):
                walk(e.cond); walk(e.then); walk(e.orelse)
            elif isinstance(e, ast.Call):
                for a in e.args:
                    walk(a)
                for k in e.kwargs:
                    if not (e.func == "mlp" and k.name == "activation"):
                        walk(k.value)
            elif isinstance(e, ast.Subscript):
                walk(e.base)
                for it in e.items:
                    if isinstance(it, ast.At):
                        walk(it.index)
                    else:
                        walk(it.start) if it.start is not None else None
                        walk(it.stop) if it.stop is not None else None
            elif isinstance(e, ast.Vector):
                for i in e.items:
                    walk(i)

        if isinstance(d, (ast.LatentDecl, ast.ActionDecl)):
            walk(d.expr)
        if isinstance(d, ast.ActionDecl) and d.noise is not None:
            for a in d.noise.args:
                walk(a)
            for k in d.noise.kwargs:
                walk(k.value)
        return out

    def order(self) -> list[str]:
        """Latents and actions in dependency order; reports each cycle once."""
        computed = [n for n, k in self.kinds.items() if k in ("latent", "action")]
        deps = {n: [r.id for r in self.reads(self.decls[n]) if self.kinds.get(r.id) in ("latent", "action")]
                for n in computed}
        state: dict[str, int] = {}  # 1 = on the stack, 2 = done
        order: list[str] = []
        stack: list[str] = []

        def visit(n: str) -> None:
            state[n] = 1
            stack.append(n)
            for m in deps[n]:
                if state.get(m) == 1:
                    loop = stack[stack.index(m):]
                    if not any(x in self.poisoned for x in loop):
                        self.error(errors.cycle(self.decls[m].name_span, loop))
                    self.poisoned.update(loop)
                elif m not in state:
                    visit(m)
            stack.pop()
            state[n] = 2
            order.append(n)

        for n in computed:
            if n not in state:
                visit(n)
        return order

    # ---- expressions -------------------------------------------------------------------------

    def expr(self, e: ast.Expr) -> T.TExpr:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise ice(f"no type rule for {type(e).__name__}")
        x = method(e)
        if math.prod(x.type.shape) > MAX_ELEMENTS:
            self.fail(errors.too_large(e.span, x.type.shape, MAX_ELEMENTS))
        return x

    def expr_Number(self, e: ast.Number) -> T.TExpr:
        return T.Const(e.value, Type(REAL), e.span)

    def expr_BoolLit(self, e: ast.BoolLit) -> T.TExpr:
        return T.Const(e.value, Type(BOOL), e.span)

    def expr_Name(self, e: ast.Name) -> T.TExpr:
        kind = self.kinds.get(e.id)
        if kind is None:
            if self.prog_header is not None and e.id == self.prog_header.name:
                self.fail(errors.not_a_value(e.span, e.id, "policy"))
            if e.id in FUNCTIONS:
                self.fail(errors.not_a_value(e.span, e.id, "function"))
            self.fail(errors.undefined_name(e.span, e.id, self.kinds.keys()))
        if e.id in self.poisoned or e.id not in self.types:
            raise _Poison()
        return T.Ref(e.id, kind, self.types[e.id], e.span)

    def need(self, x: T.TExpr, base: str, what: str, hint: Optional[str] = None) -> None:
        if x.type.base != base:
            if hint is None and base == REAL:
                hint = "Turn a condition into a number with `if c then 1 else 0`."
            self.fail(errors.type_mismatch(x.span, what, f"{base}", str(x.type), hint))

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
            self.need(x, BOOL, "The operand of `not`", "Compare first, e.g. `not (x > 0)`.")
            return T.Unary("not", x, x.type, e.span)
        self.need(x, REAL, f"The operand of unary `{e.op}`")
        return x if e.op == "+" else T.Unary("neg", x, x.type, e.span)

    def expr_Binary(self, e: ast.Binary) -> T.TExpr:
        left, right = self.expr(e.left), self.expr(e.right)
        op = T.BINARY_OPS[e.op]
        if op in ("and", "or"):
            self.need(left, BOOL, f"The left operand of `{e.op}`", "Compare first, e.g. `x > 0 and y > 0`.")
            self.need(right, BOOL, f"The right operand of `{e.op}`", "Compare first, e.g. `x > 0 and y > 0`.")
            base = BOOL
        elif op in ("eq", "ne") and left.type.base == BOOL and right.type.base == BOOL:
            base = BOOL
        else:
            self.need(left, REAL, f"The left operand of `{e.op}`")
            self.need(right, REAL, f"The right operand of `{e.op}`")
            base = BOOL if op in ("eq", "ne", "lt", "le", "gt", "ge") else REAL
        shape = self.bshape(e.op_span, e.op, left, right)
        return T.Binary(op, left, right, Type(base, shape), e.span)

    def expr_IfElse(self, e: ast.IfElse) -> T.TExpr:
        return self.select(e.span, "if", self.expr(e.cond), self.expr(e.then), self.expr(e.orelse))

    def select(self, span: ast.Span, what: str, c: T.TExpr, a: T.TExpr, b: T.TExpr) -> T.TExpr:
        example = self.text(c.span) if len(self.text(c.span)) <= 30 else "x"
        self.need(c, BOOL, f"The condition of `{what}`", f"Write a comparison, e.g. `{example} > 0`.")
        if a.type.base != b.type.base:
            self.fail(errors.type_mismatch(b.span, f"Both branches of `{what}`", f"{a.type.base} like the first",
                                           str(b.type)))
        shape = self.bshape(span, what, c, a, b)
        return T.Select(c, a, b, Type(a.type.base, shape), span)

    def expr_Vector(self, e: ast.Vector) -> T.TExpr:
        if not e.items:
            self.fail(errors.empty_vector(e.span))
        items = tuple(self.expr(i) for i in e.items)
        for i in items[1:]:
            if i.type != items[0].type:
                self.fail(errors.ragged_vector(i.span, str(items[0].type), str(i.type)))
        t = items[0].type
        return T.Stack(items, Type(t.base, (len(items),) + t.shape), e.span)

    def expr_Subscript(self, e: ast.Subscript) -> T.TExpr:
        base = self.expr(e.base)
        shape = base.type.shape
        if len(e.items) > len(shape):
            self.fail(errors.too_many_indices(e.span, len(e.items), shape))
        items: list[Union[int, tuple[int, int]]] = []
        out: list[int] = []
        for axis, it in enumerate(e.items):
            size = shape[axis]
            if isinstance(it, ast.At):
                i = _int_literal(it.index)
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
                    j = _int_literal(bound)
                    if j is None:
                        self.fail(errors.index_not_constant(bound.span))
                    if not -size <= j <= size:
                        self.fail(errors.index_out_of_bounds(bound.span, j, size, axis))
                    ends.append(j + size if j < 0 else j)
                if ends[0] >= ends[1]:
                    self.fail(errors.empty_slice(it.span, ends[0], ends[1]))
                items.append((ends[0], ends[1]))
                out.append(ends[1] - ends[0])
        out += list(shape[len(e.items):])
        return T.Index(base, tuple(items), Type(base.type.base, tuple(out)), e.span)

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
        reducing = f in T.REDUCTIONS and (len(e.args) == 1 or f in ("sum", "mean", "norm"))
        kw = self.kwargs(e, ("axis",) if reducing else ())
        if reducing:
            self.arity(e, "1 argument (and optionally `axis = k`)", len(e.args) == 1)
            x = self.expr(e.args[0])
            self.need(x, REAL, f"The argument of `{f}`")
            axis = None
            shape: tuple[int, ...] = ()
            if "axis" in kw:
                axis = _int_literal(kw["axis"].value)
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
            self.need(args[0], REAL, f"The argument of `{f}`")
            return T.Apply(f, args, args[0].type, e.span)
        if f in T.BINARY_FUNCS:
            expected = "1 argument (a reduction) or 2 (elementwise)" if f in ("min", "max") else "2 arguments"
            self.arity(e, expected, len(args) == 2)
            for i, a in enumerate(args):
                self.need(a, REAL, f"Argument {i + 1} of `{f}`")
            return T.Apply(f, args, Type(REAL, self.bshape(e.span, f, *args)), e.span)
        if f == "clip":
            self.arity(e, "3 arguments (x, lo, hi)", len(args) == 3)
            for i, a in enumerate(args):
                self.need(a, REAL, f"Argument {i + 1} of `clip`")
            return T.Apply(f, args, Type(REAL, self.bshape(e.span, f, *args)), e.span)
        if f == "where":
            self.arity(e, "3 arguments (condition, then, else)", len(args) == 3)
            return self.select(e.span, "where", *args)
        raise ice(f"function {f} has no type rule")

    def call_mlp(self, e: ast.Call) -> T.TExpr:
        kw = self.kwargs(e, ("hidden", "out", "activation"))
        if not e.args:
            self.fail(errors.wrong_arity(e.span, "mlp", "at least 1 input", 0))
        inputs = tuple(self.expr(a) for a in e.args)
        for i, x in enumerate(inputs):
            self.need(x, REAL, f"Input {i + 1} of `mlp`")
        hidden: tuple[int, ...] = (64, 64)
        if "hidden" in kw:
            v = kw["hidden"].value
            sizes = [_int_literal(i) for i in v.items] if isinstance(v, ast.Vector) else [None]
            if not sizes or any(s is None or not 0 < s <= MAX_LAYER for s in sizes):
                self.fail(errors.bad_keyword_value(v.span, "mlp", "hidden",
                                                   f"a list of layer sizes from 1 to {MAX_LAYER}, like [64, 64]"))
            hidden = tuple(sizes)
        out = 0
        if "out" in kw:
            n = _int_literal(kw["out"].value)
            if n is None or not 0 < n <= MAX_LAYER:
                self.fail(errors.bad_keyword_value(kw["out"].value.span, "mlp", "out",
                                                   f"an integer from 1 to {MAX_LAYER}"))
            out = n
        activation = "tanh"
        if "activation" in kw:
            v = kw["activation"].value
            if not (isinstance(v, ast.Name) and v.id in T.ACTIVATIONS):
                self.fail(errors.bad_keyword_value(v.span, "mlp", "activation",
                                                   " or ".join(f"`{a}`" for a in T.ACTIVATIONS)))
            activation = v.id
        k = self._mlp_count.get(self._current, 0)
        self._mlp_count[self._current] = k + 1
        key = f"{self._current}.mlp" + (str(k) if k else "")
        return T.Mlp(key, inputs, hidden, out, activation, Type(REAL, (out,) if out else ()), e.span)

    # ---- latents and actions -------------------------------------------------------------------

    def check_node(self, name: str) -> None:
        d = self.decls[name]
        self._current = name
        self._mlp_count[name] = 0
        try:
            x = self.expr(d.expr)
            if isinstance(d, ast.LatentDecl):
                node = self.latent(d, x)
            else:
                node = self.action(d, x)
        except _Poison:
            self.poisoned.add(name)
            return
        self.types[name] = node.type
        self.typed_nodes[name] = node

    def latent(self, d: ast.LatentDecl, x: T.TExpr) -> T.Latent:
        if d.type is not None:
            want = self.decl_type(d.type)
            if want is None:
                raise _Poison()
            if want != x.type:
                self.fail(errors.declared_type_mismatch(d.expr.span, d.name, str(want), str(x.type)))
        return T.Latent(d.name, x.type, x, d.doc, d.span)

    def action(self, d: ast.ActionDecl, x: T.TExpr) -> T.Action:
        typ = self.real_io(d, "action")
        lo, hi = self.range_of(d.range, d.name, typ)
        if typ is None:
            raise _Poison()
        self.need(x, REAL, f'The expression of action "{d.name}"')
        if broadcast_shapes(x.type.shape, typ.shape) != typ.shape:
            self.fail(errors.declared_type_mismatch(d.expr.span, d.name, str(typ), str(x.type)))
        std = None
        if d.noise is not None:
            std = self.noise(d, typ)
        return T.Action(d.name, typ, lo, hi, x, std, d.doc, d.span)

    def noise(self, d: ast.ActionDecl, typ: Type) -> T.TExpr:
        n = d.noise
        if n.dist != "normal":
            self.fail(errors.bad_noise_dist(n.dist_span, n.dist))
        fake = ast.Call("normal", n.args, n.kwargs, n.span, n.dist_span)
        kw = self.kwargs(fake, ("std",))
        given = list(n.args) + [k.value for k in kw.values()]
        if len(given) != 1:
            self.fail(errors.wrong_arity(n.span, "normal", "one argument, `std = EXPR`", len(given)))
        std = self.expr(given[0])
        self.need(std, REAL, f'The noise std of action "{d.name}"')
        if broadcast_shapes(std.type.shape, typ.shape) != typ.shape:
            want = "a scalar" if not typ.shape else f"of shape {errors.fmt_shape(typ.shape)} or broadcast to it"
            self.fail(errors.type_mismatch(std.span, f'The noise std of action "{d.name}"', want, str(std.type),
                                           "Give one std for the whole action, or one per element." if typ.shape else
                                           "A scalar action has one std: index or reduce it, e.g. `x[0]` or `mean(x)`."))
        return std

    # ---- intents ---------------------------------------------------------------------------------

    def intent(self, d: ast.ExpectDecl) -> Optional[T.Intent]:
        c = d.claim
        target = c.target
        kind = self.kinds.get(target.id)
        if kind is None:
            self.error(errors.undefined_name(target.span, target.id, self.kinds.keys()))
            return None
        if kind not in ("latent", "action"):
            self.error(errors.bad_expect_target(target.span, target.id, f"an {kind}" if kind == "obs" else f"a {kind}"))
            return None
        if target.id in self.poisoned or target.id not in self.typed_nodes:
            return None
        text = " ".join(self.text(c.span).split())  # as written, one space between words
        if isinstance(c, ast.MonoClaim):
            vkind = self.kinds.get(c.var.id)
            if vkind is None:
                self.error(errors.undefined_name(c.var.span, c.var.id, self.kinds.keys()))
                return None
            if c.var.id not in self.ancestors(target.id):
                self.warnings.append(errors.mono_unrelated(c.span, target.id, c.var.id))
                return None
            return T.MonoIntent(target.id, c.direction, c.var.id, text, c.span)
        if self.typed_nodes[target.id].type.base != REAL:
            self.error(errors.range_on_bool(target.span, target.id))
            return None
        lo = c.lo.value if c.lo is not None else -math.inf
        hi = c.hi.value if c.hi is not None else math.inf
        if c.op == "in" and not lo < hi:
            self.error(errors.empty_range(c.span, lo, hi))
            return None
        return T.RangeIntent(target.id, lo, hi, c.op == ">", c.op == "<", text, c.span)

    def direct_reads(self, name: str) -> set[str]:
        """Names a latent or action reads directly (its noise std included); cached."""
        if name not in self._reads:
            node = self.typed_nodes.get(name)
            read: set[str] = set()
            if node is not None:
                read = T.refs(node.expr) | (T.refs(node.std) if isinstance(node, T.Action) and node.std else set())
            self._reads[name] = read
        return self._reads[name]

    def ancestors(self, *names: str) -> set[str]:
        """Everything the given nodes are computed from, transitively: one traversal for all of them."""
        seen: set[str] = set()
        todo = list(names)
        while todo:
            for r in self.direct_reads(todo.pop()) - seen:
                seen.add(r)
                todo.append(r)
        return seen

    # ---- whole program ---------------------------------------------------------------------------

    def unused(self, intents: Sequence[T.Intent]) -> None:
        used = self.ancestors(*(n for n, node in self.typed_nodes.items() if isinstance(node, T.Action)))
        mentioned: set[str] = set()
        for name in self.typed_nodes:
            mentioned |= self.direct_reads(name)
        for i in intents:
            mentioned |= {i.target} | ({i.var} if isinstance(i, T.MonoIntent) else set())
        for name, kind in self.kinds.items():
            if kind in ("obs", "weight") and name not in used and name in self.types:
                self.warnings.append(errors.unused(self.decls[name].name_span, kind, name))
            elif kind == "latent" and name not in used and name not in mentioned and name in self.typed_nodes:
                self.warnings.append(errors.unused(self.decls[name].name_span, kind, name))

    def run(self) -> T.TypedProgram:
        self.prog_header = self.collect()
        obs = [o for o in (self.check_obs(d) for d in self.decls.values() if isinstance(d, ast.ObsDecl)) if o]
        weights = [w for w in (self.check_weight(d) for d in self.decls.values()
                               if isinstance(d, ast.WeightDecl)) if w]
        for d in self.decls.values():  # a weight that failed still has a type for its readers
            if isinstance(d, ast.WeightDecl) and d.name not in self.types:
                t = Type(d.type.base, tuple(d.type.dims))
                if all(n > 0 for n in d.type.dims) and math.prod(d.type.dims) <= MAX_ELEMENTS:
                    self.types[d.name] = t
        order = self.order()
        for name in order:
            if name not in self.poisoned:
                self.check_node(name)
        intents = [i for i in (self.intent(d) for d in self.prog.decls if isinstance(d, ast.ExpectDecl)) if i]
        if not any(k == "action" for k in self.kinds.values()):
            self.error(errors.no_actions(self.prog.decls[0].span if self.prog.decls else None))
        if self.errors:
            raise PolError(sorted(self.errors, key=_position), self.prog.text)
        self.unused(intents)
        nodes = tuple(self.typed_nodes[n] for n in order if n in self.typed_nodes)
        header = self.prog_header
        return T.TypedProgram(
            name=header.name if header else _stem(self.prog.file),
            doc=header.doc if header else None,
            obs=tuple(obs),
            weights=tuple(weights),
            latents=tuple(self.typed_nodes[n] for n in self.decls if self.kinds[n] == "latent"),
            actions=tuple(self.typed_nodes[n] for n in self.decls if self.kinds[n] == "action"),
            intents=tuple(intents),
            nodes=nodes,
            # Every learned block, those inside a noise std included.
            mlps=tuple(m for n in nodes for e in (n.expr, getattr(n, "std", None)) if e is not None
                       for m in T.mlps_in(e)),
            file=self.prog.file,
            source=self.prog.text,
        )


def _position(d: Diagnostic) -> tuple:
    s = d.span
    return (0, 0) if s is None else (s.line, s.column)


def _stem(path: str) -> str:
    import os

    return os.path.splitext(os.path.basename(path))[0] or "policy"


def check_program(prog: ast.Program) -> tuple[T.TypedProgram, list[Diagnostic]]:
    """Check a parsed program. Returns the typed program and its warnings;
    raises `PolError` carrying every error (sorted by position)."""
    checker = _Checker(prog)
    tp = checker.run()
    return tp, sorted(checker.warnings, key=_position)

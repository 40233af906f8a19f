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

from ..frontend import ast
from .. import errors
from . import priors, typed as T
from ..messages import Diagnostic, PolError, ice
from ..util.text import bounds
from .typed import BOOL, REAL, Type
from .expr import MAX_ELEMENTS, ExprChecker, _Poison, broadcast_shapes, const_names, fold
from ._consts import ConstChecker
from ._elements import element_bounds

def _const_value(e: ast.Expr, consts: Optional[dict[str, float]] = None) -> Optional[Union[float, tuple]]:
    """A weight's initial value or a prior's argument: a number or a (nested) vector literal of
    numbers; with `consts`, numbers may be constant expressions (`2 * k0`, of `const` names)."""
    sign = 1.0
    inner = e
    while isinstance(inner, ast.Unary) and inner.op in "-+":
        sign = -sign if inner.op == "-" else sign
        inner = inner.operand
    if isinstance(inner, ast.Number):
        return sign * inner.value
    if isinstance(inner, ast.Vector) and sign == 1.0 and inner.items:
        items = [_const_value(i, consts) for i in inner.items]
        if any(i is None for i in items):
            return None
        return tuple(items)
    if consts and const_names(e) and all(n.id in consts for n in const_names(e)):
        return fold(e, consts)
    return None


def _bool_value(e: ast.Expr) -> Optional[Union[bool, tuple]]:
    """A bool state's initial value: `true`, `false`, or a (nested) vector literal of them."""
    if isinstance(e, ast.BoolLit):
        return e.value
    if isinstance(e, ast.Vector) and e.items:
        items = [_bool_value(i) for i in e.items]
        return None if any(i is None for i in items) else tuple(items)
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




class _Checker(ExprChecker, ConstChecker):
    def __init__(self, prog: ast.Program):
        super().__init__(prog)  # the shared tables (`_state.CheckerState`)
        self._reads: dict[str, set[str]] = {}
        self._descendants: dict[str, set[str]] = {}  # var -> the nodes computed from it (intents' W0110)

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
            kind = _KIND[type(d)]
            if d.name in self.decls:
                first = self.decls[d.name]
                if self.kinds[d.name] == kind:
                    self.error(errors.duplicate_name(d.name_span, d.name, first.name_span))
                else:
                    self.error(errors.name_taken(d.name_span, d.name, kind, self.kinds[d.name], first.name_span,
                                                 self.free_name(d.name, kind)))
                continue
            self.decls[d.name] = d
            self.kinds[d.name] = kind
        return header

    def free_name(self, name: str, kind: str) -> str:
        """A name no declaration of the program has, for a rename suggestion: `speed_latent`, ..."""
        taken = {getattr(d, "name", None) for d in self.prog.decls}
        base = f"{name}_{kind}"
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}{n}", n + 1
        return candidate

    def decl_type(self, spec: ast.TypeSpec) -> Optional[Type]:
        dims = self.dims(spec)
        if dims is None:
            return None
        if any(n <= 0 for n in dims):
            self.error(errors.bad_dims(spec.span, dims))
            return None
        if math.prod(dims) > MAX_ELEMENTS:
            self.error(errors.too_large(spec.span, dims, MAX_ELEMENTS))
            return None
        return Type(spec.base, dims)

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
        bounds = None
        if d.parts:
            bounds = element_bounds(self, d, typ, lo, hi)
            if bounds is None:
                return None
            lo, hi = min(bounds[0]), max(bounds[1])
        return T.Obs(d.name, typ, lo, hi, d.doc, d.span, bounds)

    def check_weight(self, d: ast.WeightDecl) -> Optional[T.Weight]:
        typ = self.real_io(d, "weight")
        lo, hi = self.range_of(d.range, d.name, typ)
        if typ is None:
            return None
        self.types[d.name] = typ
        value = _const_value(d.init, self.used_consts(d.init))
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
                self.error(errors.init_outside(d.init.span, d.name, x, bounds(lo, hi),
                                               _inside(x, lo, hi)))
                return None
        prior = self.prior(d, lo, hi, _flat(value)) if d.prior is not None else None
        return T.Weight(d.name, typ, lo, hi, value, d.doc, d.span, prior)

    def prior(self, d: ast.WeightDecl, lo: float, hi: float, init: list[float]) -> Optional[T.Prior]:
        """The weight's `~ family(args)`: a known family, numeric arguments, positive
        scales, and a support that holds the initial value and every allowed value."""
        p = d.prior
        family = priors.FAMILIES.get(p.dist)
        if family is None:
            self.error(errors.unknown_prior(p.dist_span, p.dist, list(priors.FAMILIES)))
            return None
        given: dict[str, ast.Expr] = dict(zip(family.params, p.args))
        for k in p.kwargs:
            if k.name not in family.params:
                self.error(errors.unknown_keyword(k.name_span, p.dist, k.name, family.params))
                return None
            if k.name in given:
                self.error(errors.duplicate_keyword(k.name_span, p.dist, k.name))
                return None
            given[k.name] = k.value
        if len(p.args) > len(family.params) or len(given) != len(family.params):
            self.error(errors.wrong_arity(p.span, p.dist, errors.prior_arguments(family.params),
                                          len(p.args) + len(p.kwargs), errors.write_it_like(family.example)))
            return None
        args = []
        for name in family.params:
            v = _const_value(given[name], self.used_consts(given[name]))
            if not isinstance(v, float) or not math.isfinite(v):
                self.error(errors.prior_not_constant(given[name].span, p.dist, name))
                return None
            if name in family.scales and v <= 0:
                self.error(errors.prior_scale_not_positive(given[name].span, p.dist, name, v))
                return None
            args.append(v)
        support = priors.support_text(p.dist)
        # A constraint wholly outside the support is the constraint's fault (no start can
        # fix it); else a start outside the support is named before the looser constraint.
        outside = [x for x in init if not priors.in_support(p.dist, x)]
        if outside and hi > family.support_lo:
            self.error(errors.init_outside_prior(d.init.span, d.name, outside[0], p.dist, support,
                                                 errors.prior_suggestion(d.name, hi)))
            return None
        if not priors.covers(p.dist, lo):
            self.error(errors.prior_support(p.span, d.name, p.dist, support,
                                            "unconstrained" if lo == -math.inf and hi == math.inf
                                            else "constrained " + bounds(lo, hi), errors.prior_suggestion(d.name, hi)))
            return None
        return T.Prior(p.dist, tuple(args), p.span)

    # ---- states --------------------------------------------------------------------------------

    def state_header(self, d: ast.StateDecl) -> Optional[tuple[Type, float, float, Union[float, bool, tuple]]]:
        """A state's type, range and initial value (a constant of its type and shape, finite, inside
        the range); its type is known to its readers from here on, whatever its `next` says."""
        typ = self.decl_type(d.type)
        lo, hi = self.range_of(d.range, d.name, typ)
        if typ is None:
            return None
        self.types[d.name] = typ
        if typ.base == BOOL:
            value = _bool_value(d.init)
            if value is None:
                if _const_value(d.init, self.used_consts(d.init)) is not None:
                    self.error(errors.state_init_invalid(d.init.span, d.name, "is a number, but the state is bool",
                                                         "Start a bool state from `true` or `false`."))
                else:
                    self.error(errors.state_init_not_constant(d.init.span, d.name))
                return None
        else:
            if _bool_value(d.init) is not None:
                self.error(errors.state_init_invalid(d.init.span, d.name, "is bool, but the state is real",
                                                     "Start a real state from a number, e.g. `= 0`."))
                return None
            value = _const_value(d.init, self.used_consts(d.init))
            if value is None:
                self.error(errors.state_init_not_constant(d.init.span, d.name))
                return None
        shape = _shape_of(value)
        if shape is None:
            span, first, other = _ragged(d.init)
            self.error(errors.ragged_vector(span, str(Type(typ.base, first)), str(Type(typ.base, other)), d.name))
            return None
        if shape == () and typ.shape:
            value = _fill(typ.shape, value)
        elif shape != typ.shape:
            self.error(errors.state_init_invalid(d.init.span, d.name, *errors.state_init_shape_phrase(shape, typ.shape)))
            return None
        if typ.base == REAL:
            for x in _flat(value):
                if not math.isfinite(x):
                    self.error(errors.state_init_invalid(d.init.span, d.name, *errors.state_init_not_finite_phrase()))
                    return None
                if not lo <= x <= hi:
                    self.error(errors.state_init_invalid(d.init.span, d.name, *errors.state_init_outside_phrase(x, lo, hi)))
                    return None
        return typ, lo, hi, value

    def check_state(self, d: ast.StateDecl, header) -> None:
        """The `next` expression of a state whose header checked: its type against the declaration."""
        typ, lo, hi, value = header
        self._current = d.name
        self._mlp_count[d.name] = 0
        try:
            x = self.expr(d.update)
            if x.type.base != typ.base or broadcast_shapes(x.type.shape, typ.shape) != typ.shape:
                self.fail(errors.state_update_type(d.update.span, d.name, str(typ), str(x.type)))
        except _Poison:
            self.poisoned.add(d.name)
            return
        self.typed_states[d.name] = T.State(d.name, typ, lo, hi, value, x, d.doc, d.span)

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

        # Iterative depth-first search: a chain of latents may be longer than Python's stack.
        for root in computed:
            if root in state:
                continue
            state[root] = 1
            stack.append(root)
            todo = [(root, iter(deps[root]))]
            while todo:
                n, it = todo[-1]
                for m in it:
                    if state.get(m) == 1:
                        loop = stack[stack.index(m):]
                        if not any(x in self.poisoned for x in loop):
                            # Suggest delaying an action of the loop (the previous action) if it has one.
                            at = next((i for i, x in enumerate(loop) if self.kinds[x] == "action"), 1 % len(loop))
                            self.error(errors.cycle(self.decls[m].name_span, loop, loop[at], loop[at - 1]))
                        self.poisoned.update(loop)
                    elif m not in state:
                        state[m] = 1
                        stack.append(m)
                        todo.append((m, iter(deps[m])))
                        break
                else:
                    todo.pop()
                    stack.pop()
                    state[n] = 2
                    order.append(n)
        return order

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
        self.need(x, REAL, errors.action_expression(d.name))
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
        self.need(std, REAL, errors.noise_std_of(d.name))
        if broadcast_shapes(std.type.shape, typ.shape) != typ.shape:
            self.fail(errors.type_mismatch(std.span, errors.noise_std_of(d.name), errors.std_shape(typ.shape),
                                           str(std.type), errors.std_shape_hint(typ.shape)))
        return std

    # ---- intents ---------------------------------------------------------------------------------

    def intent(self, d: ast.ExpectDecl) -> Optional[T.Intent]:
        c = d.claim
        target = c.target
        kind = self.kinds.get(target.id)
        if kind is None:
            self.error(errors.undefined_name(target.span, target.id, self.kinds, prefer=("latent", "action")))
            return None
        # A state's range may be claimed too (the fixpoint proves it); a direction within one step may not:
        # a state does not change with anything during the step.
        if kind not in ("latent", "action") and not (kind == "state" and isinstance(c, ast.RangeClaim)):
            self.error(errors.bad_expect_target(target.span, target.id, errors.a_kind(kind)))
            return None
        if target.id in self.poisoned or (target.id not in self.typed_nodes and target.id not in self.typed_states):
            return None
        text = " ".join(self.text(c.span).split())  # as written, one space between words
        if isinstance(c, ast.MonoClaim):
            vkind = self.kinds.get(c.var.id)
            if vkind is None:
                self.error(errors.undefined_name(c.var.span, c.var.id, self.kinds, prefer=("obs", "weight")))
                return None
            if target.id not in self.descendants(c.var.id):
                self.warnings.append(errors.mono_unrelated(c.span, target.id, c.var.id))
                return None
            return T.MonoIntent(target.id, c.direction, c.var.id, text, c.span)
        if (self.typed_nodes.get(target.id) or self.typed_states[target.id]).type.base != REAL:
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
            if name in self.typed_states:  # a state is computed (one step late) from its `next`
                read = T.refs(self.typed_states[name].update)
            elif node is not None:
                read = T.refs(node.expr) | (T.refs(node.std) if isinstance(node, T.Action) and node.std else set())
            self._reads[name] = read
        return self._reads[name]

    def descendants(self, name: str) -> set[str]:
        """The nodes computed from `name`, transitively; one traversal per name, cached, so
        checking every intent costs one pass per distinct variable, not one per intent."""
        if name not in self._descendants:
            readers: dict[str, list[str]] = {}
            for node in (*self.typed_nodes, *self.typed_states):
                for r in self.direct_reads(node):
                    readers.setdefault(r, []).append(node)
            seen: set[str] = set()
            todo = [name]
            while todo:
                for r in readers.get(todo.pop(), ()):
                    if r not in seen:
                        seen.add(r)
                        todo.append(r)
            self._descendants[name] = seen
        return self._descendants[name]

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
            elif kind == "state" and name not in used and name not in mentioned and name in self.typed_states:
                self.warnings.append(errors.unused(self.decls[name].name_span, kind, name))
            elif kind == "const" and name not in self.const_used and name in self.consts:
                self.warnings.append(errors.unused(self.decls[name].name_span, "constant", name))

    def run(self) -> T.TypedProgram:
        self.prog_header = self.collect()
        consts = self.check_consts()
        obs = [o for o in (self.check_obs(d) for d in self.decls.values() if isinstance(d, ast.ObsDecl)) if o]
        weights = [w for w in (self.check_weight(d) for d in self.decls.values()
                               if isinstance(d, ast.WeightDecl)) if w]
        for d in self.decls.values():  # a weight that failed still has a type for its readers
            if isinstance(d, ast.WeightDecl) and d.name not in self.types:
                dims = self.dims(d.type, report=False)
                if dims is not None and all(n > 0 for n in dims) and math.prod(dims) <= MAX_ELEMENTS:
                    self.types[d.name] = Type(d.type.base, dims)
        headers = {d.name: self.state_header(d) for d in self.decls.values() if isinstance(d, ast.StateDecl)}
        order = self.order()
        for name in order:
            if name not in self.poisoned:
                self.check_node(name)
        for name, header in headers.items():
            if header is not None:
                self.check_state(self.decls[name], header)
        intents = [i for i in (self.intent(d) for d in self.prog.decls if isinstance(d, ast.ExpectDecl)) if i]
        if not any(k == "action" for k in self.kinds.values()):
            self.error(errors.no_actions(self.prog.decls[0].span if self.prog.decls
                                             else ast.Span(self.prog.file, 1, 1, 1, 2)))
        if self.errors:  # with the warnings found so far (unused names are not: an error hides uses)
            raise PolError(sorted(self.errors + self.warnings, key=_position), self.prog.text)
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
            consts=tuple(consts),
            states=tuple(self.typed_states[n] for n in self.decls if n in self.typed_states),
        )


_KIND = {ast.ObsDecl: "obs", ast.WeightDecl: "weight", ast.LatentDecl: "latent", ast.ActionDecl: "action",
         ast.ConstDecl: "const", ast.StateDecl: "state"}


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


__all__ = ["check_program"]

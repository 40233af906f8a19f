"""The abstract interpreter behind `analyze`: intervals, signs and directions.

One pass walks the typed program in dataflow order and gives every value an
`Abs`: its `Interval` (elementwise) and, when a target variable is named, its
direction of change in that variable: constant, increasing, decreasing or
unknown (non-strict: "increasing" means never falls as the variable rises).
The rules are the sign rules of disciplined convex programming: a product
keeps a factor's direction when the other factor is constant in the variable
and of known sign; an increasing function keeps its argument's direction;
`abs`, `square` and `norm` need the argument's sign; an mlp's is unknown
(the algebra of directions itself is `directions.py`).

The variable is a free input: its node's value is cut loose from what it is
computed from, so "target decreasing in slip" is about target as a function
of slip with every other input held fixed. With `report=True` the pass also
collects the analysis warnings and errors (division by zero, log, sqrt and
power domains, action ranges, noise stds) with the span of the offending node.

Passes are cheap to repeat: each remembers what it computed for every
expression node (`Pass.memo`), and `run_cone` redoes only the part of a
program that a question about one target needs (the target's cone,
downstream of the variable or of a restricted weight), reusing a base pass's
result for every other expression. Reasons for a lost direction are written
out only when a direction is actually lost.
"""

from __future__ import annotations

import math
from collections import ChainMap
from typing import Iterable, Mapping, MutableMapping, Optional, Sequence, Union

from .. import errors
from ..util import floats as F
from . import intervals as I
from ..check import typed as T
from .deps import Deps
from ..messages import Diagnostic, ice, source_lines
from ._directions import (CONST, DEC, INC, UNKNOWN, Abs, Reason, combine, flip, flipped, scaled, still,
                         trig_direction)
from .intervals import Interval
from ._rational import quotient_direction

Env = MutableMapping[str, Abs]

_ARITH = {"add": I.add, "sub": I.sub, "mul": I.mul, "pow": I.power}


_F32_MAX = 3.4028234663852886e38  # numpy.finfo(numpy.float32).max
_F32_TINY = 1.1754943508222875e-38  # numpy.finfo(numpy.float32).tiny: the smallest normal number


class _Narrowed(ChainMap):
    """The environment inside a branch of a selection, with the names its condition narrows.

    `ctx` tells branches apart for the memo (an expression's value depends on
    the branches it sits in); `dirty` says the condition reads something the
    pass changed from its base pass, so nothing inside may be reused from it."""

    def __init__(self, parent: Mapping[str, Abs], ctx: tuple, dirty: bool):
        super().__init__({}, parent)  # type: ignore[arg-type]
        self.ctx = ctx
        self.dirty = dirty


class Pass:
    """One abstract run over a program.

    bounds: the interval of every obs and weight (broadcast to its shape);
    var: the name the directions are taken in (None: every value is constant);
    report: collect diagnostics into `self.diagnostics`;
    base, changed: a finished pass of the same program whose results are
    reused for every expression that reads none of the names in `changed`
    (see `run_cone`).

    `memo` maps each expression node evaluated (by identity, and by the
    branches it sits in) to its result; `evaluated` counts the expression
    nodes this pass actually computed, the measure of its work."""

    def __init__(self, tp: T.TypedProgram, bounds: Mapping[str, Interval], var: Optional[str] = None,
                 report: bool = False, base: Optional["Pass"] = None, changed: Iterable[str] = ()):
        self.tp = tp
        self.bounds = bounds
        self.var = var
        self.report = report
        self.base = base
        self.changed = frozenset(changed)
        self._lines: Optional[list[str]] = None
        self._deps: Optional[Deps] = base.deps if base is not None else None
        self.env: Env = {}
        self.means: dict[str, Abs] = {}
        self.stds: dict[str, Abs] = {}
        self.diagnostics: list[Diagnostic] = []
        self.f32_reported: set[int] = set()  # ids of nodes whose float32 overflow is already reported
        self.memo: dict[object, tuple[Abs, bool]] = {}
        self.evaluated = 0

    # ---- helpers ---------------------------------------------------------------------

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = source_lines(self.tp.source)  # numbered as the parser numbers them
        return self._lines

    @property
    def deps(self) -> Deps:
        """The program's dependency graph, built on first use and shared with passes based on this one."""
        if self._deps is None:
            self._deps = Deps(self.tp)
        return self._deps

    def text(self, e: T.TExpr, limit: int = 40) -> str:
        """The source text of an expression, on one line, shortened."""
        s = e.span
        try:
            if s.line == s.end_line:
                out = self.lines[s.line - 1][s.column - 1: s.end_column - 1]
            else:
                parts = [self.lines[s.line - 1][s.column - 1:], *self.lines[s.line: s.end_line - 1],
                         self.lines[s.end_line - 1][: s.end_column - 1]]
                out = " ".join(p.strip() for p in parts)
        except IndexError:
            out = ""
        out = " ".join(out.split()) or type(e).__name__.lower()
        return out if len(out) <= limit else out[: limit - 3] + "..."

    def emit(self, d: Diagnostic) -> None:
        if self.report:
            self.diagnostics.append(d)

    # ---- the program -------------------------------------------------------------------

    def run(self) -> "Pass":
        for decl in (*self.tp.obs, *self.tp.weights, *self.tp.states):
            self.input(decl)
        for node in self.tp.nodes:
            self.node(node)
        return self

    def input(self, decl: T.Obs | T.Weight | T.State) -> None:
        iv = self.bounds[decl.name].broadcast_to(decl.type.shape)
        self.env[decl.name] = Abs(iv, INC if decl.name == self.var else CONST)

    def node(self, node: T.Latent | T.Action) -> None:
        if isinstance(node, T.Action):
            value = self.action(node)
        else:
            value = self.expr(node.expr, self.env)
        if node.name == self.var:  # the cut: a free input ranging over its own interval
            value = Abs(value.iv, INC)
        self.env[node.name] = value

    def action(self, a: T.Action) -> Abs:
        mean = self.expr(a.expr, self.env)
        mean = Abs(mean.iv.broadcast_to(F.broadcast_shapes(mean.iv.shape, a.type.shape)), mean.dir, mean.why)
        self.means[a.name] = mean
        clipped = I.clip(mean.iv, Interval.point(a.lo), Interval.point(a.hi))
        is_clip = isinstance(a.expr, T.Apply) and a.expr.fn == "clip"
        if self.report and not mean.iv.within(a.lo, a.hi) and not is_clip:
            self.emit(errors.action_range_exceeded(a.expr.span, a.name, str(mean.iv),
                                                   str(Interval(a.lo, a.hi))))
        if a.std is not None:
            std = self.expr(a.std, self.env)
            self.stds[a.name] = std
            if self.report and not std.iv.positive():
                self.emit(errors.std_not_positive(a.std.span, a.name, str(std.iv)))
        return Abs(clipped, mean.dir, mean.why)

    # ---- expressions --------------------------------------------------------------------

    def expr(self, e: T.TExpr, env: Mapping[str, Abs]) -> Abs:
        """What is known about `e` in `env`: remembered, reused from the base pass, or computed."""
        if type(e) is T.Ref:
            return env[e.name]
        if type(env) is _Narrowed:
            key: object = (id(e), env.ctx)
            dirty = env.dirty
        else:
            key, dirty = id(e), False
        hit = self.memo.get(key)
        if hit is not None and (hit[1] or not self.report):  # a reporting pass reports every node once
            return hit[0]
        if self.base is not None and not dirty and not self.report and self.deps.refs(e).isdisjoint(self.changed):
            got = self.base.memo.get(key)
            if got is not None:
                return got[0]
        self.evaluated += 1
        out = self.evaluate(e, env)
        self.memo[key] = (out, self.report)
        if self.report:
            self.float32_check(e, out)
        return out

    def float32_check(self, e: T.TExpr, out: Abs) -> None:
        """Policies run in float32: a constant or a bounded result past its largest finite value
        is inf there (and then NaN); a constant below its smallest normal number is 0 or a
        subnormal, so dividing by it overflows. An unbounded input's infinite interval is not
        reported: only what the declared ranges themselves make overflow."""
        reported = self.f32_reported  # one warning per overflowing chain
        if isinstance(e, T.Const):
            if isinstance(e.value, bool):
                return
            v = F.asfloats(e.value)
            v = [abs(x) for x in ((v,) if type(v) is float else v.flat)]
            if any(_F32_MAX < x < math.inf for x in v):
                self.emit(errors.float32_range(e.span, self.text(e), "is beyond float32's largest value, so it is inf"))
            elif any(0 < x < _F32_TINY for x in v):
                self.emit(errors.float32_range(e.span, self.text(e), "is below float32's smallest normal number, "
                                                                  "so it is 0 or a subnormal"))
            else:
                return
            reported.add(id(e))
            return
        if e.type.base == T.BOOL or not isinstance(e, (T.Binary, T.Unary, T.Apply, T.Reduce)):
            return
        children = [getattr(e, a, None) for a in ("l", "r", "x")] + list(getattr(e, "args", ()))
        if any(id(c) in reported for c in children if c is not None):
            reported.add(id(e))
            return
        lo, hi = out.iv.flat_ends()
        if any(-math.inf < x < -_F32_MAX for x in lo) or any(_F32_MAX < x < math.inf for x in hi):
            self.emit(errors.float32_range(e.span, self.text(e), f"may reach {out.iv}, beyond float32's "
                                                              "largest value, so it overflows to inf"))
            reported.add(id(e))

    def evaluate(self, e: T.TExpr, env: Mapping[str, Abs]) -> Abs:
        """The rule for one node (its operands through `expr`)."""
        if isinstance(e, T.Const):
            v = e.value
            return Abs(Interval.point(float(v) if isinstance(v, (int, float)) else v))
        if isinstance(e, T.Ref):
            return env[e.name]
        if isinstance(e, T.Unary):
            x = self.expr(e.x, env)
            iv = I.neg(x.iv) if e.op == "neg" else I.logic("not", x.iv)
            return Abs(iv, flip(x.dir), x.why)
        if isinstance(e, T.Binary):
            return self.binary(e, self.expr(e.l, env), self.expr(e.r, env), env)
        if isinstance(e, T.Select):
            return self.select(e, env)
        if isinstance(e, T.Apply):
            return self.apply(e, [self.expr(a, env) for a in e.args])
        if isinstance(e, T.Reduce):
            x = self.expr(e.x, env)
            iv = I.reduce(e.fn, x.iv, e.axis)
            if e.fn == "norm" and x.dir != CONST:
                return Abs(iv, *scaled(x, x.iv, lambda: f"`{self.text(e)}` is not monotone where its argument "
                                                        f"changes sign"))
            return Abs(iv, x.dir, x.why)
        if isinstance(e, T.Index):
            x = self.expr(e.x, env)
            return Abs(I.index(x.iv, e.items), x.dir, x.why)
        if isinstance(e, T.Stack):
            items = [self.expr(i, env) for i in e.items]
            iv = I.stack([i.iv for i in items])
            if still(*items):
                return Abs(iv)
            conflict = lambda: f"the items of `{self.text(e)}` move in opposite directions"  # noqa: E731
            return Abs(iv, *combine([(i.dir, i.why) for i in items], conflict))
        if isinstance(e, T.Mlp):
            items = [self.expr(i, env) for i in e.inputs]
            moving = [i for i in items if i.dir != CONST]
            why = (f"it passes through `{self.text(e)}`, a learned function with no declared direction"
                   if moving else None)
            return Abs(Interval.everything(e.type.shape), UNKNOWN if moving else CONST, why)
        raise ice(f"analysis: no rule for {type(e).__name__}")

    def binary(self, e: T.Binary, l: Abs, r: Abs, env: Mapping[str, Abs]) -> Abs:
        op = e.op
        if op == "pow" and self.report and I.power_may_be_nan(l.iv, r.iv):
            self.emit(errors.power_domain(e.l.span, str(l.iv)))
        if l.dir == CONST and r.dir == CONST:
            return Abs(self.binary_interval(e, l, r))
        if op == "add":
            return Abs(I.add(l.iv, r.iv), *combine([(l.dir, l.why), (r.dir, r.why)], self.opposed(e)))
        if op == "sub":
            return Abs(I.sub(l.iv, r.iv), *combine([(l.dir, l.why), flipped(r)], self.opposed(e)))
        if op == "mul":
            return Abs(I.mul(l.iv, r.iv), *self.product(e, l, r))
        if op == "div":
            return Abs(self.binary_interval(e, l, r), *self.quotient(e, l, r, env))
        if op == "pow":
            return Abs(I.power(l.iv, r.iv), *self.power(e, l, r))
        if op in ("lt", "le"):  # true grows as l falls or r rises
            return Abs(I.compare(op, l.iv, r.iv), *combine([flipped(l), (r.dir, r.why)], self.opposed(e)))
        if op in ("gt", "ge"):
            return Abs(I.compare(op, l.iv, r.iv), *combine([(l.dir, l.why), flipped(r)], self.opposed(e)))
        if op in ("eq", "ne"):
            parts = combine([(l.dir, l.why), (r.dir, r.why)], "")
            d = CONST if parts[0] == CONST else UNKNOWN
            why = parts[1] if parts[0] == UNKNOWN else f"the equality test `{self.text(e)}` is not monotone"
            return Abs(I.compare(op, l.iv, r.iv), d, None if d == CONST else why)
        if op in ("and", "or"):
            return Abs(I.logic(op, l.iv, r.iv), *combine([(l.dir, l.why), (r.dir, r.why)], self.opposed(e)))
        raise ice(f"analysis: unknown operator {op}")

    def binary_interval(self, e: T.Binary, l: Abs, r: Abs) -> Interval:
        """The interval of `l op r` (and the division-by-zero warning)."""
        op = e.op
        if op == "div":
            iv, maybe_zero = I.div(l.iv, r.iv)
            if maybe_zero and self.report:
                self.emit(errors.division_by_zero(e.r.span, str(r.iv)))
            return iv
        if op in _ARITH:
            return _ARITH[op](l.iv, r.iv)
        if op in ("and", "or"):
            return I.logic(op, l.iv, r.iv)
        if op in ("eq", "ne", "lt", "le", "gt", "ge"):
            return I.compare(op, l.iv, r.iv)
        raise ice(f"analysis: unknown operator {op}")

    def opposed(self, e: T.TExpr) -> Reason:
        return lambda: f"the two sides of `{self.text(e)}` move in opposite directions"

    def sign_unknown(self, factor: T.TExpr, iv: Interval) -> Reason:
        return lambda: f"the sign of `{self.text(factor)}` is not fixed (it lies in {iv})"

    def product(self, e: T.Binary, l: Abs, r: Abs) -> tuple[str, Optional[str]]:
        # (l r)(x2) - (l r)(x1) = (l2 - l1) r2 + l1 (r2 - r1): each term signed by
        # one factor's direction times the other factor's sign.
        return combine([scaled(l, r.iv, self.sign_unknown(e.r, r.iv)),
                        scaled(r, l.iv, self.sign_unknown(e.l, l.iv))], self.opposed(e))

    def quotient(self, e: T.Binary, l: Abs, r: Abs, env: Mapping[str, Abs]) -> tuple[str, Optional[str]]:
        found = self.quotient_by_sides(e, l, r)
        if found[0] == UNKNOWN and l.dir != CONST and r.dir != CONST and not r.iv.contains_zero():
            # Both sides move: a rational form `(a + m B) / (c + k B)` may still be monotone.
            rational = quotient_direction(e, lambda x: self.expr(x, env))
            if rational is not None and rational[0] != UNKNOWN:
                return rational
        return found

    def quotient_by_sides(self, e: T.Binary, l: Abs, r: Abs) -> tuple[str, Optional[str]]:
        if r.dir == CONST:
            recip_dir: tuple[str, Optional[str]] = (CONST, None)
        elif r.dir == UNKNOWN:
            recip_dir = (UNKNOWN, r.why)
        elif r.iv.contains_zero():
            return UNKNOWN, f"the divisor `{self.text(e.r)}` may be zero (it lies in {r.iv})"
        else:
            recip_dir = (flip(r.dir), None)  # 1/r falls as r rises, on either side of zero
        recip, _ = I.div(Interval.point(1.0), r.iv)
        return combine([scaled(l, recip, self.sign_unknown(e.r, r.iv)),
                        scaled(Abs(recip, *recip_dir), l.iv, self.sign_unknown(e.l, l.iv))], self.opposed(e))

    def power(self, e: T.Binary, l: Abs, r: Abs) -> tuple[str, Optional[str]]:
        if l.dir == CONST and r.dir == CONST:
            return CONST, None
        p = I._constant_exponent(r.iv) if r.dir == CONST else None
        turn = lambda: (f"`{self.text(e)}` is not monotone where `{self.text(e.l)}` changes sign "  # noqa: E731
                        f"(it lies in {l.iv})")
        if p is not None:
            if p == 0:
                return CONST, None
            if p.is_integer() and p > 0:
                return scaled(l, l.iv, turn) if int(p) % 2 == 0 else (l.dir, l.why)
            if p.is_integer():  # negative integer: 1/x^k
                if l.iv.positive():
                    return flipped(l)
                if l.iv.negative():
                    return (l.dir, l.why) if int(p) % 2 == 0 else flipped(l)
                return (UNKNOWN, turn()) if l.dir != UNKNOWN else (UNKNOWN, l.why)
            return (l.dir, l.why) if p > 0 else flipped(l)  # x^p for x >= 0
        if l.iv.positive():  # a^b = exp(b log a)
            log_l = Abs(I.apply("log", l.iv), l.dir, l.why)
            return combine([scaled(log_l, r.iv, self.sign_unknown(e.r, r.iv)),
                            scaled(r, log_l.iv, lambda: f"the sign of `log({self.text(e.l)})` is not fixed")],
                           self.opposed(e))
        return UNKNOWN, f"`{self.text(e)}` has a variable exponent and a base that is not provably positive"

    def apply(self, e: T.Apply, args: list[Abs]) -> Abs:
        fn = e.fn
        x = args[0]
        if fn in T.GUARDS:
            return self.guard(e, args)
        if fn in T.ELEMENTWISE:
            if self.report and fn == "log" and not x.iv.positive():
                self.emit(errors.domain_warning(e.args[0].span, fn, str(x.iv), "a positive argument"))
            if self.report and fn == "sqrt" and not x.iv.nonneg():
                self.emit(errors.domain_warning(e.args[0].span, fn, str(x.iv), "a non-negative argument"))
            iv = I.apply(fn, x.iv)
            if x.dir == CONST:
                return Abs(iv)
            if fn in ("abs", "square"):
                return Abs(iv, *scaled(x, x.iv, lambda: f"`{self.text(e)}` turns around where "
                                                        f"`{self.text(e.args[0])}` changes sign (it lies in {x.iv})"))
            if fn in ("sin", "cos"):
                if x.dir in (CONST, UNKNOWN):
                    return Abs(iv, x.dir, x.why)
                d = trig_direction(fn, x.iv)
                if d is None:
                    return Abs(iv, UNKNOWN, f"`{self.text(e)}` is not monotone over {x.iv}")
                return Abs(iv, x.dir if d == INC else flip(x.dir))
            return Abs(iv, x.dir, x.why)  # every other elementwise function is nondecreasing
        if fn in ("min", "max", "clip"):
            iv = I.clip(*(a.iv for a in args)) if fn == "clip" else I.apply2(fn, args[0].iv, args[1].iv)
            if still(*args):
                return Abs(iv)
            return Abs(iv, *combine([(a.dir, a.why) for a in args], self.opposed(e)))
        if fn == "atan2":
            iv = I.apply2(fn, args[0].iv, args[1].iv)
            return Abs(iv) if still(*args) else Abs(iv, *self.atan2(e, args[0], args[1]))
        raise ice(f"analysis: unknown function {fn}")

    def guard(self, e: T.Apply, args: list[Abs]) -> Abs:
        """`isfinite(x)` and `nan_to_num(x, ...)`. The ranges allow a non-finite `x` (an observation
        outside its declared range, a NaN from upstream): `isfinite` may be either, `nan_to_num`
        may be any replacement. Directions are those of finite values: one that cannot overflow
        (its range is inside float32's) never flips `isfinite`; one that may, may."""
        x = args[0]
        bounded = all(abs(v) <= _F32_MAX for end in x.iv.flat_ends() for v in end)
        if e.fn == "isfinite":
            if isinstance(e.args[0], T.Const):
                iv = Interval.point(F.map1(lambda v: float(math.isfinite(v)), F.asfloats(e.args[0].value)))
            else:
                iv = Interval.boolean(e.type.shape)
            d: tuple[str, Optional[str]] = (CONST, None)
        else:
            iv = x.iv
            for r in args[1:]:
                iv = I.join(iv, r.iv.broadcast_to(iv.shape) if r.iv.shape != iv.shape else r.iv)
            d = (x.dir, x.why)
        if x.dir != CONST and not bounded:
            d = (UNKNOWN, f"`{self.text(e)}` changes where `{self.text(e.args[0])}` overflows to inf "
                          f"(it lies in {x.iv})")
        return Abs(iv, *d)

    def atan2(self, e: T.Apply, y: Abs, x: Abs) -> tuple[str, Optional[str]]:
        # d/dy atan2(y, x) has the sign of x (off the branch cut on the negative
        # x axis); d/dx has the sign of -y.
        cut = lambda: f"`{self.text(e)}` is not monotone across the negative x axis or the origin"  # noqa: E731
        if x.iv.positive():
            dy = (y.dir, y.why)
        elif x.iv.negative() and (y.iv.positive() or y.iv.negative()):
            dy = flipped(y)
        else:
            dy = (y.dir, y.why) if y.dir in (CONST, UNKNOWN) else (UNKNOWN, cut())
        if y.iv.positive():
            dx = flipped(x)
        elif y.iv.negative():
            dx = (x.dir, x.why)
        else:
            dx = (x.dir, x.why) if x.dir in (CONST, UNKNOWN) else (UNKNOWN, cut())
        return combine([dy, dx], self.opposed(e))

    def select(self, e: T.Select, env: Mapping[str, Abs]) -> Abs:
        c = self.expr(e.cond, env)
        a = self.expr(e.a, self.narrow(env, e.cond, True))
        b = self.expr(e.b, self.narrow(env, e.cond, False))
        iv = I.select(c.iv, a.iv, b.iv)
        if still(c, a, b):
            return Abs(iv)
        if c.iv.surely():
            return Abs(iv, a.dir, a.why)
        if c.iv.never():
            return Abs(iv, b.dir, b.why)
        both = combine([(a.dir, a.why), (b.dir, b.why)],
                       lambda: f"the branches of `{self.text(e)}` move in opposite directions")
        if c.dir == CONST or both[0] == UNKNOWN:
            return Abs(iv, *both)
        if c.dir == UNKNOWN:
            return Abs(iv, UNKNOWN, c.why)
        # The condition flips once as the variable rises: from b to a (INC) or from a to b.
        low, high = (b, a) if c.dir == INC else (a, b)
        d = both[0]
        if d in (CONST, INC) and I.compare("ge", high.iv, low.iv).surely():
            return Abs(iv, INC)
        if d in (CONST, DEC) and I.compare("le", high.iv, low.iv).surely():
            return Abs(iv, DEC)
        return Abs(iv, UNKNOWN, f"`{self.text(e)}` jumps between its branches as `{self.text(e.cond)}` changes")

    # ---- path sensitivity: what a condition says about the names it compares ------------

    def narrow(self, env: Mapping[str, Abs], cond: T.TExpr, truth: bool) -> Mapping[str, Abs]:
        facts = self.facts(cond, truth, env)
        if not facts:
            return env
        narrowed = type(env) is _Narrowed
        ctx = (env.ctx if narrowed else ()) + ((id(cond), truth),)
        dirty = (narrowed and env.dirty) or (bool(self.changed) and not self.deps.refs(cond).isdisjoint(self.changed))
        out = _Narrowed(env, ctx, dirty)
        for name, iv in facts:
            old = out[name]
            out[name] = Abs(I.meet(old.iv, _fit(iv, old.iv.shape)), old.dir, old.why)
        return out

    def facts(self, cond: T.TExpr, truth: bool, env: Mapping[str, Abs]) -> list[tuple[str, Interval]]:
        """(name, interval) pairs that hold wherever `cond` equals `truth`."""
        if isinstance(cond, T.Unary) and cond.op == "not":
            return self.facts(cond.x, not truth, env)
        if isinstance(cond, T.Binary) and cond.op in ("and", "or"):
            if (cond.op == "and") == truth:  # both sides hold (and-true, or-false)
                return self.facts(cond.l, truth, env) + self.facts(cond.r, truth, env)
            return []
        if not (isinstance(cond, T.Binary) and cond.op in ("lt", "le", "gt", "ge")):
            return []
        op, l, r = cond.op, cond.l, cond.r
        if op in ("gt", "ge"):
            op, l, r = {"gt": "lt", "ge": "le"}[op], r, l
        if not truth:  # not (l < r) is r <= l; not (l <= r) is r < l
            op, l, r = {"lt": "le", "le": "lt"}[op], r, l
        quiet, self.report = self.report, False
        try:
            liv, riv = self.expr(l, env).iv, self.expr(r, env).iv
        finally:
            self.report = quiet
        strict = op == "lt"
        out = []
        if isinstance(l, T.Ref):  # l < r: l is below r's top
            top = F.map1(lambda v: math.nextafter(v, -math.inf), riv.hi) if strict else riv.hi
            out.append((l.name, Interval(-math.inf, top)))
        if isinstance(r, T.Ref):  # r is above l's bottom
            bottom = F.map1(lambda v: math.nextafter(v, math.inf), liv.lo) if strict else liv.lo
            out.append((r.name, Interval(bottom, math.inf)))
        return out


def _fit(iv: Interval, shape: tuple[int, ...]) -> Interval:
    """`iv` as a bound for a value of `shape`: its hull if it would widen the shape."""
    try:
        if F.broadcast_shapes(iv.shape, shape) == shape:
            return iv
    except ValueError:
        pass
    return iv.hull()


def input_bounds(tp: T.TypedProgram, restrict: Optional[Mapping[str, Interval]] = None) -> dict[str, Interval]:
    """The interval of every obs (its declared range) and weight (its constraint), and of every
    state its declared range (`analyze.state_ranges` proves tighter ones and passes them in `restrict`)."""
    out: dict[str, Interval] = {}
    for st in tp.states:
        out[st.name] = (Interval.boolean(st.type.shape) if st.type.base == T.BOOL
                        else Interval(st.lo, st.hi).broadcast_to(st.type.shape))
    for d in (*tp.obs, *tp.weights):
        bounds = getattr(d, "bounds", None)
        if bounds is not None:  # a range per element of an observation
            out[d.name] = Interval(F.Floats(tuple(bounds[0]), d.type.shape), F.Floats(tuple(bounds[1]), d.type.shape))
        else:
            out[d.name] = Interval(d.lo, d.hi).broadcast_to(d.type.shape)
    out.update(restrict or {})
    return out


def run_pass(tp: T.TypedProgram, var: Optional[str] = None, report: bool = False,
             restrict: Optional[Mapping[str, Interval]] = None) -> Pass:
    """One abstract run; `restrict` narrows some weights (e.g. to one sign) or states (to their proved ranges)."""
    return Pass(tp, input_bounds(tp, restrict), var, report).run()


def run_cone(base: Pass, target: Union[str, Sequence[str]], var: Optional[str] = None,
             restrict: Optional[Mapping[str, Interval]] = None) -> Pass:
    """What `run_pass(tp, var, restrict=restrict)` knows about `target`, for a
    fraction of its work.

    `base` is the plain pass over the whole program (no variable, no
    restriction). Only the nodes of `target`'s cone that lie downstream of
    `var` or of a restricted weight can differ from it, so only those are
    evaluated, and inside them every expression reading none of the changed
    names is taken from `base`. `env` answers for every name (the others
    fall through to `base.env`); `evaluated` counts the work done. Several targets: one
    pass over the union of their cones, which knows about each what its own cone pass knows
    (a node's value depends only on its own cone), in one traversal for all of them."""
    if base.var is not None or base.base is not None:
        raise ice("run_cone needs a plain whole-program pass as its base")
    restrict = dict(restrict or {})
    g = base.deps
    cone = g.cone(target) if isinstance(target, str) else g.cone_of(target)
    roots = set(restrict) | ({var} if var is not None else set())
    changed = g.downstream(cone, roots)
    bounds = ChainMap(restrict, base.bounds)
    p = Pass(base.tp, bounds, var, report=False, base=base, changed=changed)
    p.env = ChainMap({}, base.env)
    for name in sorted(roots - g.order.keys()):  # changed inputs: the variable, restricted weights
        p.input(g.inputs[name])
    for name in cone:
        if name in changed:
            p.node(g.nodes[name])
    return p

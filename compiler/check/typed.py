"""The typed program: what `check` produces and every later phase consumes.

A separate tree from `ast`: every expression node knows its `Type` (base and
static shape), names are resolved to what they refer to, indices are plain
integers, calls are resolved to one of the builtin operations, and
declarations come in dependency order. All nodes are frozen.

Expression nodes (`TExpr`):
    Const(value, type)              numeric or bool literal (value: nested tuples for arrays)
    Ref(name, kind, type)           kind: "obs" | "weight" | "latent" | "action" | "state"
                                        (a state's Ref reads its value at the start of the step)
    Unary(op, x, type)              op: "neg" | "not"
    Binary(op, l, r, type)          op: "add" "sub" "mul" "div" "pow"
                                        "eq" "ne" "lt" "le" "gt" "ge" "and" "or"
    Select(cond, a, b, type)        `if c then a else b` and `where(c, a, b)`: elementwise
    Apply(fn, args, type)           elementwise builtins, see ELEMENTWISE / BINARY_FUNCS; `clip` has 3 args;
                                        GUARDS: `isfinite` has 1, `nan_to_num` 4 (x and the constant
                                        replacements of nan, +inf and -inf)
    Reduce(fn, x, axis, type)       fn in REDUCTIONS; axis None means over all elements
    Index(x, items, type)           items: one per leading axis, int (drops the axis) or (start, stop) slice
    Stack(items, type)              a vector literal: stacks equal-typed items on a new leading axis
    Mlp(key, inputs, hidden, out, activation, type)
                                    a learned block; inputs are flattened and concatenated;
                                    its parameters live under params[key] (flat params dict)
Broadcasting follows NumPy. Bools are never silently converted to reals.
"""

from __future__ import annotations

from ..util.record import record
from ..util.text import brackets
from typing import Optional, Union

from ..frontend.ast import Span

REAL, BOOL = "real", "bool"

# Elementwise functions of one argument, with the domain they need (for analysis).
ELEMENTWISE = ("abs", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "softplus", "sin", "cos", "square", "sign")
# Elementwise functions of two arguments (broadcasting).
BINARY_FUNCS = ("atan2", "min", "max")
# Reductions: `f(x)` over all elements or `f(x, axis = k)`.
REDUCTIONS = ("sum", "mean", "max", "min", "norm")
# Guards of non-finite values: `isfinite(x)` (bool, elementwise) and
# `nan_to_num(x; nan = 0, posinf = nan, neginf = nan)` (its replacements are constants).
GUARDS = ("isfinite", "nan_to_num")
ACTIVATIONS = ("tanh", "relu")


@record
class Type:
    base: str  # REAL or BOOL
    shape: tuple[int, ...] = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return self.base + brackets(self.shape)


@record
class Const:
    value: Union[float, bool, tuple]
    type: Type
    span: Span


@record
class Ref:
    name: str
    kind: str  # "obs", "weight", "latent", "action", "state"
    type: Type
    span: Span


@record
class Unary:
    op: str  # "neg" or "not"
    x: "TExpr"
    type: Type
    span: Span


@record
class Binary:
    op: str
    l: "TExpr"
    r: "TExpr"
    type: Type
    span: Span


@record
class Select:
    cond: "TExpr"
    a: "TExpr"
    b: "TExpr"
    type: Type
    span: Span


@record
class Apply:
    fn: str
    args: tuple["TExpr", ...]
    type: Type
    span: Span


@record
class Reduce:
    fn: str
    x: "TExpr"
    axis: Optional[int]
    type: Type
    span: Span


@record
class Index:
    x: "TExpr"
    items: tuple[Union[int, tuple[int, int]], ...]  # non-negative ints / (start, stop) slices, normalised
    type: Type
    span: Span


@record
class Stack:
    items: tuple["TExpr", ...]
    type: Type
    span: Span


@record
class Mlp:
    key: str  # "<decl>.mlp", or "<decl>.mlp<k>" for the k-th (k >= 1) in one declaration: never a Pol name
    inputs: tuple["TExpr", ...]
    hidden: tuple[int, ...]
    out: int  # out == 0 means a scalar output
    activation: str
    type: Type
    span: Span

    @property
    def in_size(self) -> int:
        return sum(x.type.size for x in self.inputs)


TExpr = Union[Const, Ref, Unary, Binary, Select, Apply, Reduce, Index, Stack, Mlp]

BINARY_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "^": "pow", "==": "eq", "!=": "ne",
              "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "and": "and", "or": "or"}


# ---- declarations -----------------------------------------------------------------


@record
class Obs:
    name: str
    type: Type
    lo: float  # -inf when not declared; with `bounds`, the least lower bound of any element
    hi: float  # +inf when not declared; with `bounds`, the greatest upper bound of any element
    doc: Optional[str]
    span: Span
    # A range per element (from a `{[i] in [lo, hi], ...}` block): the lower and the upper
    # bounds of every element, flat in C order; None when one range holds for all of them.
    bounds: Optional[tuple[tuple[float, ...], tuple[float, ...]]] = None


@record
class Constant:
    """`const NAME = EXPR`: its value, folded by the checker (every use reads it as a `Const`)."""

    name: str
    value: float
    doc: Optional[str]
    span: Span
    type: Type = Type(REAL)


@record
class Prior:
    """A weight's prior: a family of `priors.FAMILIES` and its arguments in that
    family's positional order, one scalar prior for every element of the weight."""

    family: str
    args: tuple[float, ...]
    span: Span

    def __str__(self) -> str:
        return self.family + "(" + ", ".join(f"{a:g}" for a in self.args) + ")"


@record
class Weight:
    """A trainable weight. `lo`/`hi` are its constraint (+-inf when open);
    `init` is the constrained initial value as nested tuples of floats of `type.shape`;
    `prior` is its declared prior, or None."""

    name: str
    type: Type
    lo: float
    hi: float
    init: Union[float, tuple]
    doc: Optional[str]
    span: Span
    prior: Optional[Prior] = None


@record
class Latent:
    name: str
    type: Type
    expr: TExpr
    doc: Optional[str]
    span: Span


@record
class Action:
    """`expr` is the mean; the lowering clips it to [lo, hi]. `std` is the
    Gaussian noise std (an expression of the same shape or broadcastable), or None."""

    name: str
    type: Type
    lo: float
    hi: float
    expr: TExpr
    std: Optional[TExpr]
    doc: Optional[str]
    span: Span


@record
class State:
    """`state NAME : TYPE [RANGE] = INIT next UPDATE`: memory carried from one step to the next.

    A `Ref(name, "state", ...)` reads the value at the start of the step (`init` at the first
    step of an episode: nested tuples of `type.shape`, floats or bools); `update` is evaluated
    after every latent and action of the step, broadcast to `type`, clipped to [lo, hi] (real
    states), and is the value at the next step. Reading a state is a delay, so it never makes a
    cycle."""

    name: str
    type: Type
    lo: float  # -inf when not declared
    hi: float
    init: Union[float, bool, tuple]
    update: TExpr
    doc: Optional[str]
    span: Span


@record
class MonoIntent:
    target: str
    direction: str  # "increasing" or "decreasing"
    var: str
    text: str  # the claim as written, for messages
    span: Span


@record
class RangeIntent:
    target: str
    lo: float  # -inf when unbounded
    hi: float
    lo_strict: bool
    hi_strict: bool
    text: str
    span: Span


Intent = Union[MonoIntent, RangeIntent]


@record
class TypedProgram:
    """A checked program. `nodes` lists latents and actions in an order where
    every node comes after everything it reads (a topological order)."""

    name: str
    doc: Optional[str]
    obs: tuple[Obs, ...]
    weights: tuple[Weight, ...]
    latents: tuple[Latent, ...]
    actions: tuple[Action, ...]
    intents: tuple[Intent, ...]
    nodes: tuple[Union[Latent, Action], ...]
    mlps: tuple[Mlp, ...]
    file: str
    source: str
    consts: tuple[Constant, ...] = ()
    states: tuple[State, ...] = ()  # memory between steps, in declaration order; () for a memoryless program

    def decl(self, name: str):
        for group in (self.obs, self.weights, self.latents, self.actions, self.consts, self.states):
            for d in group:
                if d.name == name:
                    return d
        return None

    @property
    def stochastic(self) -> bool:
        return any(a.std is not None for a in self.actions)


def children(e: TExpr) -> tuple[TExpr, ...]:
    """The direct sub-expressions of `e`, for generic traversals."""
    if isinstance(e, (Const, Ref)):
        return ()
    if isinstance(e, Unary):
        return (e.x,)
    if isinstance(e, Binary):
        return (e.l, e.r)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, Apply):
        return e.args
    if isinstance(e, Reduce):
        return (e.x,)
    if isinstance(e, Index):
        return (e.x,)
    if isinstance(e, (Stack,)):
        return e.items
    if isinstance(e, Mlp):
        return e.inputs
    raise TypeError(f"not a typed expression: {e!r}")


def refs(e: TExpr) -> set[str]:
    """Names that `e` reads."""
    if isinstance(e, Ref):
        return {e.name}
    out: set[str] = set()
    for c in children(e):
        out |= refs(c)
    return out


def mlps_in(e: TExpr) -> list[Mlp]:
    if isinstance(e, Mlp):
        found = [e]
    else:
        found = []
    for c in children(e):
        found += mlps_in(c)
    return found


def state_modes(tp: "TypedProgram", state: "State") -> tuple[tuple[str, float], ...]:
    """The named modes of a state machine: the constants (`const DESCEND = 1`) a state is compared
    with (`phase == DESCEND`) or given in its `next` expression (`then DESCEND`), as (name, value)
    in the order of their values. A constant is folded where it is read, so it is recognised by
    its source text: a `Const` whose text is a declared constant's name."""
    consts = {c.name: c.value for c in tp.consts}
    if not consts or state.type.base != REAL or state.type.shape:
        return ()
    lines = tp.source.split("\n")

    def name_of(e: TExpr) -> Optional[str]:
        if not isinstance(e, Const) or e.span.line != e.span.end_line or e.span.line > len(lines):
            return None
        text = lines[e.span.line - 1][e.span.column - 1: e.span.end_column - 1]
        return text if text in consts else None

    found: dict[str, float] = {}

    def compared(e: TExpr) -> None:
        if isinstance(e, Binary) and e.op in ("eq", "ne"):
            for a, b in ((e.l, e.r), (e.r, e.l)):
                if isinstance(a, Ref) and a.name == state.name and name_of(b):
                    found[name_of(b)] = consts[name_of(b)]
        for c in children(e):
            compared(c)

    def assigned(e: TExpr) -> None:  # the leaves of the `next` expression's branches
        if isinstance(e, Select):
            assigned(e.a), assigned(e.b)
        elif name_of(e):
            found[name_of(e)] = consts[name_of(e)]

    for n in tp.nodes:
        compared(n.expr)
    for st in tp.states:
        compared(st.update)
    assigned(state.update)
    return tuple(sorted(found.items(), key=lambda kv: (kv[1], kv[0])))

"""The untyped syntax tree of a Pol program, as the parser builds it.

Every node is a frozen dataclass (`record`) carrying the `Span` of source text it came
from; nothing here knows what a name means or what shape a value has (that is
`check`'s job, which builds the separate typed tree in `typed.py`).
"""

from __future__ import annotations

from typing import Optional, Union

from ..messages import Span
from ..util.record import record


# ---- expressions -----------------------------------------------------------


@record
class Number:
    value: float
    text: str  # as written, so `polc fmt` keeps `0.10` as `0.10`
    span: Span


@record
class BoolLit:
    value: bool
    span: Span


@record
class Name:
    id: str
    span: Span


@record
class Unary:
    op: str  # "-", "+", "not"
    operand: "Expr"
    span: Span


@record
class Binary:
    op: str  # + - * / ^ == != < <= > >= and or
    left: "Expr"
    right: "Expr"
    span: Span
    op_span: Span


@record
class IfElse:
    cond: "Expr"
    then: "Expr"
    orelse: "Expr"
    span: Span


@record
class Kwarg:
    name: str
    value: "Expr"
    span: Span
    name_span: Span


@record
class Call:
    func: str
    args: tuple["Expr", ...]
    kwargs: tuple[Kwarg, ...]
    span: Span
    func_span: Span


@record
class At:
    """One index position: `x[i]`."""

    index: "Expr"
    span: Span


@record
class Slice:
    """One slice position: `x[a:b]`, either end optional."""

    start: Optional["Expr"]
    stop: Optional["Expr"]
    span: Span


@record
class Subscript:
    base: "Expr"
    items: tuple[Union[At, Slice], ...]
    span: Span


@record
class Vector:
    items: tuple["Expr", ...]
    span: Span


Expr = Union[Number, BoolLit, Name, Unary, Binary, IfElse, Call, Subscript, Vector]


# ---- types, ranges, noise ----------------------------------------------------


@record
class TypeSpec:
    base: str  # "real" or "bool"
    dims: tuple[Union[int, "Name"], ...]  # a number, or the name of a `const`
    span: Span


@record
class Bound:
    value: float  # may be +-inf
    text: str
    span: Span


@record
class Range:
    """`in [lo, hi]`, `>= lo` or `<= hi`; a missing end is None."""

    lo: Optional[Bound]
    hi: Optional[Bound]
    span: Span


@record
class ElemRange:
    """One part of an observation's `{...}` block: `[2:6] in [0, 3] "wheel speeds"`, the range of
    the elements the index or slice selects."""

    items: tuple[Union[At, Slice], ...]
    range: Range
    doc: Optional[str]
    span: Span


@record
class Noise:
    dist: str  # the name written after `~`, e.g. "normal"
    args: tuple[Expr, ...]
    kwargs: tuple[Kwarg, ...]
    span: Span
    dist_span: Span


@record
class Prior:
    """A weight's prior, `~ family(args)` after its initial value: the family and
    its arguments as written (`check` decides what they mean)."""

    dist: str  # the name written after `~`, e.g. "normal"
    args: tuple[Expr, ...]
    kwargs: tuple[Kwarg, ...]
    span: Span
    dist_span: Span


# ---- declarations -------------------------------------------------------------


@record
class PolicyDecl:
    name: str
    doc: Optional[str]
    span: Span
    name_span: Span


@record
class ObsDecl:
    name: str
    type: TypeSpec
    range: Optional[Range]
    doc: Optional[str]
    span: Span
    name_span: Span
    parts: tuple[ElemRange, ...] = ()  # ranges of parts of a vector: `{[0] in [0, 1.5], ...}`


@record
class WeightDecl:
    name: str
    type: TypeSpec
    range: Optional[Range]
    init: Expr
    doc: Optional[str]
    span: Span
    name_span: Span
    prior: Optional[Prior] = None


@record
class LatentDecl:
    name: str
    type: Optional[TypeSpec]
    expr: Expr
    doc: Optional[str]
    span: Span
    name_span: Span


@record
class ActionDecl:
    name: str
    type: TypeSpec
    range: Optional[Range]
    expr: Expr
    noise: Optional[Noise]
    doc: Optional[str]
    span: Span
    name_span: Span


@record
class MonoClaim:
    """`expect target increasing in var`."""

    target: Name
    direction: str  # "increasing" or "decreasing"
    var: Name
    span: Span


@record
class RangeClaim:
    """`expect target >= b`, `> b`, `<= b`, `< b`, or `in [lo, hi]`."""

    target: Name
    op: str  # ">=", ">", "<=", "<", "in"
    lo: Optional[Bound]
    hi: Optional[Bound]
    span: Span


@record
class ExpectDecl:
    claim: Union[MonoClaim, RangeClaim]
    doc: Optional[str]
    span: Span


@record
class ConstDecl:
    """`const NAME = EXPR`: a named number, known before any evaluation."""

    name: str
    expr: Expr
    doc: Optional[str]
    span: Span
    name_span: Span


@record
class StateDecl:
    """`state NAME : TYPE [RANGE] = INIT next UPDATE`: memory between steps. Reading NAME gives
    its value at the start of the step (INIT at the first); UPDATE, evaluated with this step's
    values, becomes its value at the next step (clipped to RANGE)."""

    name: str
    type: TypeSpec
    range: Optional[Range]
    init: Expr
    update: Expr
    doc: Optional[str]
    span: Span
    name_span: Span


Decl = Union[PolicyDecl, ObsDecl, WeightDecl, LatentDecl, ActionDecl, ExpectDecl, ConstDecl, StateDecl]


@record
class Comment:
    text: str  # including the leading '#'
    span: Span


@record
class Program:
    decls: tuple[Decl, ...]
    comments: tuple[Comment, ...]
    file: str
    text: str

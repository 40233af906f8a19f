"""`polc fmt`: the one canonical layout of a Pol program.

Works from the untyped AST (`ast.Program`), so a program that does not
type-check can still be formatted. The rules:

Declarations
  * Declarations stay in source order: people group them meaningfully. The one
    exception is `policy`, which is moved to the top (with its own comments).
  * One declaration per line: `keyword name : type range = expr ~ noise "doc"`
    (a weight's `~ prior` sits where an action's `~ noise` does),
    one space on each side of `:`, `=` and `~`.
  * Alignment: within a *run* (consecutive declarations of the same keyword
    with no blank line between them; comment lines do not end a run), names are
    padded so that the `:` column (and the `=` of latents) lines up. For
    weights and actions the `name : type range` part is padded so that the `=`
    column lines up too, unless some would need more than 6 spaces of padding
    (types as different as `real[3]` and `real in [0.005, 0.2]`: then the
    values and docs would drift far from their names).
  * Doc strings: in a run, the doc strings of one-line declarations whose code
    is at most 48 characters wide start in one column, one space after the
    widest such code. Other doc strings follow their code after one space, or,
    when that would pass 100 characters or the code spans several lines, go on
    a continuation line of their own.
  * Blank lines: one blank line between declarations of different keywords;
    blank lines the author left between declarations or comments are kept, but
    never more than one in a row. No blank line at the start, one newline at the end.

Expressions
  * Binary operators have one space on each side, except `^`, which is written
    tight (`x^2`, like the mathematics it stands for). Commas are followed by a
    space; calls with keyword arguments read `f(x, y; k = v)` (`f(k = v)` with
    no positional ones); slices are tight (`x[1:3, :]`).
  * Parentheses are the minimal ones the precedence in `grammar/pol.lark`
    needs: loosest first `if-then-else`, `or`, `and`, `not`, comparisons (which
    do not chain), `+ -`, `* /`, unary `- +`, `^` (right-associative, and tighter
    than unary minus: `-x^2` is `-(x^2)`; its exponent may be a unary: `x^-2`),
    then subscripts. Redundant parentheses in the source are dropped; the one
    addition is that an `if` inside another `if`'s condition or `then` branch is
    bracketed (an else-chain `if a then x else if b then y else z` is not).
  * Numbers keep their source text (`0.10` stays `0.10`); doc strings are
    re-escaped (`\\`, `"`, newline and tab).
  * A line longer than 100 characters is broken after a binary operator (or a
    comma, or before `then`/`else` or `~`), loosest and
    outermost break points first, filling each line greedily (except that an
    `if` chain that breaks puts every `else` on a new line); continuation lines
    are indented 4 spaces. The grammar ignores newlines, so this is safe.

Comments (never lost)
  * A comment on the last line of a declaration stays after it on that line
    (two spaces before the `#`; on the last line when the declaration is broken).
  * Every other comment is placed on its own line, in source order, before the
    declaration that follows it; a comment inside a multi-line declaration moves
    just above that declaration. Comments after the last declaration stay at the end.
  * Comment text is kept verbatim (trailing whitespace removed).

The result is idempotent (`format_program(parse(format_program(p))) ==
format_program(p)`) and keeps the meaning: re-parsing it gives the same AST up
to source positions.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Optional, Union

from .frontend import ast
from .messages import ice
from .text import claim

WIDTH = 100
INDENT = "    "
DOC_ALIGN = 48  # doc strings line up after code up to this wide; longer code gets one space
EQ_PAD = 6  # at most this much padding of types to line up the `=` of weights and actions

# ---- precedence ----------------------------------------------------------------
# Levels follow grammar/pol.lark, loosest first; an operand must be at least as
# tight as its slot requires, or it is parenthesised.
IFELSE, OR, AND, NOT, COMPARE, SUM, PRODUCT, UNARY, POWER, POSTFIX, ATOM = range(11)
_COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
# op -> (level of the operator, level its left operand needs, level its right operand needs)
_BINARY = {"or": (OR, OR, AND), "and": (AND, AND, NOT), "+": (SUM, SUM, PRODUCT), "-": (SUM, SUM, PRODUCT),
           "*": (PRODUCT, PRODUCT, UNARY), "/": (PRODUCT, PRODUCT, UNARY), "^": (POWER, POSTFIX, UNARY)}
_BINARY.update({op: (COMPARE, SUM, SUM) for op in _COMPARE_OPS})


def level(e: ast.Expr) -> int:
    """How tightly `e` binds when written without parentheses."""
    if isinstance(e, (ast.Number, ast.BoolLit, ast.Name, ast.Call, ast.Vector)):
        return ATOM
    if isinstance(e, ast.Subscript):
        return POSTFIX
    if isinstance(e, ast.Unary):
        return NOT if e.op == "not" else UNARY
    if isinstance(e, ast.Binary):
        return _BINARY[e.op][0]
    if isinstance(e, ast.IfElse):
        return IFELSE
    raise ice(f"fmt: not an expression: {e!r}")


# ---- a tiny pretty-printing document -----------------------------------------------
# An expression renders to a flat list of pieces: text, and `Brk` points where a
# line may break (a space when flat). A break's `rank` orders break points: lower
# ranks are tried first (outer nesting, looser operators).


@dataclass(frozen=True)
class Brk:
    rank: int
    every: bool = False  # once this rank breaks, break at all of its points (an else-chain)


Piece = Union[str, Brk]
_TAIL_RANK = -1  # before `~ noise` (or a weight's `~ prior`)
_DEPTH_STEP = 100  # one level of brackets outranks any operator inside it


def _escape(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _expr(e: ast.Expr, depth: int = 0) -> list[Piece]:
    """The pieces of `e`; `depth` counts enclosing brackets (for break ranks)."""
    base = depth * _DEPTH_STEP
    if isinstance(e, ast.Number):
        return [e.text]
    if isinstance(e, ast.BoolLit):
        return ["true" if e.value else "false"]
    if isinstance(e, ast.Name):
        return [e.id]
    if isinstance(e, ast.Unary):
        need = NOT if e.op == "not" else UNARY
        return ["not " if e.op == "not" else e.op] + _operand(e.operand, need, depth)
    if isinstance(e, ast.Binary):
        _, lneed, rneed = _BINARY[e.op]
        left, right = _operand(e.left, lneed, depth), _operand(e.right, rneed, depth)
        if e.op == "^":
            return left + ["^"] + right
        return left + [" " + e.op, Brk(base + 2 * _BINARY[e.op][0])] + right
    if isinstance(e, ast.IfElse):
        # a nested `if` reads badly unbracketed except as an else-chain
        # break before `else` first, then before `then`, then inside the branches
        return (["if "] + _operand(e.cond, OR, depth) + [Brk(base + 1), "then "] + _operand(e.then, OR, depth)
                + [Brk(base, every=True), "else "] + _expr(e.orelse, depth))
    if isinstance(e, ast.Call):
        return [e.func, "("] + _args(e.args, e.kwargs, depth + 1) + [")"]
    if isinstance(e, ast.Vector):
        return ["["] + _commas([_expr(x, depth + 1) for x in e.items], depth + 1) + ["]"]
    if isinstance(e, ast.Subscript):
        items = [_index(i, depth + 1) for i in e.items]
        return _operand(e.base, POSTFIX, depth) + ["["] + _commas(items, depth + 1) + ["]"]
    raise ice(f"fmt: not an expression: {e!r}")


def _operand(e: ast.Expr, need: int, depth: int) -> list[Piece]:
    if level(e) >= need:
        return _expr(e, depth)
    return ["("] + _expr(e, depth + 1) + [")"]


def _index(item: Union[ast.At, ast.Slice], depth: int) -> list[Piece]:
    if isinstance(item, ast.At):
        return _expr(item.index, depth)
    start = _expr(item.start, depth) if item.start is not None else []
    stop = _expr(item.stop, depth) if item.stop is not None else []
    return start + [":"] + stop


def _commas(items: list[list[Piece]], depth: int, sep: str = ",") -> list[Piece]:
    out: list[Piece] = []
    for i, item in enumerate(items):
        if i:
            out += [sep, Brk(depth * _DEPTH_STEP)]
        out += item
    return out


def _args(args: tuple[ast.Expr, ...], kwargs: tuple[ast.Kwarg, ...], depth: int) -> list[Piece]:
    pos = _commas([_expr(a, depth) for a in args], depth)
    kw = _commas([[k.name + " = "] + _expr(k.value, depth) for k in kwargs], depth)
    if pos and kw:
        return pos + [";", Brk(depth * _DEPTH_STEP)] + kw
    return pos or kw


def _flat(pieces: list[Piece]) -> str:
    return "".join(" " if isinstance(p, Brk) else p for p in pieces)


def _fill(pieces: list[Piece], col: int, indent: int = len(INDENT)) -> list[str]:
    """Lay `pieces` out from column `col`: flat if it fits in WIDTH, otherwise
    broken at the lowest-ranked break points, greedily, and recursively inside
    any segment that still does not fit. Continuation lines start at `indent`."""
    flat = _flat(pieces)
    ranks = [p.rank for p in pieces if isinstance(p, Brk)]
    if col + len(flat) <= WIDTH or not ranks:
        return [flat]
    top = min(ranks)
    segments: list[list[Piece]] = [[]]
    for p in pieces:
        if isinstance(p, Brk) and p.rank == top:
            segments.append([])
        else:
            segments[-1].append(p)
    every = any(p.every for p in pieces if isinstance(p, Brk) and p.rank == top)
    lines = [""]
    line_col = col
    for i, seg in enumerate(segments):
        text = _flat(seg)
        sep = " " if i else ""
        if i and (every or line_col + len(lines[-1]) + len(sep) + len(text) > WIDTH):
            lines.append(" " * indent)
            line_col, sep = 0, ""
        if line_col + len(lines[-1]) + len(sep) + len(text) <= WIDTH:
            lines[-1] += sep + text
            continue
        sub = _fill(seg, line_col + len(lines[-1]) + len(sep), indent)
        lines[-1] += sep + sub[0]
        lines += sub[1:]  # continuation lines carry their indent
        line_col = 0 if len(sub) > 1 else line_col
    return lines


# ---- declarations ------------------------------------------------------------------


def _keyword(d: ast.Decl) -> str:
    return {ast.PolicyDecl: "policy", ast.ObsDecl: "obs", ast.WeightDecl: "weight", ast.LatentDecl: "latent",
            ast.ActionDecl: "action", ast.ExpectDecl: "expect", ast.ConstDecl: "const", ast.StateDecl: "state"}[type(d)]


def _type(t: ast.TypeSpec) -> str:
    dims = [str(n) if isinstance(n, int) else n.id for n in t.dims]
    return t.base + ("[" + ", ".join(dims) + "]" if dims else "")


def _elem_index(part: ast.ElemRange) -> str:
    return "[" + ", ".join(_flat(_index(i, 1)) for i in part.items) + "]"


def _elem_tail(part: ast.ElemRange) -> str:
    return _range(part.range).lstrip() + (" " + _escape(part.doc) if part.doc is not None else "")


def _elem_block(parts: tuple[ast.ElemRange, ...]) -> str:
    """An observation's `{...}` block on one line."""
    return " {" + ", ".join(_elem_index(p) + " " + _elem_tail(p) for p in parts) + "}"


def _elem_lines(head: str, d: ast.ObsDecl) -> list[str]:
    """An observation whose block does not fit on one line: one part per line, `in` aligned."""
    width = max(len(_elem_index(p)) for p in d.parts)
    range_w = max(len(_range(p.range).lstrip()) for p in d.parts)
    lines = [head + " {"]
    for p in d.parts:
        line = INDENT + _elem_index(p).ljust(width) + " " + _range(p.range).lstrip()
        lines.append(line.ljust(len(INDENT) + width + 1 + range_w) + " " + _escape(p.doc) if p.doc is not None
                     else line)
    return lines + ["}" + (" " + _escape(d.doc) if d.doc is not None else "")]


def _range(r: Optional[ast.Range]) -> str:
    if r is None:
        return ""
    if r.lo is not None and r.hi is not None:
        return f" in [{r.lo.text}, {r.hi.text}]"
    return f" >= {r.lo.text}" if r.lo is not None else f" <= {r.hi.text}"


@dataclass
class _Parts:
    """A declaration cut at its alignment columns: `head` (keyword and name),
    `colon` (`: type range`, may be empty), `rest` (`= expr ~ noise`, as pieces),
    and the doc string."""

    head: str
    colon: str = ""
    rest: list[Piece] = field(default_factory=list)
    doc: Optional[str] = None


def _parts(d: ast.Decl) -> _Parts:
    kw = _keyword(d)
    if isinstance(d, ast.PolicyDecl):
        return _Parts(f"policy {d.name}", doc=d.doc)
    if isinstance(d, ast.ExpectDecl):
        return _Parts(f"expect {claim(d.claim)}", doc=d.doc)
    if isinstance(d, ast.ConstDecl):
        return _Parts(f"const {d.name}", rest=["= "] + _expr(d.expr), doc=d.doc)
    colon = f": {_type(d.type)}{_range(getattr(d, 'range', None))}" if d.type is not None else ""
    if isinstance(d, ast.ObsDecl):
        return _Parts(f"{kw} {d.name}", colon + (_elem_block(d.parts) if d.parts else ""), doc=d.doc)
    value = d.init if isinstance(d, (ast.WeightDecl, ast.StateDecl)) else d.expr
    rest: list[Piece] = ["= "] + _expr(value)
    if isinstance(d, ast.StateDecl):  # `next` breaks like an action's noise: onto its own line first
        rest += [Brk(_TAIL_RANK), "next "] + _expr(d.update)
    n = d.noise if isinstance(d, ast.ActionDecl) else d.prior if isinstance(d, ast.WeightDecl) else None
    if n is not None:  # an action's noise or a weight's prior
        rest += [Brk(_TAIL_RANK), f"~ {n.dist}("] + _args(n.args, n.kwargs, 1) + [")"]
    return _Parts(f"{kw} {d.name}", colon, rest, d.doc)


def _render_run(decls: list[ast.Decl]) -> list[list[str]]:
    """Render one run of same-keyword declarations with aligned columns; one
    list of lines per declaration."""
    parts = [_parts(d) for d in decls]
    kw = _keyword(decls[0])
    head_w = max(len(p.head) for p in parts) if kw in ("obs", "weight", "latent", "action", "const", "state") else 0
    firsts = [p.head.ljust(head_w) + (" " + p.colon if p.colon else "") for p in parts]
    if kw in ("weight", "action", "state") and max(map(len, firsts)) - min(map(len, firsts)) <= EQ_PAD:
        # line up `=` after `name : type range`, unless the types differ so
        # much in width that padding would push the values far apart
        eq_w = max(map(len, firsts))
        firsts = [f.ljust(eq_w) for f in firsts]
    codes = [_fill([f] + ([" "] + p.rest if p.rest else []), 0) for f, p in zip(firsts, parts)]
    short = [len(c[0]) for c, p in zip(codes, parts) if p.doc is not None and len(c) == 1 and len(c[0]) <= DOC_ALIGN]
    doc_col = max(short, default=0) + 1
    rendered = []
    for lines, p, d in zip(codes, parts, decls):
        lines = [line.rstrip() for line in lines]
        if isinstance(d, ast.ObsDecl) and d.parts and len(lines[0]) + (len(_escape(d.doc)) + 1 if d.doc else 0) > WIDTH:
            rendered.append(_elem_lines(lines[0][: len(lines[0]) - len(_elem_block(d.parts))], d))
            continue
        if p.doc is not None:
            doc = _escape(p.doc)
            if len(lines) == 1 and len(lines[0]) < doc_col and doc_col + len(doc) <= WIDTH:
                lines[0] = lines[0].ljust(doc_col) + doc
            elif len(lines) == 1 and len(lines[0]) + 1 + len(doc) <= WIDTH:
                lines[-1] += " " + doc
            else:
                lines.append(INDENT + doc)
        rendered.append(lines)
    return rendered


# ---- comments and layout -----------------------------------------------------------


class _Source:
    """Line/column <-> offset in the original text, and blank-line tests on it."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column - 1

    def blank_between(self, a: int, b: int) -> bool:
        """Whether the source between offsets a and b holds an empty line."""
        return a < b and re.search(r"\n[ \t\r\f\v]*\n", self.text[a:b]) is not None


@dataclass
class _Item:
    decl: ast.Decl
    leading: list[ast.Comment]
    trailing: Optional[ast.Comment]


def _attach(prog: ast.Program) -> tuple[list[_Item], list[ast.Comment]]:
    """Give every comment a home: leading (own line before a declaration),
    trailing (on a declaration's last line) or the end of the file."""
    src = _Source(prog.text)
    decls = sorted(prog.decls, key=lambda d: (d.span.line, d.span.column))
    ends = [src.offset(d.span.end_line, d.span.end_column) for d in decls]
    items = [_Item(d, [], None) for d in decls]
    tail: list[ast.Comment] = []
    for c in sorted(prog.comments, key=lambda c: (c.span.line, c.span.column)):
        at = src.offset(c.span.line, c.span.column)
        # the first declaration that has not ended before this comment
        i = bisect.bisect_left(ends, at)
        if i > 0 and decls[i - 1].span.end_line == c.span.line and items[i - 1].trailing is None:
            items[i - 1].trailing = c
        elif i < len(items):
            items[i].leading.append(c)
        else:
            tail.append(c)
    return items, tail


def _span_offsets(src: _Source, s: ast.Span) -> tuple[int, int]:
    return src.offset(s.line, s.column), src.offset(s.end_line, s.end_column)


def format_program(prog: ast.Program) -> str:
    """The canonical text of `prog` (ends in exactly one newline; empty for an empty program)."""
    src = _Source(prog.text)
    items, tail = _attach(prog)
    items = [it for it in items if isinstance(it.decl, ast.PolicyDecl)] + [
        it for it in items if not isinstance(it.decl, ast.PolicyDecl)]

    # Each output chunk: (source start, source end, kind, payload); kind is "comment" or "decl".
    # `blank_before[i]` says whether chunk i is preceded by a blank line.
    chunks: list[tuple[int, int, str, object]] = []
    group_start: list[bool] = []  # chunk opens a declaration's block whose keyword differs from the last one
    prev_kw: Optional[str] = None
    for it in items:
        d_start, d_end = _span_offsets(src, it.decl.span)
        kw = _keyword(it.decl)
        first = True
        for c in it.leading:
            c_start, c_end = _span_offsets(src, c.span)
            # a comment from inside the declaration counts as sitting just before it
            if c_start > d_start:
                c_start = c_end = d_start
            chunks.append((c_start, c_end, "comment", c))
            group_start.append(first and prev_kw is not None and kw != prev_kw)
            first = False
        end = _span_offsets(src, it.trailing.span)[1] if it.trailing is not None else d_end
        chunks.append((d_start, end, "decl", it))
        group_start.append(first and prev_kw is not None and kw != prev_kw)
        prev_kw = kw
    for c in tail:
        c_start, c_end = _span_offsets(src, c.span)
        chunks.append((c_start, c_end, "comment", c))
        group_start.append(False)

    blank_before = [False] * len(chunks)
    for i in range(1, len(chunks)):
        blank_before[i] = group_start[i] or src.blank_between(chunks[i - 1][1], chunks[i][0])

    # runs of same-keyword declarations, not separated by a blank line
    decl_lines: dict[int, list[str]] = {}
    run: list[int] = []

    def flush() -> None:
        if run:
            for idx, lines in zip(run, _render_run([chunks[j][3].decl for j in run])):
                decl_lines[idx] = lines
            run.clear()

    for i, (_, _, kind, payload) in enumerate(chunks):
        if blank_before[i]:
            flush()
        if kind != "decl":
            continue
        if run and _keyword(chunks[run[-1]][3].decl) != _keyword(payload.decl):
            flush()
        run.append(i)
    flush()

    out: list[str] = []
    for i, (_, _, kind, payload) in enumerate(chunks):
        if blank_before[i] and out:
            out.append("")
        if kind == "comment":
            out.append(payload.text.rstrip())
            continue
        lines = list(decl_lines[i])
        if payload.trailing is not None:
            lines[-1] += "  " + payload.trailing.text.rstrip()
        out += lines
    return "\n".join(out) + "\n" if out else ""


def format_text(text: str, file: str = "<string>") -> str:
    """Parse and format Pol source text (raises `PolError` on a syntax error)."""
    from .frontend.parse import parse_program

    return format_program(parse_program(text, file))


__all__ = ["format_program", "format_text", "WIDTH"]

"""Phase 1: text -> untyped AST (`ast.Program`).

The grammar is `grammar/pol.lark`; `_Builder` only builds nodes, one method per
rule. Valid text is parsed by `polc.lalr` over the LALR tables lark computes
from the grammar at build time (`grammar/pol_tables.py`, `python -m
polc.grammar.regen`), with callbacks that build the AST while parsing: no parse
tree, no lark import (`polc check` starts faster by what importing lark costs). Text that
fails there is parsed again by lark's full parser, the tree transformed as lark
does it: syntax errors become located diagnostics whose sentence comes from an
example table (`SYNTAX_EXAMPLES`) matched by parser state, as lark does for its
own grammar language (see `syntax_errors.py`), and every other failure is what
that path raises. The two paths build equal ASTs (tests/compiler/frontend/test_parser_paths.py).
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, Optional

from . import ast, lalr
from .. import errors
from ..messages import PolError, ice

if TYPE_CHECKING:  # pragma: no cover
    import lark

# A doc string or a comment (as `syntax_errors.COMMENT_OR_STRING`, which imports lark).
_COMMENT_OR_STRING = re.compile(r'"([^"\\\n]|\\.)*"|#[^\n]*')


def __getattr__(name: str):
    # The error path's names, re-exported without importing lark on the way to a valid parse.
    if name in ("SYNTAX_EXAMPLES", "syntax_label"):
        from . import syntax_errors

        return getattr(syntax_errors, name)
    if name == "lark":
        import lark

        return lark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _grammar_bytes() -> bytes:
    """grammar/pol.lark as shipped, read from beside the grammar package's modules;
    through importlib.resources only where that is not a directory (a zipped install):
    `resources.files()` alone took 4-5 ms of every `polc check`'s start-up."""
    from .. import grammar

    try:
        with open(os.path.join(os.path.dirname(grammar.__file__), "pol.lark"), "rb") as f:
            return f.read()
    except OSError:
        from importlib import resources

        return resources.files("polc.grammar").joinpath("pol.lark").read_bytes()


@functools.lru_cache(maxsize=1)
def _parser() -> "lark.Lark":
    """lark's full parser: the error path, and what syntax_errors reads parser states from."""
    from lark import Lark

    text = _grammar_bytes().decode("utf-8")
    return Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True)


def _span(file: str, meta) -> ast.Span:
    if getattr(meta, "empty", False):
        raise ice("a syntax node without a position")
    return ast.Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


def _tspan(file: str, tok) -> ast.Span:
    return ast.Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s[1:-1])


class _Builder:
    """Builds `ast` nodes from a rule's children; no meaning is decided here. Every rule method
    takes `(meta, children)`, as under lark's `v_args(meta=True)`: `meta` has the rule's `line`,
    `column`, `end_line` and `end_column`, the children are tokens (lark's, or `lalr.Token`s on
    the fast path: read through `.value`, `.type` and their positions), built values and `None`
    for an absent `[optional]` part."""

    def __init__(self, file: str):
        self.file = file

    def _s(self, meta) -> ast.Span:
        return _span(self.file, meta)

    # declarations
    def start(self, meta, children):
        return list(children)

    def policy_decl(self, meta, c):
        name, doc = c
        return ast.PolicyDecl(name.value, doc, self._s(meta), _tspan(self.file, name))

    def obs_decl(self, meta, c):
        name, typ, rng, parts, doc = c
        return ast.ObsDecl(name.value, typ, rng, doc, self._s(meta), _tspan(self.file, name), parts or ())

    def elem_ranges(self, meta, c):
        return tuple(c)

    def elem_range(self, meta, c):
        *items, rng, doc = c
        return ast.ElemRange(tuple(items), rng, doc, self._s(meta))

    def const_decl(self, meta, c):
        name, expr, doc = c
        return ast.ConstDecl(name.value, expr, doc, self._s(meta), _tspan(self.file, name))

    def weight_decl(self, meta, c):
        name, typ, rng, init, prior, doc = c
        return ast.WeightDecl(name.value, typ, rng, init, doc, self._s(meta), _tspan(self.file, name), prior)

    def latent_decl(self, meta, c):
        name, typ, expr, doc = c
        return ast.LatentDecl(name.value, typ, expr, doc, self._s(meta), _tspan(self.file, name))

    def action_decl(self, meta, c):
        name, typ, rng, expr, noise, doc = c
        return ast.ActionDecl(name.value, typ, rng, expr, noise, doc, self._s(meta), _tspan(self.file, name))

    def state_decl(self, meta, c):
        name, typ, rng, init, update, doc = c
        return ast.StateDecl(name.value, typ, rng, init, update, doc, self._s(meta), _tspan(self.file, name))

    def expect_decl(self, meta, c):
        claim, doc = c
        return ast.ExpectDecl(claim, doc, self._s(meta))

    def doc(self, meta, c):
        return _unescape(c[0].value)

    # types, ranges, noise
    def type(self, meta, c):
        base, dims = c
        return ast.TypeSpec(base.value, dims or (), self._s(meta))

    def dims(self, meta, c):
        if len(c) > MAX_NDIM:
            raise PolError([errors.limit_exceeded(self._s(meta), f"This type has {len(c)} dimensions",
                                                  f"{MAX_NDIM} dimensions")])
        for t in c:  # int() of a 4,301-digit literal raises; any dimension this long is too large anyway
            if t.type == "INT" and len(t.value.lstrip("0")) > 9:
                raise PolError([errors.limit_exceeded(_tspan(self.file, t), f"This dimension has {len(t.value)} digits",
                                                      "65536 elements per value")])
        return tuple(int(t.value) if t.type == "INT" else ast.Name(t.value, _tspan(self.file, t)) for t in c)

    def dim(self, meta, c):
        return c[0]

    def bound(self, meta, c):
        sign, tok = c
        value = float("inf") if tok.type == "INF" else float(tok.value)
        if sign is not None and sign.value == "-":
            value = -value
        text = (sign.value if sign is not None else "") + tok.value
        return ast.Bound(value, text, self._s(meta))

    def range_in(self, meta, c):
        return ast.Range(c[0], c[1], self._s(meta))

    def range_lower(self, meta, c):
        return ast.Range(c[0], None, self._s(meta))

    def range_upper(self, meta, c):
        return ast.Range(None, c[0], self._s(meta))

    def noise(self, meta, c):
        name, args = c
        pos, kw = args if args is not None else ((), ())
        return ast.Noise(name.value, pos, kw, self._s(meta), _tspan(self.file, name))

    def prior(self, meta, c):
        name, args = c
        pos, kw = args if args is not None else ((), ())
        return ast.Prior(name.value, pos, kw, self._s(meta), _tspan(self.file, name))

    # intents
    def claim_mono(self, meta, c):
        target, direction, var = c
        return ast.MonoClaim(ast.Name(target.value, _tspan(self.file, target)), direction.value,
                             ast.Name(var.value, _tspan(self.file, var)), self._s(meta))

    def claim_cmp(self, meta, c):
        target, op, bound = c
        lo, hi = (bound, None) if op.value in (">=", ">") else (None, bound)
        return ast.RangeClaim(ast.Name(target.value, _tspan(self.file, target)), op.value, lo, hi, self._s(meta))

    def claim_in(self, meta, c):
        target, lo, hi = c
        return ast.RangeClaim(ast.Name(target.value, _tspan(self.file, target)), "in", lo, hi, self._s(meta))

    # expressions
    def ifelse(self, meta, c):
        return ast.IfElse(c[0], c[1], c[2], self._s(meta))

    def _bin(self, meta, op: str, left, right, op_span: Optional[ast.Span] = None):
        span = self._s(meta)
        return ast.Binary(op, left, right, span, op_span or span)

    def or_(self, meta, c):
        return self._bin(meta, "or", c[0], c[1])

    def and_(self, meta, c):
        return self._bin(meta, "and", c[0], c[1])

    def not_(self, meta, c):
        return ast.Unary("not", c[0], self._s(meta))

    def compare(self, meta, c):
        return self._bin(meta, c[1].value, c[0], c[2], _tspan(self.file, c[1]))

    def binary(self, meta, c):
        return self._bin(meta, c[1].value, c[0], c[2], _tspan(self.file, c[1]))

    def pow(self, meta, c):
        return self._bin(meta, "^", c[0], c[1])

    def neg(self, meta, c):
        return ast.Unary("-", c[0], self._s(meta))

    def pos(self, meta, c):
        return ast.Unary("+", c[0], self._s(meta))

    def subscript(self, meta, c):
        return ast.Subscript(c[0], tuple(c[1:]), self._s(meta))

    def index_at(self, meta, c):
        return ast.At(c[0], self._s(meta))

    def index_slice(self, meta, c):
        return ast.Slice(c[0], c[1], self._s(meta))

    def number(self, meta, c):
        return ast.Number(float(c[0].value), c[0].value, self._s(meta))

    def true(self, meta, c):
        return ast.BoolLit(True, self._s(meta))

    def false(self, meta, c):
        return ast.BoolLit(False, self._s(meta))

    def name(self, meta, c):
        return ast.Name(c[0].value, self._s(meta))

    def call(self, meta, c):
        name, args = c
        pos, kw = args if args is not None else ((), ())
        return ast.Call(name.value, pos, kw, self._s(meta), _tspan(self.file, name))

    def vector(self, meta, c):
        return ast.Vector(tuple(x for x in c if x is not None), self._s(meta))

    def callargs(self, meta, c):
        pos: tuple = ()
        kw: tuple = ()
        for part in c:
            if part and isinstance(part[0], ast.Kwarg):
                kw = tuple(part)
            elif part:
                pos = tuple(part)
        return pos, kw

    def posargs(self, meta, c):
        return c[0] + [c[1]] if len(c) == 2 else [c[0]]

    def kwargs(self, meta, c):
        return list(c)

    def kwarg(self, meta, c):
        name, value = c
        return ast.Kwarg(name.value, value, self._s(meta), _tspan(self.file, name))




def _comments(text: str, file: str) -> tuple[ast.Comment, ...]:
    """Comments are ignored by the grammar; `polc fmt` keeps them, so collect them here."""
    out = []
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    for m in _COMMENT_OR_STRING.finditer(text):
        if m.group(0).startswith("#"):
            import bisect

            line = bisect.bisect_right(line_starts, m.start())
            col = m.start() - line_starts[line - 1] + 1
            out.append(ast.Comment(m.group(0).rstrip(), ast.Span(file, line, col, line, col + len(m.group(0)))))
    return tuple(out)


# Every phase walks expressions recursively, a few Python frames per level;
# a 500-term sum `x + x + ...` nests 500 levels and would exhaust the stack.
MAX_DEPTH = 200
# numpy refuses arrays of more than 64 dimensions; no policy needs a tenth of that.
MAX_NDIM = 32


def _too_deep(tree: "lark.Tree"):
    """Where the expression nested deeper than MAX_DEPTH starts (the child of its
    declaration), or None. Iterative: the tree may be deeper than the stack."""
    import lark

    todo = [(tree, 0, tree)]
    while todo:
        node, depth, root = todo.pop()
        if depth > MAX_DEPTH:
            return root.meta
        todo.extend((c, depth + 1, c if depth < 2 else root) for c in node.children if isinstance(c, lark.Tree))
    return None


# Limits no real policy meets (the largest example is a few kilobytes), checked before lark
# builds a tree, so that hostile input is refused in linear time with a located diagnostic.
MAX_SOURCE_CHARS = 1 << 20
MAX_DECL_TOKENS = 10_000
_DECL_KEYWORD = frozenset(("policy", "obs", "weight", "latent", "action", "expect", "const"))
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*|[A-Za-z_][A-Za-z_0-9]*|\n|[^\s]')


def normalize_newlines(text: str) -> str:
    """Line ends as editors count them: `\r\n`, `\n` and a lone `\r` each end one line."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _prescan(text: str, file: str) -> None:
    """Refuse what would make lark (or a later phase) slow or deep: brackets nested deeper
    than MAX_DEPTH, a declaration of more than MAX_DECL_TOKENS tokens. One linear pass."""
    line, line_start, depth, tokens, decl_at = 1, 0, 0, 0, (1, 1)
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if tok == "\n":
            line, line_start = line + 1, m.end()
            continue
        col = m.start() - line_start + 1
        if tok in _DECL_KEYWORD:
            tokens, decl_at = 0, (line, col)
        tokens += 1
        if tok in "([":
            depth += 1
            if depth > MAX_DEPTH:
                raise PolError([errors.too_deep(ast.Span(file, line, col, line, col + 1), MAX_DEPTH)], text)
        elif tok in ")]":
            depth = max(0, depth - 1)
        if tokens > MAX_DECL_TOKENS:
            at = ast.Span(file, decl_at[0], decl_at[1], decl_at[0], decl_at[1] + 1)
            raise PolError([errors.limit_exceeded(at, f"This declaration has more than {MAX_DECL_TOKENS} tokens",
                                                  f"{MAX_DECL_TOKENS} tokens per declaration")], text)


def parse_program(text: str, file: str = "<string>") -> ast.Program:
    """Parse Pol source text. Raises `PolError` with a located diagnostic on bad syntax."""
    if text.startswith("\ufeff"):  # a byte-order mark some editors write; not a column
        text = text[1:]
    text = normalize_newlines(text)
    if len(text) > MAX_SOURCE_CHARS:
        raise PolError([errors.limit_exceeded(ast.Span(file, 1, 1, 1, 2), f"This file has {len(text)} characters",
                                              f"{MAX_SOURCE_CHARS} characters (1 MiB) per file")], text)
    _prescan(text, file)
    try:
        decls = _parse_fast(text, file)
    except Exception:  # noqa: BLE001  whatever went wrong, the full path says it as it always has
        decls = None
    if decls is None:
        decls = _parse_full(text, file)
    return ast.Program(tuple(decls), _comments(text, file), file, text)


def _parse_full(text: str, file: str) -> list:
    """lark's full parser, its parse tree, then the builder over the tree: the path every
    syntax error, over-deep expression and builder error is reported from."""
    from lark.exceptions import UnexpectedInput, VisitError

    from .syntax_errors import syntax_diagnostic

    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        raise PolError([syntax_diagnostic(e, text, file, _parser())], text) from None
    deep = _too_deep(tree)
    if deep is not None:
        raise PolError([errors.too_deep(ast.Span(file, deep.line, deep.column, deep.line, deep.column + 1),
                                        MAX_DEPTH)], text)
    try:
        return _tree_builder()(file).transform(tree)
    except VisitError as e:  # lark wraps whatever the transformer raised
        if isinstance(e.orig_exc, PolError):
            raise PolError(e.orig_exc.diagnostics, text) from None
        raise e.orig_exc from None


@functools.lru_cache(maxsize=1)
def _tree_builder() -> type:
    """A lark Transformer that hands each tree node to `_Builder`'s method for its rule."""
    from lark import Transformer
    from lark.exceptions import VisitError

    class TreeBuilder(Transformer):
        def __init__(self, file: str):
            super().__init__()
            self.builder = _Builder(file)

        def _call_userfunc(self, tree, new_children=None):
            # What `v_args(meta=True)` does, without the wrapper lark builds on every attribute
            # lookup (functools.update_wrapper per node: a third of the time of a 20,000-latent file).
            children = new_children if new_children is not None else tree.children
            f = getattr(self.builder, tree.data, None)
            if f is None:
                return self.__default__(tree.data, children, tree.meta)
            try:
                return f(tree.meta, children)
            except Exception as e:
                raise VisitError(tree.data, tree, e) from e

    return TreeBuilder


# ---- the fast path: polc.lalr over the generated tables, the AST built while parsing ------


class _Node:
    """A built value on the LALR parser's value stack, with where its text starts and ends and
    the height of the parse tree lark would have built under it (for MAX_DEPTH). The extent is
    lark's `propagate_positions` container: it includes the brackets a `?rule` drops, so
    `(a + b) * c` starts at `(` while `a + b` itself starts at `a`. Passed to `_Builder` as its
    `meta`."""

    __slots__ = ("value", "line", "column", "end_line", "end_column", "height")
    empty = False

    def __init__(self, first, last, height: int):
        self.line, self.column = first.line, first.column
        self.end_line, self.end_column = last.end_line, last.end_column
        self.height = height


class _NoPosition:
    empty = True  # a rule that matched no text (an empty program's `start`)


class _Unsupported(Exception):
    """The fast path cannot build this (a rule without a builder method): use the full path."""


def _callback(plan, builder: _Builder):
    name, splice, expand1, keep, after = plan
    method = None if splice else getattr(builder, name, None)
    if expand1 and after == 0 and keep == ((0, False, 0),):
        return _only_child  # `?expr: ifelse` and the like: nothing to build

    def reduce(children):
        if not children:
            if method is None:
                raise _Unsupported(name)
            node = _Node.__new__(_Node)
            node.value, node.height = method(_NoPosition, []), 1
            return node
        kept, height = [], 0
        for i, spliced, none in keep:
            if none:
                kept += [None] * none
            c = children[i]
            if spliced:  # LALR never reuses a reduced value: extend the repetition's own list
                if kept:
                    kept += c.value
                else:
                    kept = c.value
            else:
                kept.append(c)
                if type(c) is not _Node:
                    continue
            if c.height > height:
                height = c.height
        if after:
            kept += [None] * after
        if expand1 and len(kept) == 1:
            only = kept[0]
            if type(only) is not _Node or (len(children) == 1 and children[0] is only):
                return only
            node = _Node(children[0], children[-1], only.height)  # `( expr )`: the brackets count
            node.value = only.value
            return node
        if splice:  # a `_rule` (a `("," x)*` repetition): its children join its parent's
            node = _Node(children[0], children[-1], height)
            node.value = kept
            return node
        if method is None:
            raise _Unsupported(name)
        node = _Node(children[0], children[-1], height + 1)
        node.value = method(node, [c.value if type(c) is _Node else c for c in kept])
        return node

    return reduce


def _only_child(children):
    return children[0]


@functools.lru_cache(maxsize=1)
def _tables() -> Optional[lalr.Tables]:
    """The LALR tables generated from the grammar (`grammar/pol_tables.py`), or None when they
    are not of the grammar shipped beside them (pol.lark edited, the tables not yet
    regenerated): then lark's full parser parses everything, slower, never wrong."""
    from ..grammar import pol_tables

    if getattr(pol_tables, "POLC_GRAMMAR", None) != _grammar_bytes().decode("utf-8"):
        return None
    return lalr.Tables(pol_tables)


def _parse_fast(text: str, file: str) -> Optional[list]:
    """The declarations, or None where the full path must decide (an error, or an expression
    nested so deep that MAX_DEPTH may be exceeded)."""
    tables = _tables()
    if tables is None:
        return None
    builder = _Builder(file)
    result = tables.parse(text, [_callback(plan, builder) for plan in tables.plans])
    if result.height > MAX_DEPTH:  # lark's tree would have a node MAX_DEPTH deep, or nearly
        return None
    return result.value


def parse_file(path: str) -> ast.Program:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return parse_program(text, path)


__all__ = ["parse_program", "parse_file", "SYNTAX_EXAMPLES", "syntax_label", "lark"]

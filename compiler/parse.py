"""Phase 1: text -> untyped AST (`ast.Program`).

The grammar is `grammar/pol.lark`; a lark Transformer only builds nodes.
Syntax errors become located diagnostics whose sentence comes from an example
table matched with `UnexpectedInput.match_examples`, as lark does for its own
grammar language.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Optional

import lark
from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from . import ast, errors
from .diagnostics import PolError, ice

# Readable names for the terminals lark reports as expected.
_TOKEN_LABELS = {
    "NAME": "a name", "NUMBER": "a number", "INT": "an integer", "STRING": "a doc string",
    "BASETYPE": "a type (`real` or `bool`)", "MONOTONE": "`increasing` or `decreasing`",
    "COMPARE": "a comparison", "CMP_CLAIM": "`>=`, `<=`, `>` or `<`", "ADDOP": "`+` or `-`",
    "MULOP": "`*` or `/`", "SIGN": "a sign", "INF": "`inf`", "$END": "the end of the file",
    "LPAR": "`(`", "RPAR": "`)`", "LSQB": "`[`", "RSQB": "`]`", "COMMA": "`,`", "COLON": "`:`",
    "SEMICOLON": "`;`", "EQUAL": "`=`", "TILDE": "`~`", "MINUS": "`-`", "PLUS": "`+`",
    "CIRCUMFLEX": "`^`", "MORETHAN": "`>`", "LESSTHAN": "`<`", "__ANON_0": "`>=`", "__ANON_1": "`<=`",
}

# One sentence for each kind of syntax error, taught by example (lark's
# `match_examples`): each label lists programs that fail in that way.
SYNTAX_EXAMPLES: dict[str, list[str]] = {
    "A declaration must start with `policy`, `obs`, `weight`, `latent`, `action` or `expect`.": [
        "x = 1",
        "obs a : real\nfoo",
        "latent a = 1 \"d\" \"e\"",
    ],
    "An observation needs a type after its name, like `obs speed : real in [0, 1]`.": [
        "obs speed",
        "obs speed real",
        "obs speed :",
    ],
    "A weight needs a type and an initial value, like `weight k : real >= 0 = 0.5`.": [
        "weight k",
        "weight k : real",
        "weight k : real >= 0",
        "weight k = 1",
    ],
    "A latent needs `=` and an expression, like `latent err = target - speed`.": [
        "latent e",
        "latent e target",
        "latent e =",
    ],
    "An action needs a type and `=` with an expression, like `action gas : real in [0, 1] = 0.5`.": [
        "action a",
        "action a = 1",
        "action a : real",
        "action a : real in [0, 1]",
    ],
    "A range is written `in [lo, hi]`, `>= lo` or `<= hi`, with numbers as bounds.": [
        "obs a : real in 0, 1",
        "obs a : real in [0 1]",
        "obs a : real in [0, x]",
        "obs a : real >= x",
        "obs a : real in [0, 1",
    ],
    "An array type lists integer sizes, like `real[12, 4]`.": [
        "obs a : real[",
        "obs a : real[x]",
        "obs a : real[1.5]",
        "obs a : real[3,]",
    ],
    "An intent is `expect NAME increasing in NAME`, `expect NAME >= number` or `expect NAME in [lo, hi]`.": [
        "expect",
        "expect a",
        "expect a increasing",
        "expect a increasing b",
        "expect a >= b",
        "expect a == 1",
    ],
    "This expression is incomplete: an operator is missing its right-hand side.": [
        "latent a = 1 +",
        "latent a = 1 *",
        "latent a = 1 + * 2",
        "latent a = b ^",
        "latent a = x and",
        "latent a = 1 <",
    ],
    "A parenthesis, bracket or call is not closed.": [
        "latent a = (1 + 2",
        "latent a = f(1, 2",
        "latent a = [1, 2",
        "latent a = x[0",
    ],
    "Two values stand side by side with no operator between them.": [
        "latent a = 1 2",
        "latent a = x y",
        "latent a = (1) (2)",
    ],
    "`if` needs both `then` and `else`: `if c then a else b`.": [
        "latent a = if x > 0 then 1",
        "latent a = if x > 0 1 else 2",
        "latent a = if x then",
    ],
    "Action noise is written `~ normal(std = EXPR)`.": [
        "action a : real = 1 ~",
        "action a : real = 1 ~ normal",
    ],
    "Keyword arguments come after the positional ones, like `mlp(x, y; hidden = [64, 64])`.": [
        "latent a = f(hidden = 1, x)",
        "latent a = f(x; y)",
    ],
    "Comparisons do not chain; combine them with `and`, like `0 < x and x < 1`.": [
        "latent a = 0 < x < 1",
    ],
    "A name was expected here; keywords like `in`, `if` or `real` cannot be used as names.": [
        "latent in = 1",
        "obs real : real",
        "weight if : real = 1",
        "latent a = 1 + in",
    ],
}


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    text = resources.files("polc.grammar").joinpath("pol.lark").read_text()
    return Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True)


def _span(file: str, meta) -> ast.Span:
    if getattr(meta, "empty", False):
        raise ice("a syntax node without a position")
    return ast.Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


def _tspan(file: str, tok: Token) -> ast.Span:
    return ast.Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s[1:-1])


@v_args(meta=True)
class _Builder(Transformer):
    """Builds `ast` nodes from the parse tree; no meaning is decided here."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _s(self, meta) -> ast.Span:
        return _span(self.file, meta)

    # declarations
    def start(self, meta, children):
        return list(children)

    def policy_decl(self, meta, c):
        name, doc = c
        return ast.PolicyDecl(str(name), doc, self._s(meta), _tspan(self.file, name))

    def obs_decl(self, meta, c):
        name, typ, rng, doc = c
        return ast.ObsDecl(str(name), typ, rng, doc, self._s(meta), _tspan(self.file, name))

    def weight_decl(self, meta, c):
        name, typ, rng, init, doc = c
        return ast.WeightDecl(str(name), typ, rng, init, doc, self._s(meta), _tspan(self.file, name))

    def latent_decl(self, meta, c):
        name, typ, expr, doc = c
        return ast.LatentDecl(str(name), typ, expr, doc, self._s(meta), _tspan(self.file, name))

    def action_decl(self, meta, c):
        name, typ, rng, expr, noise, doc = c
        return ast.ActionDecl(str(name), typ, rng, expr, noise, doc, self._s(meta), _tspan(self.file, name))

    def expect_decl(self, meta, c):
        claim, doc = c
        return ast.ExpectDecl(claim, doc, self._s(meta))

    def doc(self, meta, c):
        return _unescape(str(c[0]))

    # types, ranges, noise
    def type(self, meta, c):
        base, dims = c
        return ast.TypeSpec(str(base), dims or (), self._s(meta))

    def dims(self, meta, c):
        return tuple(int(t) for t in c)

    def bound(self, meta, c):
        sign, tok = c
        value = float("inf") if tok.type == "INF" else float(tok)
        if sign is not None and str(sign) == "-":
            value = -value
        text = (str(sign) if sign is not None else "") + str(tok)
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
        return ast.Noise(str(name), pos, kw, self._s(meta), _tspan(self.file, name))

    # intents
    def claim_mono(self, meta, c):
        target, direction, var = c
        return ast.MonoClaim(ast.Name(str(target), _tspan(self.file, target)), str(direction),
                             ast.Name(str(var), _tspan(self.file, var)), self._s(meta))

    def claim_cmp(self, meta, c):
        target, op, bound = c
        lo, hi = (bound, None) if str(op) in (">=", ">") else (None, bound)
        return ast.RangeClaim(ast.Name(str(target), _tspan(self.file, target)), str(op), lo, hi, self._s(meta))

    def claim_in(self, meta, c):
        target, lo, hi = c
        return ast.RangeClaim(ast.Name(str(target), _tspan(self.file, target)), "in", lo, hi, self._s(meta))

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
        return self._bin(meta, str(c[1]), c[0], c[2], _tspan(self.file, c[1]))

    def binary(self, meta, c):
        return self._bin(meta, str(c[1]), c[0], c[2], _tspan(self.file, c[1]))

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
        return ast.Number(float(c[0]), str(c[0]), self._s(meta))

    def true(self, meta, c):
        return ast.BoolLit(True, self._s(meta))

    def false(self, meta, c):
        return ast.BoolLit(False, self._s(meta))

    def name(self, meta, c):
        return ast.Name(str(c[0]), self._s(meta))

    def call(self, meta, c):
        name, args = c
        pos, kw = args if args is not None else ((), ())
        return ast.Call(str(name), pos, kw, self._s(meta), _tspan(self.file, name))

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
        return list(c)

    def kwargs(self, meta, c):
        return list(c)

    def kwarg(self, meta, c):
        name, value = c
        return ast.Kwarg(str(name), value, self._s(meta), _tspan(self.file, name))


_COMMENT_OR_STRING = re.compile(r'"([^"\\\n]|\\.)*"|#[^\n]*')


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


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "the end of the file"
    return f"`{tok}`"


def _syntax_diagnostic(e: UnexpectedInput, text: str, file: str):
    parser = _parser()
    if isinstance(e, UnexpectedCharacters):
        line, col = e.line, e.column
        char = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        if char == '"':
            end = text.find("\n", e.pos_in_stream)
            end = len(text) if end < 0 else end
            return errors.unterminated_string(ast.Span(file, line, col, line, col + (end - e.pos_in_stream)))
        if char in "[]()=,:;~+-*/^<>.0123456789" or char.isalnum() or char == "_":
            # A legal character in an illegal place: a token-level error in disguise.
            label = e.match_examples(parser.parse, SYNTAX_EXAMPLES, use_accepts=True) or "Unexpected input."
            expected = [_TOKEN_LABELS.get(t, f"`{t}`") for t in (e.allowed or ())]
            return errors.syntax_error(ast.Span(file, line, col, line, col + 1), f"`{char}`", label, expected)
        return errors.bad_character(ast.Span(file, line, col, line, col + 1), char)
    label = e.match_examples(parser.parse, SYNTAX_EXAMPLES, use_accepts=True) or "Unexpected input."
    if isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        lines = text.splitlines() or [""]
        line = len(lines)
        col = len(lines[-1]) + 1
        span = ast.Span(file, line, max(1, col - 1) if lines[-1] else 1, line, max(2, col))
        found = "the end of the file"
        expected = getattr(e, "expected", None) or getattr(e, "accepts", None) or ()
    else:
        tok = e.token
        span = ast.Span(file, tok.line, tok.column, tok.end_line or tok.line,
                        tok.end_column or tok.column + max(1, len(str(tok))))
        found = _describe(tok)
        expected = e.accepts or e.expected or ()
    shown = [_TOKEN_LABELS.get(t, f"`{t}`") for t in expected if not t.startswith("__ANON") or t in _TOKEN_LABELS]
    return errors.syntax_error(span, found, label, shown if len(shown) <= 8 else [])


def parse_program(text: str, file: str = "<string>") -> ast.Program:
    """Parse Pol source text. Raises `PolError` with a located diagnostic on bad syntax."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        raise PolError([_syntax_diagnostic(e, text, file)], text) from None
    try:
        decls = _Builder(file).transform(tree)
    except VisitError as e:  # lark wraps whatever the transformer raised
        raise e.orig_exc from None
    return ast.Program(tuple(decls), _comments(text, file), file, text)


def parse_file(path: str) -> ast.Program:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return parse_program(text, path)


__all__ = ["parse_program", "parse_file", "SYNTAX_EXAMPLES", "lark"]

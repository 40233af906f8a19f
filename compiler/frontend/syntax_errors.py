"""Syntax errors: from lark's exception to a located diagnostic with one clear sentence.

The sentence comes from an example table (`SYNTAX_EXAMPLES`: each label lists
programs that fail that way), matched by parser state as lark's
`UnexpectedInput.match_examples` does for lark's own grammar language, and,
for the states no example covers, from the classes of the tokens involved.
Token names are shown as the text a person types (`=`, never `EQUAL` or
`__ANON_0`). Used by `parse.py` only.
"""

from __future__ import annotations

import functools
import re
from typing import Optional

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from . import ast
from .. import errors
from ..messages import Diagnostic, ice

# A doc string or a comment; brackets and keywords inside them are not code.
COMMENT_OR_STRING = re.compile(r'"([^"\\\n]|\\.)*"|#[^\n]*')

# Readable names for the terminals defined by a regular expression; a terminal
# for a literal string (`=`, `in`, ...) is shown as that string, whatever
# internal name lark gave it (`EQUAL`, `__ANON_0`, ...): see `token_label`.
_TOKEN_LABELS = {
    "NAME": "a name", "NUMBER": "a number", "INT": "an integer", "STRING": "a doc string",
    "BASETYPE": "a type (`real` or `bool`)", "MONOTONE": "`increasing` or `decreasing`",
    "COMPARE": "a comparison", "CMP_CLAIM": "`>=`, `<=`, `>` or `<`", "ADDOP": "`+` or `-`",
    "MULOP": "`*` or `/`", "SIGN": "a sign", "$END": "the end of the file",
}

# One sentence for each kind of syntax error, taught by example (lark's
# `match_examples`): each label lists programs that fail in that way.
SYNTAX_EXAMPLES: dict[str, list[str]] = {
    "A declaration must start with `policy`, `obs`, `weight`, `latent`, `action` or `expect`.": [
        "x = 1",
    ],
    "A declaration takes one doc string, at its end.": [
        "latent a = 1 \"d\" \"e\"",
        "obs a : real \"d\" \"e\"",
    ],
    "An observation needs a type after its name, like `obs speed : real in [0, 1]`.": [
        "obs speed",
        "obs speed real",
        "obs speed :",
        "obs a : : real",
        "obs a : in [0, 1]",
    ],
    "A weight needs a type and an initial value, like `weight k : real >= 0 = 0.5`.": [
        "weight k",
        "weight k : real",
        "weight k : real >= 0",
        "weight k = 1",
        "weight k : real 0.5",
        "weight k : real >= 0 0.5",
        "weight k : real in [0, 1] 0.5",
        "weight k : : real = 1",
        "weight k : >= 0 = 1",
        "weight k : real[3] [1, 2, 3]",
    ],
    "A latent needs `=` and an expression, like `latent err = target - speed`.": [
        "latent e",
        "latent e target",
        "latent e =",
        "latent e : real",
        "latent e : = 1",
    ],
    "An action needs a type and `=` with an expression, like `action gas : real in [0, 1] = 0.5`.": [
        "action a",
        "action a = 1",
        "action a : real",
        "action a : real in [0, 1]",
        "action a : real in [0, 1] clip(x, 0, 1)",
        "action a : real x",
        "action a : : real = 1",
        "action a : in [0, 1] = 1",
    ],
    "A state needs a type, `=` with its initial value and `next` with its update, like "
    "`state integ : real in [-1, 1] = 0 next integ + err`.": [
        "state s",
        "state s = 0 next s",
        "state s : real",
        "state s : real = 0",
        "state s : real in [0, 1] = 0",
        "state s : real 0 next s",
        "state s : real = 0 s",
        "state s : real = 0 next",
    ],
    "An observation has no `=`: its value comes from the environment (a fitted constant is a `weight`).": [
        "obs a : real = 1",
        "obs a : real in [0, 1] = 1",
        "obs a : real[2] = [1, 2]",
    ],
    "A range goes after the type and before `=`, like `weight k : real in [0, 2] = 1`; a latent states one "
    "with `expect NAME in [lo, hi]`.": [
        "weight k : real = 1 in [0, 2]",
        "latent a = x in [0, 1]",
    ],
    "Equality is tested with `==`; a single `=` only gives a declaration its value.": [
        "latent a = x = 1",
        "latent a = x > 0 and y = 1",
    ],
    "A range is written `in [lo, hi]`, `>= lo` or `<= hi`, with numbers as bounds.": [
        "obs a : real in 0, 1",
        "obs a : real in [0 1]",
        "obs a : real in [0, x]",
        "obs a : real >= x",
        "obs a : real in [0, 1",
        "obs a : real in [[0, 1]]",
        "obs a : real in [, 1]",
        "obs a : real in [-, 1]",
        "obs a : real in [0, ]",
        "obs a : real in in [0, 1]",
        "weight k : real >= = 1",
        "weight k : real <= = 1",
        "obs a : real in [0, 1 1]",
        "obs a : real in [-1 1]",
        "obs a : real[3] [0, 1]",
    ],
    "An array type lists integer sizes or constants, like `real[12, 4]` or `real[lookahead, 4]`; a range goes after the type: `real in [-1, 1]`.": [
        "obs a : real[",
        "obs a : real[x + 1]",
        "obs a : real[1.5]",
        "obs a : real[3,]",
        "obs a : real[-1, 1]",
        "obs a : real [0, 1.5]",
    ],
    "The ranges of an observation's parts are `{[i] in [lo, hi], [a:b] >= lo}`: an index or slice of it, then a range, then an optional doc string.": [
        "obs s : real[3] {",
        "obs s : real[3] {}",
        "obs s : real[3] {0 in [0, 1]}",
        "obs s : real[3] {[0] [0, 1]}",
        "obs s : real[3] {[0] in [0, 1]",
        "obs s : real[3] {[0] in [0, 1] [1]",
    ],
    "A constant is `const NAME = EXPR`, e.g. `const lookahead = 6`.": [
        "const",
        "const n",
        "const n 3",
        "const = 3",
    ],
    "An intent is `expect y increasing in x`, `expect y >= 0` or `expect y in [lo, hi]`, about a latent or an action `y`.": [
        "expect",
        "expect a",
        "expect a increasing",
        "expect a increasing b",
        "expect a >= b",
        "expect a == 1",
        "expect a in b",
        "expect a in in [0, 1]",
        "expect a increasing in",
        "expect a decreasing in 1",
        "expect a >= 0 and a <= 1",
        "expect a increasing in x when y",
        "expect a increasing in x and y",
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
        "latent a = 1 if x > 0 else 2",
        "latent a = x then 1 else 2",
        "latent a = x if c else y",
        "latent a = if c x else y",
    ],
    "Action noise is written `~ normal(std = EXPR)`.": [
        "action a : real = 1 ~",
        "action a : real = 1 ~ normal",
    ],
    "A weight's prior follows its initial value, like `weight k : real >= 0 = 0.5 ~ normal(0.5, 0.1)`.": [
        "weight k : real >= 0 ~ normal(0.5, 0.1) = 0.5",
        "weight k : real ~ normal(0, 1) = 0.5",
        "weight k : real = 0.5 ~",
        "weight k : real = 0.5 ~ normal",
    ],
    "Keyword arguments come after the positional ones, like `mlp(x, y; hidden = [64, 64])`.": [
        "latent a = f(hidden = 1, x)",
        "latent a = f(x; y)",
    ],
    "Powers are written with `^`, like `x ^ 2`.": [
        "latent a = x ** 2",
    ],
    "Pol has no `//`; divide with `/` (and `sign`, `abs`, `min`, `max` for the rest).": [
        "latent a = x // 2",
    ],
    "Comparisons do not chain; combine them with `and`, like `0 < x and x < 1`.": [
        "latent a = 0 < x < 1",
    ],
    "A name was expected here; keywords like `in`, `if` or `real` cannot be used as names.": [
        "latent in = 1",
        "obs real : real",
        "weight if : real = 1",
        "latent a = 1 + in",
        "obs : real",
        "weight : real = 1",
        "latent = 1",
        "action : real = 1",
        'policy "doc"',
    ],
}


# ---- matching ------------------------------------------------------------------------
#
# lark's `UnexpectedInput.match_examples` compares whole parser states, stack
# depth included, so `x y` inside a call would not match the example `x y` in a
# latent; and it crashes formatting a debug message when two states match with
# different lookaheads (lark 1.3.1). So the examples are matched here, by the
# LALR state on top of the stack, preferring an example with the same lookahead
# set and the same kind of unexpected token; heuristics on the token classes label the
# states no example covers.

_DECL_KEYWORDS = frozenset({"POLICY", "OBS", "WEIGHT", "LATENT", "ACTION", "EXPECT", "CONST", "STATE"})
_OPERATORS = frozenset({"ADDOP", "MULOP", "COMPARE", "CIRCUMFLEX", "AND", "OR"})
_VALUE_START = frozenset({"NAME", "NUMBER", "LPAR", "LSQB", "TRUE", "FALSE", "IF", "NOT", "MINUS", "PLUS"})
_CLOSERS = frozenset({"RPAR", "RSQB"})
_BOUND_START = frozenset({"SIGN", "NUMBER", "INF", "MINUS", "PLUS"})

_DECL_LABEL = next(iter(SYNTAX_EXAMPLES))
_NAME_LABEL = next(k for k in SYNTAX_EXAMPLES if k.startswith("A name"))
_RANGE_LABEL = next(k for k in SYNTAX_EXAMPLES if k.startswith("A range is written"))
_EQUALITY_LABEL = next(k for k in SYNTAX_EXAMPLES if k.startswith("Equality"))
_IF_LABEL = next(k for k in SYNTAX_EXAMPLES if k.startswith("`if`"))
_DECL_LABELS = {kw: next(k for k in SYNTAX_EXAMPLES if k.startswith(start)) for kw, start in (
    ("obs", "An observation needs"), ("weight", "A weight needs"), ("latent", "A latent needs"),
    ("action", "An action needs"))}
_SLASH_COMMENT = "Comments start with `#`, not `//`."
_SEMICOLON = "Declarations need no `;` between them: start each on its own line."
_SLICE = "A slice like `2:6` can only appear inside an index, like `x[2:6, 0]`."
_STRAY_COMMA = "This comma is outside any call or bracket; a `(` may be missing, like `clip(x, 0, 1)`."
_LEFT_OVER = "The declaration before this is already complete; remove what is left over or check its brackets."
_SIDE_BY_SIDE = "Two values stand side by side with no operator between them."
_INCOMPLETE = "This expression is incomplete: an operator is missing its right-hand side."
_NOT_CLOSED = "A parenthesis, bracket or call is not closed."
_NO_EXPR = "An expression is missing here."
_GENERIC = "This is not valid Pol syntax here."


def _state(e: UnexpectedInput) -> object:
    s = e.state
    return getattr(s, "position", s)


def _token_type(e: UnexpectedInput) -> Optional[str]:
    tok = getattr(e, "token", None)
    return tok.type if tok is not None else None


def _token_text(e: UnexpectedInput) -> Optional[str]:
    tok = getattr(e, "token", None)
    return str(tok) if tok is not None else None


def _token_matters(acc: frozenset) -> bool:
    """Whether the parser was after a value, expecting one, or after a complete declaration:
    there, what comes next decides the mistake (`x y`, `x = 1`, `x then`, `x;` all fail in one state)."""
    return bool(acc & (_OPERATORS | _DECL_KEYWORDS)) or len(acc & _VALUE_START) >= 4


def _token_class(tok: Optional[str]) -> Optional[str]:
    """Tokens that a syntax example may stand for one another."""
    for name, members in (("value", _VALUE_START), ("operator", _OPERATORS), ("closer", _CLOSERS),
                          ("end", _DECL_KEYWORDS | {"$END"})):
        if tok in members:
            return name
    return tok


def _accepts(e: UnexpectedInput) -> frozenset:
    if isinstance(e, UnexpectedToken):
        return frozenset(e.accepts or e.expected or ())
    return frozenset(getattr(e, "allowed", None) or ())


@functools.lru_cache(maxsize=1)
def _example_table(parser: Lark) -> tuple[tuple[object, Optional[str], Optional[str], frozenset, str], ...]:
    rows = []
    for label, examples in SYNTAX_EXAMPLES.items():
        for example in examples:
            try:
                parser.parse(example)
            except UnexpectedInput as e:
                rows.append((_state(e), _token_type(e), _token_text(e), _accepts(e), label))
            else:
                raise ice(f"the syntax example {example!r} parses")
    return tuple(rows)


def syntax_label(e: UnexpectedInput, text: str, parser: Lark) -> str:
    """The sentence that says what is wrong, from the examples or, failing them, the token classes."""
    state, tok, acc = _state(e), _token_type(e), _accepts(e)
    if tok == "NAME" and acc & _DECL_KEYWORDS and _starts_line(e, text):
        return _DECL_LABEL  # `speed : real` without `obs`, or a line that lost its keyword
    if tok in _CLOSERS and tok not in acc:
        unbalanced = _unbalanced(e, text)
        if unbalanced:
            return unbalanced
    if _token_text(e) == "/" and re.search(r"(^|\n)[ \t]*/$", text[:e.token.start_pos]):
        return _SLASH_COMMENT
    best, score = None, -1
    for s, t, v, a, label in _example_table(parser):
        # Same LALR state and a lookahead in common: the same mistake, maybe in another
        # context. Where the token matters it must be of the same kind too. Prefer the same lookaheads, then the same
        # token, then the same text (`**` and `//` are both MULOP MULOP).
        if s != state or not (a & acc or a == acc):
            continue
        if _token_matters(acc) and _token_class(t) != _token_class(tok):
            continue
        this = 4 * (a == acc) + 2 * (t == tok) + (v == _token_text(e))
        if this > score:
            best, score = label, this
    if best == _EQUALITY_LABEL and _open_brackets(e, text):
        best = _NOT_CLOSED  # `hidden = [64, 64, out = 3`: a bracket left open, not a comparison
    if best is not None:
        # The states after a type or a range are shared by obs, weight and action:
        # name the declaration actually being written.
        if best in _DECL_LABELS.values():
            best = _DECL_LABELS.get(_enclosing_keyword(e, text), best)
        return best
    return _fallback_label(e, text, tok, acc)


def _fallback_label(e: UnexpectedInput, text: str, tok: Optional[str], acc: frozenset) -> str:
    if len(acc & _VALUE_START) >= 4:
        return _INCOMPLETE if _after_operator(e, text) else _NO_EXPR
    if tok == "COLON" and (acc & _OPERATORS or acc <= {"COMMA", "RSQB", "RPAR", "SEMICOLON"}):
        return _SLICE
    if tok == "COMMA" and acc & _DECL_KEYWORDS:
        return _STRAY_COMMA
    if tok == "SEMICOLON" and acc & _DECL_KEYWORDS:
        return _SEMICOLON
    if tok in ("$END", "STRING", "TILDE", *_DECL_KEYWORDS) and acc & _CLOSERS:
        return _NOT_CLOSED
    if (tok == "IF" and acc & _OPERATORS) or acc & {"THEN", "ELSE"}:
        return _IF_LABEL  # Python's `a if c else b`, or a missing `then` / `else`
    if tok in _VALUE_START and acc & _OPERATORS:
        return _SIDE_BY_SIDE
    if acc and acc <= _BOUND_START:
        return _RANGE_LABEL
    if acc & _DECL_KEYWORDS:
        return _LEFT_OVER
    if acc == {"NAME"}:
        return _NAME_LABEL
    return _GENERIC


def _decl_code(e: UnexpectedInput, text: str) -> str:
    """The text of the declaration the error is in, up to the error, with strings and comments blanked."""
    pos = e.token.start_pos if isinstance(e, UnexpectedToken) and e.token.type != "$END" else len(text)
    code = COMMENT_OR_STRING.sub(lambda m: " " * len(m.group(0)), text[:pos])
    starts = [m.start() for m in re.finditer(r"\b(policy|obs|weight|latent|action|expect)\b", code)]
    return code[starts[-1]:] if starts else code


def _open_brackets(e: UnexpectedToken, text: str) -> list[str]:
    """The brackets still open before the error, in its declaration, innermost last."""
    stack = []
    for ch in _decl_code(e, text):
        if ch in "([":
            stack.append(ch)
        elif ch in ")]" and stack:
            stack.pop()
    return stack


def _unbalanced(e: UnexpectedToken, text: str) -> Optional[str]:
    """A sentence if the unexpected `)` or `]` does not close the innermost open bracket."""
    stack = _open_brackets(e, text)
    close = str(e.token)
    if not stack:
        return f"This `{close}` has nothing to close; remove it or add the `{_OPENER[close]}` it belongs to."
    if stack[-1] != _OPENER[close]:
        return f"This `{close}` cannot close the `{stack[-1]}` still open before it; close that with `{_CLOSER[stack[-1]]}` first."
    return None


_OPENER = {")": "(", "]": "["}
_CLOSER = {"(": ")", "[": "]"}


def _enclosing_keyword(e: UnexpectedInput, text: str) -> Optional[str]:
    """The keyword of the declaration the error is in (`obs`, `weight`, ...)."""
    m = re.match(r"(policy|obs|weight|latent|action|expect)\b", _decl_code(e, text))
    return m.group(1) if m else None


def _starts_line(e: UnexpectedInput, text: str) -> bool:
    pos = e.token.start_pos if isinstance(e, UnexpectedToken) else e.pos_in_stream
    return pos is not None and text[text.rfind("\n", 0, pos) + 1: pos].strip() == ""


def _after_operator(e: UnexpectedInput, text: str) -> bool:
    before = _decl_code(e, text).rstrip()
    return bool(re.search(r"([-+*/^<>]|[=!<>]=|\band|\bor|\bnot)$", before))


@functools.lru_cache(maxsize=None)
def token_label(name: str, parser: Lark) -> str:
    """How a terminal is shown: its text for a literal (`=`), a description otherwise."""
    if name in _TOKEN_LABELS:
        return _TOKEN_LABELS[name]
    for t in parser.terminals:
        if t.name == name and t.pattern.type == "str":
            return f"`{t.pattern.value}`"
    return f"`{name.lower()}`"


def expected_labels(names, parser: Lark) -> list[str]:
    """Readable names for what the parser would have accepted, grouped so the list stays short."""
    names = set(names)
    out = []
    if _DECL_KEYWORDS <= names:
        names -= _DECL_KEYWORDS
        out.append("a new declaration")
    if len(names & _OPERATORS) >= 3:
        names -= _OPERATORS
        out.append("an operator")
    if len(names & _VALUE_START) >= 4:
        names -= _VALUE_START
        out.append("an expression")
    out += [token_label(n, parser) for n in names]
    return out if len(out) <= 8 else []


_RUN = re.compile(r"[A-Za-z0-9_.]+")
_NUMBER = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _bad_number(text: str, pos: int, file: str):
    """`2x`, `1.5.2`, `1e`, `0x1f`: a word that starts like a number but is not one."""
    start = pos
    while start > 0 and (text[start - 1].isascii() and (text[start - 1].isalnum() or text[start - 1] in "_.")):
        start -= 1
    m = _RUN.match(text, start)
    if m is None or m.end() <= pos:
        return None
    word = m.group(0)
    if not (word[0].isdigit() or (word[0] == "." and word[1:2].isdigit())) or _NUMBER.fullmatch(word):
        return None
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    return errors.bad_number(ast.Span(file, line, col, line, col + len(word)), word)


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "the end of the file"
    if tok.type == "STRING":
        return "a doc string"
    return f"`{tok}`"


def syntax_diagnostic(e: UnexpectedInput, text: str, file: str, parser: Lark) -> Diagnostic:
    """The diagnostic for a lark parse failure of `text`."""
    if isinstance(e, UnexpectedCharacters):
        line, col = e.line, e.column
        char = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        if char == '"':
            end = text.find("\n", e.pos_in_stream)
            end = len(text) if end < 0 else end
            return errors.unterminated_string(ast.Span(file, line, col, line, col + (end - e.pos_in_stream)))
        return _bad_number(text, e.pos_in_stream, file) or errors.bad_character(
            ast.Span(file, line, col, line, col + 1), char)
    if not isinstance(e, UnexpectedToken):
        raise ice(f"unexpected parse failure {type(e).__name__}")
    tok = e.token
    if tok.type == "$END":
        # lark places the end token on the last real token: point just past it.
        line, col = (tok.end_line, tok.end_column) if tok.end_line else (1, 1)
        span = ast.Span(file, line, col, line, col + 1)
    elif tok.type in _DECL_KEYWORDS and _previous_token_end(text, tok.start_pos)[0] < tok.line:
        # The next declaration begins while this one is unfinished: point where this one stops,
        # which is where the fix goes.
        line, col = _previous_token_end(text, tok.start_pos)
        span = ast.Span(file, line, col, line, col + 1)
        found = f"`{tok}` starting the next declaration"
        return errors.syntax_error(span, found, syntax_label(e, text, parser), expected_labels(_accepts(e), parser))
    else:
        num = _bad_number(text, tok.start_pos, file)
        if num is not None:
            return num
        span = ast.Span(file, tok.line, tok.column, tok.end_line or tok.line,
                        tok.end_column or tok.column + max(1, len(str(tok))))
    return errors.syntax_error(span, _describe(tok), syntax_label(e, text, parser), expected_labels(_accepts(e), parser))


def _previous_token_end(text: str, pos: int) -> tuple[int, int]:
    """Line and column just past the last token before `pos` (comments are not tokens)."""
    code = COMMENT_OR_STRING.sub(lambda m: " " * len(m.group(0)) if m.group(0).startswith("#") else m.group(0),
                                  text[:pos]).rstrip()
    line = code.count("\n") + 1
    return line, len(code) - (code.rfind("\n") + 1) + 1

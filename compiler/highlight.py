"""A Pygments lexer for Pol, registered as the entry point `pygments.lexers: pol`.

    pygmentize -l pol examples/car_racing/initial.pol
    ```pol                       (Markdown with Pygments: MkDocs, Sphinx's myst)

Only Pygments and documentation tools import this module; nothing `polc check`
runs does. The token rules follow grammar/pol.lark: a declaration keyword then
the name it declares (tokenised by kind, so a style can colour observations,
weights, latents and actions apart as the paper's Figure 2 does), doc strings,
`#` comments, numbers, the builtins of `check_expr.FUNCTIONS`, operators.
"""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String, Text,
                            Whitespace)

from .check.expr import FUNCTIONS

_NAME = r"[A-Za-z_][A-Za-z_0-9]*"

# The declared name's token per declaration keyword.
DECLARED = {
    "policy": Name.Namespace,
    "obs": Name.Variable.Global,  # observations: given by the environment
    "weight": Name.Constant,  # weights: fitted constants
    "latent": Name.Variable,  # latents: computed values
    "action": Name.Function,  # actions: the outputs
    "const": Name.Constant,  # named constants (of shapes, indices and expressions)
    "state": Name.Variable.Instance,  # states: memory carried between steps
}


class PolLexer(RegexLexer):
    """Pol (`.pol`): small typed dataflow control policies (polc)."""

    name = "Pol"
    aliases = ["pol", "polc"]
    filenames = ["*.pol"]
    mimetypes = ["text/x-pol"]

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (r'"', String.Doc, "string"),
            *[(rf"\b({kw})(\s+)({_NAME})", bygroups(Keyword.Declaration, Whitespace, tok))
              for kw, tok in DECLARED.items()],
            (words(("expect",), suffix=r"\b"), Keyword.Declaration),
            (words(("if", "then", "else", "in", "increasing", "decreasing", "next"), suffix=r"\b"), Keyword),
            (words(("and", "or", "not"), suffix=r"\b"), Operator.Word),
            (words(("true", "false", "inf"), suffix=r"\b"), Keyword.Constant),
            (words(("real", "bool"), suffix=r"\b"), Keyword.Type),
            (words(tuple(FUNCTIONS), prefix=r"\b", suffix=r"(?=\s*\()"), Name.Builtin),
            (r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", Number.Float),
            (r"==|!=|<=|>=|[<>+\-*/^=~]", Operator),
            (r"[()\[\]{},:;]", Punctuation),
            (_NAME, Name),
        ],
        "string": [
            (r'[^"\\\n]+', String.Doc),
            (r"\\.", String.Escape),
            (r'"', String.Doc, "#pop"),
            (r"\n", Text, "#pop"),  # an unterminated doc string ends at the line (the checker says so)
        ],
    }


__all__ = ["PolLexer", "DECLARED"]

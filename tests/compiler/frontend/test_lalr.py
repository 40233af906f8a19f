"""`polc.frontend.lalr` and the tables `polc.grammar.regen` writes: the tables are lark's, and the
tokens `Tables` scans are the ones lark's contextual lexer gives the same parse.

The fast path's ASTs are held to the full path's in tests/compiler/frontend/test_parser_paths.py;
these tests hold the pieces underneath to lark itself."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from polc.frontend import lalr, parse
from polc.grammar import pol_tables, regen

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").rglob("*.pol"))


@pytest.fixture(scope="module")
def lark_parser():
    return regen.lark_parser(regen.GRAMMAR.read_text(encoding="utf-8"))


def test_the_tables_are_what_lark_computes_from_the_grammar(lark_parser):
    # lark numbers its states differently from run to run: compare what does not depend on the numbering
    ours, now = pol_tables, regen.tables(lark_parser)
    assert ours.TERMINALS == now["TERMINALS"] and ours.IGNORE == now["IGNORE"]
    assert ours.NEWLINE_TYPES == now["NEWLINE_TYPES"]
    assert len(ours.ACTIONS) == len(now["ACTIONS"])
    assert Counter(map(repr, ours.RULES)) == Counter(map(repr, now["RULES"]))
    assert sorted(map(repr, ours.LEXERS)) == sorted(map(repr, now["LEXERS"]))
    assert Counter(len(row) for row in ours.ACTIONS) == Counter(len(row) for row in now["ACTIONS"])


class _Recording(lalr.Tables):
    def __init__(self, module):
        super().__init__(module)
        self.seen = []

    def tokens(self, text, state):
        for token in super().tokens(text, state):
            self.seen.append(token)
            yield token


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(ROOT / "examples").as_posix())
def test_the_tokens_are_lark_contextual_lexers(path, lark_parser):
    text = parse.normalize_newlines(path.read_text(encoding="utf-8"))
    tables = _Recording(pol_tables)
    tables.parse(text, [lambda children: _Value() for _ in tables.plans])
    theirs = [(t.type, t.value, t.line, t.column, t.end_line, t.end_column)
              for t in lark_parser.parse_interactive(text).iter_parse()]
    ours = [(t.type, t.value, t.line, t.column, t.end_line, t.end_column) for t in tables.seen]
    assert len(ours) > 10 and ours == theirs


class _Value:
    """A reduced value for the token test (its reducers build nothing)."""


@pytest.mark.parametrize("text, where", [("obs x : real in [0, 1", "unexpected end of text"),
                                         ("obs x : real in [0, 1] }", "unexpected Token('RBRACE'"),
                                         ("obs x @ real", "no terminal of the state matches at line 1, column 7")])
def test_text_the_tables_refuse_is_rejected(text, where):
    tables = lalr.Tables(pol_tables)
    with pytest.raises(lalr.Reject, match=where.replace("(", r"\(")):
        tables.parse(text, [lambda children: _Value() for _ in tables.plans])


def test_a_reduce_sees_its_childrens_positions():
    tables = lalr.Tables(pol_tables)
    seen = []

    def reducer(plan):
        def reduce(children):
            seen.append((plan[0], [c.value for c in children if isinstance(c, lalr.Token)]))
            return _Value()
        return reduce

    tables.parse("latent a = x + 1\n", [reducer(plan) for plan in tables.plans])
    assert ("binary", ["+"]) in seen and ("latent_decl", ["latent", "a", "="]) in seen

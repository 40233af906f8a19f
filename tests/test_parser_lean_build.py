"""`polc.parse` builds the standalone parser's LALR table and contextual lexer itself,
without `Lark_StandAlone()`'s tree builder and callbacks (issue 18: start-up of `polc
check`). These tests hold the lean build to what `Lark_StandAlone()` builds from the same
generated data: the same table, state by state, and the same lexer for every state, so
the two can only differ in the objects polc never uses."""

from __future__ import annotations

from pathlib import Path

from polc import parse
from polc.grammar import pol_parser

ROOT = Path(__file__).resolve().parent.parent


def _terminals(lexer) -> list[tuple[str, str, int]]:
    return sorted((t.name, t.pattern.to_regexp(), t.priority) for t in lexer.terminals)


def test_the_lean_table_is_lark_standalones_table():
    table, _ = parse._table_and_lexer(pol_parser)
    full = pol_parser.Lark_StandAlone().parser.parser._parse_table
    assert table.start_states == full.start_states and table.end_states == full.end_states
    assert table.states.keys() == full.states.keys()
    for state, actions in full.states.items():
        assert table.states[state] == actions, state  # Rule compares by origin, expansion, order, alias


def test_the_lean_lexer_is_lark_standalones_lexer():
    _, lexer = parse._table_and_lexer(pol_parser)
    full = pol_parser.Lark_StandAlone().parser.lexer
    assert lexer.lexers.keys() == full.lexers.keys()
    for state in full.lexers:
        ours, theirs = lexer.lexers[state], full.lexers[state]
        assert _terminals(ours) == _terminals(theirs), state
        assert ours.ignore_types == theirs.ignore_types and ours.newline_types == theirs.newline_types
        assert ours.re == theirs.re and ours.g_regex_flags == theirs.g_regex_flags
        assert ours.use_bytes == theirs.use_bytes and ours.user_callbacks == theirs.user_callbacks
    assert _terminals(lexer.root_lexer) == _terminals(full.root_lexer)


def test_the_lean_lexer_tokenizes_the_example_as_lark_standalone_does():
    text = (ROOT / "examples" / "car_racing" / "initial.pol").read_text(encoding="utf-8")
    _, lexer = parse._table_and_lexer(pol_parser)
    full = pol_parser.Lark_StandAlone().parser.lexer

    def tokens(lex):
        root = lex.root_lexer
        state = pol_parser.LexerState(pol_parser.TextSlice.cast_from(text))
        return [(t.type, t.value, t.line, t.column, t.end_line, t.end_column)
                for t in root.lex(state, None)]

    ours = tokens(lexer)
    assert len(ours) > 300 and ours == tokens(full)

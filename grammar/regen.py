"""Regenerate `pol_tables.py`, the LALR(1) tables `polc check` parses with, from `pol.lark`.

    .venv/bin/python -m polc.grammar.regen           # rewrite pol_tables.py (or: make parser)
    .venv/bin/python -m polc.grammar.regen --check   # exit 1 if it is stale

`pol.lark` stays the one source of the syntax. lark builds its LALR parser from it
here, at build time, with the options `polc.frontend.parse` gives lark's full parser, and
this writes out what a parse needs as plain Python literals: every terminal's
regular expression, each parser state's action table, the terminals each state's
contextual lexer tries (in lark's order, with lark's keyword callbacks), and for
every rule how lark's tree builder would shape its children (`_rule_plan`).
`polc.frontend.lalr` drives those tables; a valid program is parsed without importing lark
or its generated runtime (which took `polc check` 12 ms to import and 6 ms to
rebuild its tables from their serialized form). Text that fails there is parsed
again by lark's full parser, whose exceptions the syntax-error messages are made
from.

The generated module carries the text of the grammar it was made from
(`POLC_GRAMMAR`: `polc.frontend.parse` uses the tables only when that equals the grammar
shipped beside it) and a first line with the grammar's SHA-256 and the lark version;
a test fails when either differs. lark numbers the LALR states in an order that
varies from run to run, so two regenerations differ in their numbers, never in the
language they accept.
"""

from __future__ import annotations

import argparse
import hashlib
import pprint
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GRAMMAR = HERE / "pol.lark"
OUTPUT = HERE / "pol_tables.py"
_STAMP = "# polc: generated from pol.lark sha256={sha} by lark {version}; regenerate with `python -m polc.grammar.regen`"


def grammar_sha256(path: Path = GRAMMAR) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stamp() -> str:
    """The first line of an up-to-date `pol_tables.py`."""
    import lark

    return _STAMP.format(sha=grammar_sha256(), version=lark.__version__)


def recorded_stamp(path: Path = OUTPUT) -> str:
    """The first line of the generated module as it is ('' when there is none)."""
    try:
        with path.open(encoding="utf-8") as f:
            return f.readline().rstrip("\n")
    except FileNotFoundError:
        return ""


def lark_parser(grammar: str):
    """lark's LALR parser of `grammar`, built as `polc.frontend.parse` builds its full parser."""
    from lark import Lark

    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=True,
                import_paths=[str(HERE)])


def rule_plan(rule) -> tuple[str, bool, bool, tuple, int]:
    """(method name, is a `_rule` whose children splice into its parent, expands a single child,
    children to keep as (index, splice, Nones before), Nones after), as lark's ParseTreeBuilder
    decides them (`maybe_create_child_filter`, `ExpandSingleChild`; maybe_placeholders on)."""
    expansion, options = rule.expansion, rule.options
    empty = options.empty_indices
    nones = [len(run) for run in "".join(str(int(b)) for b in empty).split("0")] if empty else \
        [0] * (len(expansion) + 1)
    keep, pending = [], 0
    for i, sym in enumerate(expansion):
        pending += nones[i]
        if options.keep_all_tokens or not (sym.is_term and sym.filter_out):
            keep.append((i, not sym.is_term and sym.name.startswith("_"), pending))
            pending = 0
    name = str(rule.alias or options.template_source or rule.origin.name)  # lark gives some as Tokens
    return name, name.startswith("_"), bool(options.expand1 and not rule.alias), tuple(keep), \
        pending + nones[len(expansion)]


def tables(parser) -> dict:
    """The literals of `pol_tables.py` from lark's parser (module docstring)."""
    from lark.lexer import PatternRE

    table = parser.parser.parser._parse_table
    contextual = parser.parser.lexer
    terminals = {t.name: t for t in parser.terminals}
    for t in terminals.values():
        assert not t.pattern.flags, f"{t.name}: regex flags are not supported by polc.frontend.lalr"
    states = sorted(table.states)
    assert states == list(range(len(states))), "lark's states are not numbered 0..n-1"

    rules: list = []
    rule_index: dict = {}
    actions = []
    for state in states:
        row = {}
        for symbol, (action, arg) in table.states[state].items():
            symbol = str(symbol)
            if action.name == "Shift":
                row[symbol] = arg
            else:  # Reduce: by the rule's index, as -1 - index
                if id(arg) not in rule_index:
                    rule_index[id(arg)] = len(rules)
                    rules.append((str(arg.origin.name), len(arg.expansion), rule_plan(arg)))
                row[symbol] = -1 - rule_index[id(arg)]
        actions.append(row)

    # Each state's contextual lexer: its terminals after lark's `_create_unless`, in lark's order,
    # and the callbacks that retype a regex terminal's match equal to a string terminal's.
    lexers: list = []
    lexer_index: dict = {}
    state_lexer = []
    for state in states:
        basic = contextual.lexers[state]
        if id(basic) not in lexer_index:
            scanner = basic._build_scanner()
            retype = {}
            for name, callback in basic.callback.items():
                strings = callback.scanner.terminals
                assert all(not isinstance(s.pattern, PatternRE) for s in strings)
                retype[name] = {s.pattern.value: s.name for s in reversed(strings)}  # the first wins, as fullmatch
            lexer_index[id(basic)] = len(lexers)
            lexers.append((tuple(t.name for t in scanner.terminals), retype))
        state_lexer.append(lexer_index[id(basic)])
    root = contextual.root_lexer
    return {
        "TERMINALS": {name: t.pattern.to_regexp() for name, t in sorted(terminals.items())},
        "IGNORE": tuple(sorted(root.ignore_types)),
        "NEWLINE_TYPES": tuple(sorted(root.newline_types)),
        "LEXERS": lexers,
        "STATE_LEXER": state_lexer,
        "ACTIONS": actions,
        "RULES": rules,
        "START": table.start_states["start"],
        "END": table.end_states["start"],
    }


_LAYOUT = """\
{stamp}
# The LALR(1) tables of grammar/pol.lark, as lark {version} builds them (grammar/regen.py says
# what each name holds; polc/lalr.py drives them). Generated: edit pol.lark, then regenerate.

POLC_GRAMMAR = {grammar!r}

"""


def generate() -> str:
    """The text of `pol_tables.py` for the current grammar."""
    import lark

    grammar = GRAMMAR.read_text(encoding="utf-8")
    out = [_LAYOUT.format(stamp=stamp(), version=lark.__version__, grammar=grammar)]
    for name, value in tables(lark_parser(grammar)).items():
        out.append(f"{name} = {pprint.pformat(value, width=120, compact=True, sort_dicts=False)}\n\n")
    return "".join(out).rstrip("\n") + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only say whether pol_tables.py is up to date")
    args = ap.parse_args(argv)
    if args.check:
        if recorded_stamp() != stamp():
            print(f"{OUTPUT} is stale: run `python -m polc.grammar.regen` (or `make parser`)", file=sys.stderr)
            return 1
        print(f"{OUTPUT} is up to date")
        return 0
    OUTPUT.write_text(generate(), encoding="utf-8")
    print(f"wrote {OUTPUT} from {GRAMMAR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

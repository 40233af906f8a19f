"""Regenerate `pol_parser.py`, the standalone LALR parser, from `pol.lark`.

    .venv/bin/python -m polc.grammar.regen           # rewrite pol_parser.py (or: make parser)
    .venv/bin/python -m polc.grammar.regen --check   # exit 1 if it is stale

`pol.lark` stays the one source of the syntax. `polc check` parses valid text
with the generated module (lark's own standalone tool, with the options
`polc.parse` builds lark's parser with), so it never imports lark; a syntax
error is re-parsed with lark's full parser, whose exceptions the syntax-error
messages are made from. The generated module carries the text of the grammar it
was made from (`POLC_GRAMMAR`: `polc.parse` uses the module only when that equals
the grammar shipped beside it, a comparison of two strings where hashing took
`polc check` 2 ms of importing OpenSSL) and a first line with the grammar's SHA-256
and the lark version; a test fails when either differs.
(lark numbers the LALR states in an order that varies from run to run, so two
regenerations differ in their tables, never in the language they accept.)
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GRAMMAR = HERE / "pol.lark"
OUTPUT = HERE / "pol_parser.py"
_STAMP = "# polc: generated from pol.lark sha256={sha} by lark {version}; regenerate with `python -m polc.grammar.regen`"


def grammar_sha256(path: Path = GRAMMAR) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stamp() -> str:
    """The first line of an up-to-date `pol_parser.py`."""
    import lark

    return _STAMP.format(sha=grammar_sha256(), version=lark.__version__)


def recorded_stamp(path: Path = OUTPUT) -> str:
    """The first line of the generated module as it is ('' when there is none)."""
    try:
        with path.open(encoding="utf-8") as f:
            return f.readline().rstrip("\n")
    except FileNotFoundError:
        return ""


def generate() -> str:
    """The text of `pol_parser.py` for the current grammar (lark's standalone tool)."""
    import io

    from lark import Lark
    from lark.tools.standalone import gen_standalone

    grammar = GRAMMAR.read_text(encoding="utf-8")
    lark_inst = Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                     maybe_placeholders=True, import_paths=[str(HERE)])
    out = io.StringIO()
    gen_standalone(lark_inst, out=out)
    # polc.parse compares this with the grammar it ships and parses with lark alone when they differ.
    return stamp() + "\n" + f"POLC_GRAMMAR = {grammar!r}\n" + out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only say whether pol_parser.py is up to date")
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

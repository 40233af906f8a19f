"""The fast path (polc.frontend.lalr over grammar/pol_tables.py, the LALR tables lark computes from
grammar/pol.lark at build time) gives exactly what lark's full parser and the tree
transformer give: the same AST (spans included) for every valid program, and for every
invalid one the full path's own diagnostic. Besides the examples and goldens, generated
programs and thousands of mutations of valid ones (tokens dropped, repeated, swapped)
hold the two paths to each other on text nobody wrote.

    .venv/bin/python -m polc.grammar.regen   # after an edit of pol.lark (or: make parser)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from polc.frontend import parse
from polc.messages import PolError
from polc.grammar import regen

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gen_program  # noqa: E402

PROGRAMS = sorted((ROOT / "examples").rglob("*.pol")) + sorted((ROOT / "tests").rglob("*.pol"))


def _text(path: Path) -> str:
    return parse.normalize_newlines(path.read_text(encoding="utf-8").lstrip("\ufeff"))


def _full(text: str, file: str) -> tuple[str, list]:
    """The full path's result: ("ok", its declarations) or ("error", the diagnostics it raised)."""
    try:
        return "ok", parse._parse_full(text, file)
    except PolError as e:
        return "error", e.diagnostics


def _public(text: str, file: str) -> tuple[str, list]:
    """What callers of `parse_program` get, in the same form."""
    try:
        return "ok", list(parse.parse_program(text, file).decls)
    except PolError as e:
        return "error", e.diagnostics


def test_the_generated_tables_are_up_to_date_with_the_grammar():
    assert regen.recorded_stamp() == regen.stamp(), \
        "grammar/pol_tables.py is stale: run `python -m polc.grammar.regen` (or `make parser`)"


def test_a_stale_table_module_is_told_apart(tmp_path):
    stale = tmp_path / "pol_tables.py"
    stale.write_text(regen.stamp().replace("sha256=", "sha256=0") + "\n", encoding="utf-8")
    assert regen.recorded_stamp(stale) != regen.stamp()
    assert regen.recorded_stamp(tmp_path / "absent.py") == ""


def test_stale_tables_are_never_used(monkeypatch):
    # pol.lark edited, pol_tables.py not regenerated: lark's full parser parses everything
    from polc.grammar import pol_tables

    text = (ROOT / "examples" / "car_racing" / "initial.pol").read_text(encoding="utf-8")
    expected = parse.parse_program(text, "c.pol")
    monkeypatch.setattr(pol_tables, "POLC_GRAMMAR", pol_tables.POLC_GRAMMAR + "\n// edited")
    parse._tables.cache_clear()
    try:
        assert parse._tables() is None
        assert parse._parse_fast(text, "c.pol") is None
        assert parse.parse_program(text, "c.pol") == expected
    finally:
        monkeypatch.undo()
        parse._tables.cache_clear()
    assert parse._tables() is not None


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_both_paths_agree_on_every_example_and_golden_program(path):
    text, file = _text(path), path.relative_to(ROOT).as_posix()
    full = _full(text, file)
    try:
        fast = parse._parse_fast(text, file)
    except Exception:  # noqa: BLE001  the fast path hands every failure to the full path
        fast = None
    if fast is None:  # declined: only where the full path fails, or the nesting is near MAX_DEPTH
        assert full[0] == "error", f"the fast path declined a program the full path parses: {file}"
    else:
        assert ("ok", fast) == full
    assert _public(text, file) == full


SNIPPETS = [
    "",
    "# only a comment\n",
    'policy p "doc \\"quoted\\" \\n line"',
    "obs x : real in [-1, inf]\nobs v : real[3, 2] >= -2 \"d\"\nweight k : real <= +0.5 = -0.25 ~ normal(0, 1)",
    "latent a = (x + 1) * -(2 ^ x) / +y\nlatent b : real[2] = [(a), [1, 2][0], f(x, y; hidden = [64, 64], k = 1)]",
    "latent c = if not (a > 0 or b == 1) and c != 2 then m[1:3, :, 2:, :4, 0] else g()",
    "latent d = f(a, b, k = 1, j = (2))\naction u : real in [0, 1] = clip(d, 0, 1) ~ normal(std = 0.1)",
    "expect d increasing in x \"why\"\nexpect d >= 0\nexpect d < 1\nexpect d in [-1, 1e3]",
    "latent e = ((((x))))\nlatent f = -(-(-x))\nlatent g = x[0][1][(2)]",
]


@pytest.mark.parametrize("text", SNIPPETS)
def test_both_paths_agree_on_every_construct(text):
    assert parse._parse_fast(text, "s.pol") == parse._parse_full(text, "s.pol")


@pytest.mark.parametrize("seed", range(3))
def test_both_paths_agree_on_a_generated_program(seed):
    text = gen_program.generate(400, seed=seed)
    assert parse._parse_fast(text, "g.pol") == parse._parse_full(text, "g.pol")


def _mutants(text: str, n: int, seed: int):
    """`n` variants of `text`, each with one of its tokens dropped, repeated, or swapped with the next."""
    import random

    spans = [m.span() for m in parse._TOKEN.finditer(text) if not m.group().isspace()]
    rng = random.Random(seed)
    for _ in range(n):
        i = rng.randrange(len(spans) - 1)
        (a, b), (c, d) = spans[i], spans[i + 1]
        kind = rng.choice(("drop", "repeat", "swap"))
        if kind == "drop":
            yield text[:a] + text[b:]
        elif kind == "repeat":
            yield text[:b] + " " + text[a:b] + text[b:]
        else:
            yield text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]


@pytest.mark.parametrize("path", [ROOT / "examples" / "car_racing" / "initial.pol",
                                  ROOT / "examples" / "car_racing" / "near_expert.pol"],
                         ids=lambda p: p.name)
def test_both_paths_agree_on_mutated_programs(path):
    # Valid and invalid alike: where the fast path builds declarations the full path builds the
    # same ones, and where it declines the full path has an error to report.
    agreed = declined = 0
    for k, text in enumerate(_mutants(_text(path), 400, seed=7)):
        full = _full(text, f"m{k}.pol")
        try:
            fast = parse._parse_fast(text, f"m{k}.pol")
        except Exception:  # noqa: BLE001  the fast path hands every failure to the full path
            fast = None
        if fast is None:
            assert full[0] == "error", text
            declined += 1
        else:
            assert ("ok", fast) == full, text
            agreed += 1
    assert agreed > 20 and declined > 200  # both kinds of text were really exercised


@pytest.mark.parametrize("depth", [150, 198, 199, 200, 201, 260])
def test_nesting_near_the_limit_is_decided_as_the_full_path_decides(depth):
    # a chain of unary minus nests one tree level per `-` and no bracket, which the prescan lets through
    text = "latent a = " + "-" * depth + "x"
    full = _full(text, "d.pol")
    assert full[0] == ("ok" if depth < 199 else "error")  # the limit really is crossed in this range
    assert _public(text, "d.pol") == full


def test_a_builder_error_inside_a_valid_parse_comes_from_the_full_path():
    text = "obs a : real[" + ",".join(["1"] * 40) + "]"  # more dimensions than MAX_NDIM
    got = _public(text, "n.pol")
    assert got == _full(text, "n.pol")
    assert got[0] == "error" and "40 dimensions" in got[1][0].message


def test_the_comment_pattern_matches_the_syntax_errors_one():
    from polc.frontend import syntax_errors

    assert parse._COMMENT_OR_STRING.pattern == syntax_errors.COMMENT_OR_STRING.pattern


def test_the_error_path_names_are_still_reachable_from_parse():
    from polc.frontend import syntax_errors

    assert parse.SYNTAX_EXAMPLES is syntax_errors.SYNTAX_EXAMPLES
    assert parse.syntax_label is syntax_errors.syntax_label
    with pytest.raises(AttributeError):
        parse.no_such_name  # noqa: B018

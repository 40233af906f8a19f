"""Syntax error sentences: the example table teaches each label, and what the
messages show is readable (no lark-internal terminal names)."""

import re

import pytest
from lark.exceptions import UnexpectedInput

from polc.frontend import parse, syntax_errors
from polc.messages import PolError

EXAMPLES = [(label, example) for label, examples in parse.SYNTAX_EXAMPLES.items() for example in examples]


def _parse_error(text: str):
    with pytest.raises(PolError) as info:
        parse.parse_program(text, "t.pol")
    (diag,) = info.value.diagnostics
    return diag


@pytest.mark.parametrize("label,example", EXAMPLES, ids=[repr(e) for _, e in EXAMPLES])
def test_example_yields_its_own_label(label, example):
    """The `match_examples` contract: every example is matched back to its own label."""
    with pytest.raises(UnexpectedInput) as info:
        parse._parser().parse(example)
    assert parse.syntax_label(info.value, example, parse._parser()) == label
    diag = _parse_error(example)
    assert diag.code == "E0001"
    assert diag.message.startswith(label)


@pytest.mark.parametrize("text,label", [
    # The same mistakes in contexts no example spells out.
    ("obs x : real\nlatent a = clip(x 0, 1)", "Two values stand side by side"),
    ("obs x : real\nlatent a = x\nb = a * 2", "A declaration must start with"),
    ("obs x : real\nlatent a = x if x > 0 else 0", "`if` needs both `then` and `else`"),
    ("obs x : real\nlatent a = min(x, 1))", "This `)` has nothing to close"),
    ("obs x : real[3]\nlatent a = sum(x[0)", "This `)` cannot close the `[`"),
    ("obs x : real[3]\nlatent a = mean(x2:3])", "A slice like `2:6` can only appear inside an index"),
    ("obs x : real\naction a : real = clipx, 0, 1)", "This comma is outside any call or bracket"),
    ("obs x : real\nlatent a = max(x, )", "An expression is missing here"),
    ("obs x : real\naction a : real = min(x, 1", "A parenthesis, bracket or call is not closed"),
    ("weight k : real >= 0 0.5", "A weight needs a type and an initial value"),
    ("action a : real[2] [0, 1] = 0", "An action needs a type and `=`"),
    ("obs x : real\nlatent e = x\nexpect e in [0, , 1]", "A range is written"),
    ("obs x : real\nlatent a = x\n// the error\nlatent b = x", "Comments start with `#`, not `//`."),
    ("obs x : real\nlatent a = x; latent b = x", "Declarations need no `;`"),
    ("obs x : real\nlatent a = mlp(x; hidden = [64, 64, out = 3)", "A parenthesis, bracket or call is not closed"),
    ("obs x : real\nlatent a = x > 0 and x = 1", "Equality is tested with `==`"),
    ("obs x : real[2] in [0, 1] = [0.5, 0.5]", "An observation has no `=`"),
    ("obs x : real\naction a : real = x in [0, 1]", "A range goes after the type and before `=`"),
    ("obs x : real\naction a : real real = x", "An action needs a type"),
])
def test_labels_beyond_the_examples(text, label):
    assert _parse_error(text).message.startswith(label)


def test_name_at_line_start_is_a_missing_keyword():
    diag = _parse_error("obs x : real\nspeed : real in [0, 1]\n")
    assert diag.message.startswith("A declaration must start with `policy`, `obs`")
    assert (diag.span.line, diag.span.column) == (2, 1)


@pytest.mark.parametrize("text,word,hint", [
    ("obs x : real\nlatent a = 2x", "2x", "`2 * x`"),
    ("obs x : real\nlatent a = 1.5.2 * x", "1.5.2", "Numbers look like"),
    ("obs x : real\nlatent a = 1e * x", "1e", "exponent"),
    ("obs x : real\nlatent a = 0x1f * x", "0x1f", "decimal"),
])
def test_malformed_numbers(text, word, hint):
    diag = _parse_error(text)
    assert diag.code == "E0004"
    assert diag.message == f"{word!r} is not a number."
    assert hint in diag.hint


@pytest.mark.parametrize("char,hint", [
    ("&", "`a and b`"), ("|", "`a or b`"), ("!", "`not`"), ("'", "double quotes"), ("\u2212", "ASCII `-`"),
    ("\x00", "Names use letters"), ("@", "Names use letters"), ("é", "ASCII"),
])
def test_bad_characters(char, hint):
    diag = _parse_error(f"obs x : real\nlatent a = x {char} x\n")
    assert diag.code == "E0002"
    assert (diag.span.line, diag.span.column, diag.span.end_column) == (2, 14, 15)
    assert hint in diag.hint


def test_unterminated_string_spans_the_rest_of_the_line():
    diag = _parse_error('obs x : real "speed / 100\nlatent a = x\n')
    assert diag.code == "E0003"
    assert (diag.span.line, diag.span.column, diag.span.end_column) == (1, 14, 26)


def test_end_of_file_caret_sits_after_the_last_token():
    diag = _parse_error("obs x : real\nlatent a = x +\n\n# a trailing comment\n")
    assert diag.message.startswith("This expression is incomplete")
    assert "Found the end of the file" in diag.message
    assert (diag.span.line, diag.span.column) == (2, 15)


INTERNAL = re.compile(r"__ANON|\b(RPAR|LPAR|RSQB|LSQB|COMMA|COLON|SEMICOLON|EQUAL|TILDE|MINUS|PLUS|CIRCUMFLEX|"
                      r"MORETHAN|LESSTHAN|NAME|NUMBER|INT|STRING|BASETYPE|MONOTONE|COMPARE|CMP_CLAIM|ADDOP|MULOP|"
                      r"SIGN|INF|POLICY|OBS|WEIGHT|LATENT|ACTION|EXPECT|IN|IF|THEN|ELSE|AND|OR|NOT|TRUE|FALSE)\b|\$END")


def test_every_terminal_has_a_readable_label():
    for terminal in parse._parser().terminals:
        label = syntax_errors.token_label(terminal.name, parse._parser())
        assert not INTERNAL.search(label), (terminal.name, label)


def _mutants():
    """Every one-token deletion and duplication of a small program that uses every construct."""
    text = (
        'policy p "doc"\n'
        "obs x : real[3] in [-1, 1]\n"
        "weight k : real >= 0 = 0.5\n"
        "latent a : real = k * sum(x[0:2]) + (if x[2] > 0 and not (x[0] < 0) then 1 else -1) ^ 2\n"
        "latent m = mlp(x, a; hidden = [8], out = 2, activation = relu)\n"
        "action u : real in [-1, 1] = clip(m[0], -1, 1) ~ normal(std = 0.1)\n"
        "expect a increasing in k\n"
        "expect u in [-1, 1]\n"
    )
    out = []
    for tok in parse._parser().lex(text):
        out.append(text[:tok.start_pos] + text[tok.end_pos:])
        out.append(text[:tok.end_pos] + " " + str(tok) + text[tok.end_pos:])
    return out


@pytest.mark.parametrize("text", _mutants())
def test_messages_never_show_internal_names(text):
    try:
        parse.parse_program(text, "t.pol")
    except PolError as e:
        (diag,) = e.diagnostics
        assert not INTERNAL.search(diag.message.replace("`", " ")), diag.message
        assert diag.message.endswith(".")


def test_a_byte_order_mark_is_not_a_character():
    program = parse.parse_program("\ufeffobs x : real\naction u : real = x\n", "t.pol")
    assert program.decls[0].name_span.column == 5


def test_crlf_line_endings_keep_columns():
    diag = _parse_error("obs x : real\r\nlatent a = x +\r\naction u : real = a\r\n")
    assert (diag.span.line, diag.span.column) == (2, 15)

"""No input, however broken, crashes polc: mutated example programs give
`PolError` (located inside the file) or compile, and `polc check` exits 0 or 1,
never 3 (an internal compiler error). Unreadable input exits 2 with one line."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polc
from polc.cli import main
from polc.messages import PolError, source_lines
from tiers import examples

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").rglob("*.pol"))

# Punctuation the grammar uses, and characters it never expects.
NOISE = list("[](){}=,:;~+-*/^<>.!&|#\"'\\@$%?_0") + [
    "\x00", "\t", "\r", "\x0c", "\x0b", "\u2028", "\u2212", "\u00e9", "\u00d7", "\ufeff", "\U0001f600", "\n", " ",
    "in", "if", "then", "else", "real", "bool", "inf", "obs", "latent", "expect", "increasing", "true", "not",
    "sum(", "mlp(", "normal(", "axis =", "1e999", "-0", "99999999999999999999",
]
NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _delete_chars(text: str, data) -> str:
    for _ in range(data.draw(st.integers(1, 5), label="deletions")):
        if not text:
            break
        i = data.draw(st.integers(0, len(text) - 1))
        text = text[:i] + text[i + 1:]
    return text


def _swap_lines(text: str, data) -> str:
    lines = text.split("\n")
    i, j = (data.draw(st.integers(0, len(lines) - 1)) for _ in range(2))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _misspell(text: str, data) -> str:
    words = list(NAME.finditer(text))
    if not words:
        return text
    w = data.draw(st.sampled_from(words), label="word")
    k = data.draw(st.integers(0, len(w.group(0))))
    new = w.group(0)[:k] + data.draw(st.sampled_from("aexz_019")) + w.group(0)[k + 1:]
    return text[:w.start()] + new + text[w.end():]


def _duplicate_line(text: str, data) -> str:
    lines = text.split("\n")
    i = data.draw(st.integers(0, len(lines) - 1))
    return "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])


def _truncate(text: str, data) -> str:
    return text[:data.draw(st.integers(0, len(text)))]


def _insert(text: str, data) -> str:
    for _ in range(data.draw(st.integers(1, 3), label="insertions")):
        i = data.draw(st.integers(0, len(text)))
        text = text[:i] + data.draw(st.sampled_from(NOISE)) + text[i:]
    return text


MUTATIONS = [_delete_chars, _swap_lines, _misspell, _duplicate_line, _truncate, _insert]


def _mutated(path: Path, data) -> str:
    text = path.read_text(encoding="utf-8")
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        text = data.draw(st.sampled_from(MUTATIONS), label="mutation")(text, data)
    return text


def _assert_located(diags, text: str) -> None:
    n = max(1, len(source_lines(text)))
    for d in diags:
        assert d.message.strip()
        if d.span is not None:
            assert 1 <= d.span.line <= d.span.end_line <= n, (d.code, d.span, n)
            assert d.span.column >= 1


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.relative_to(ROOT / "examples").as_posix() for p in EXAMPLES])
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_examples_fail_cleanly(path, data):
    text = _mutated(path, data)
    try:
        program = polc.loads(text, path.name)
    except PolError as e:
        assert e.diagnostics and any(d.is_error for d in e.diagnostics)
        _assert_located(e.diagnostics, text)
        polc.render_all(e.diagnostics, text)
    else:
        _assert_located(program.warnings, text)
        polc.render_all(program.warnings, text)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.relative_to(ROOT / "examples").as_posix() for p in EXAMPLES])
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cli_exits_0_or_1_on_mutated_examples(path, data):
    text = _mutated(path, data)
    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "mutant.pol")
        with open(file, "w", encoding="utf-8") as f:
            f.write(text)
        assert main(["check", file]) in (0, 1)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.relative_to(ROOT / "examples").as_posix() for p in EXAMPLES])
def test_examples_check_clean(path):
    program = polc.load(str(path))
    assert not [d for d in program.warnings if d.is_error]


# ---- unreadable input ------------------------------------------------------------------


def _one_line_exit_2(argv, capsys) -> str:
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.count("\n") == 1 and out.err.startswith("polc: "), out.err
    return out.err


def test_missing_file(capsys, tmp_path):
    err = _one_line_exit_2(["check", str(tmp_path / "nope.pol")], capsys)
    assert "no such file" in err


def test_directory(capsys, tmp_path):
    err = _one_line_exit_2(["check", str(tmp_path)], capsys)
    assert "is a directory" in err


@pytest.mark.parametrize("data", [b"obs x : real\n\xff\xfe latent", b"\x80", "latent a = 1 # caf\u00e9".encode("latin-1")])
def test_not_utf8(capsys, tmp_path, data):
    path = tmp_path / "latin.pol"
    path.write_bytes(data)
    err = _one_line_exit_2(["check", str(path)], capsys)
    assert "not UTF-8" in err


@pytest.mark.parametrize("command", ["check", "fmt", "graph", "compile"])
def test_every_command_reports_a_missing_file_the_same_way(command, capsys, tmp_path):
    _one_line_exit_2([command, str(tmp_path / "nope.pol")], capsys)

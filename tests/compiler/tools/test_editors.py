"""The editor grammars: the TextMate grammar (VS Code, GitHub) and the Pygments lexer
(`pygmentize -l pol`, Sphinx, MkDocs) tokenise every shipped example completely,
and the VS Code extension's manifest points at files that exist."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from polc.check.expr import FUNCTIONS

ROOT = Path(__file__).resolve().parents[3]
VSCODE = ROOT / "editors" / "vscode"
GRAMMAR = VSCODE / "syntaxes" / "pol.tmLanguage.json"
EXAMPLES = sorted((ROOT / "examples").rglob("*.pol"))
CAR = ROOT / "examples" / "car_racing" / "initial.pol"


def needed(module: str):
    """Import a test-only module; missing, it skips locally and fails under CI."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is missing on CI (pip install -e '.[test]')")
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")


# ---- TextMate -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def textmate():
    base = needed("textmate_grammar.parsers.base")
    logging.getLogger("textmate_grammar").setLevel(logging.ERROR)  # it logs every doc string it skips into
    return base.LanguageParser(json.loads(GRAMMAR.read_text(encoding="utf-8")))


def untokenised(tokens, text: str) -> list[str]:
    """The non-blank text that only the root scope covers (no rule of the grammar matched it)."""
    lines = text.split("\n")
    covered = {(line, col) for (line, col), s, scopes in tokens if len(scopes) > 1
               for col in range(col, col + len(s))}
    return [f"{n + 1}:{c + 1} {ch!r}" for n, line in enumerate(lines) for c, ch in enumerate(line)
            if not ch.isspace() and (n, c) not in covered]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_textmate_grammar_tokenises_every_example(textmate, path):
    text = path.read_text(encoding="utf-8")
    tokens = textmate.parse_string(text).flatten()
    assert untokenised(tokens, text) == []


def test_textmate_grammar_scopes_names_by_kind(textmate):
    text = CAR.read_text(encoding="utf-8")
    scopes = {}
    for _, s, sc in textmate.parse_string(text).flatten():
        scopes.setdefault(s, sc[-1])
    assert scopes["tiles"] == "variable.other.obs.pol"
    assert scopes["k_look"] == "variable.other.constant.weight.pol"
    assert scopes["look_x"] == "variable.other.latent.pol"
    assert scopes["steer"] == "entity.name.function.action.pol"
    assert scopes["clip"] == "support.function.builtin.pol"
    assert scopes["expect"] == "keyword.declaration.expect.pol"
    assert scopes["# ---- observations -------------------------------------------------------------"] \
        == "comment.line.number-sign.pol"


def test_textmate_grammar_names_the_checkers_builtins():
    g = json.loads(GRAMMAR.read_text(encoding="utf-8"))
    assert g["scopeName"] == "source.pol"
    alternation = g["repository"]["builtin"]["match"].split("(", 1)[1].split(")", 1)[0]
    assert set(alternation.split("|")) == set(FUNCTIONS)


# ---- Pygments ------------------------------------------------------------------------------------


def test_pygments_finds_the_lexer_through_its_entry_point():
    from pygments.lexers import get_lexer_by_name, get_lexer_for_filename

    from polc.highlight import PolLexer

    assert isinstance(get_lexer_by_name("pol"), PolLexer)
    assert isinstance(get_lexer_for_filename("initial.pol"), PolLexer)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pygments_lexer_tokenises_every_example_without_errors(path):
    from pygments.token import Error

    from polc.highlight import PolLexer

    text = path.read_text(encoding="utf-8")
    tokens = list(PolLexer().get_tokens(text))
    assert [v for t, v in tokens if t in Error] == []
    assert "".join(v for _, v in tokens) == text if text.endswith("\n") else text + "\n"


def test_pygments_lexer_tells_the_kinds_apart():
    from pygments.token import Name

    from polc.highlight import PolLexer

    tokens = {}
    for t, v in PolLexer().get_tokens(CAR.read_text(encoding="utf-8")):
        tokens.setdefault(v, t)  # a name's first token is its declaration's
    assert tokens["tiles"] is Name.Variable.Global and tokens["k_look"] is Name.Constant
    assert tokens["look_x"] is Name.Variable and tokens["steer"] is Name.Function
    assert tokens["clip"] is Name.Builtin


def test_pygmentize_highlights_an_example():
    exe = Path(sys.executable).with_name("pygmentize")
    if not exe.exists():
        pytest.skip("pygmentize is not next to this Python")
    out = subprocess.run([str(exe), "-l", "pol", "-f", "html", str(CAR)], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert '<span class="kd">latent</span>' in out and 'class="err"' not in out


# ---- the VS Code extension ----------------------------------------------------------------------


def test_vscode_manifest_points_at_its_files():
    pkg = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    (lang,) = pkg["contributes"]["languages"]
    assert lang["id"] == "pol" and lang["extensions"] == [".pol"]
    (grammar,) = pkg["contributes"]["grammars"]
    assert grammar["scopeName"] == "source.pol" and (VSCODE / grammar["path"]).resolve() == GRAMMAR
    config = json.loads((VSCODE / lang["configuration"]).read_text(encoding="utf-8"))
    assert config["comments"]["lineComment"] == "#"
    assert (VSCODE / pkg["main"]).exists()
    assert "onLanguage:pol" in pkg["activationEvents"]


def test_vscode_extension_is_valid_javascript():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    subprocess.run([node, "--check", str(VSCODE / "extension.js")], check=True, timeout=60)


def test_vscode_semantic_token_types_are_the_servers_legend():
    from polc.lsp.document import TOKEN_KINDS

    pkg = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    assert [t["id"] for t in pkg["contributes"]["semanticTokenTypes"]] == list(TOKEN_KINDS)
    (scopes,) = pkg["contributes"]["semanticTokenScopes"]
    grammar = GRAMMAR.read_text(encoding="utf-8")
    assert all(s in grammar for kind in TOKEN_KINDS for s in scopes["scopes"][kind])

"""`polc lsp` driven over stdio by a real LSP client (pygls's LanguageClient).

One server process serves the whole module (starting it imports the compiler
once); each test opens its own documents. Diagnostics are compared with what
`polc check --verbose --format json` prints for the same file, field by field.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from lsprotocol import types as L
from pygls import uris
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient

from polc import cli
from polc.fmt import format_program
from polc.lsp import analyze_document, builtins
from polc.lsp.environment import Environments
from polc.frontend.parse import parse_program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").rglob("*.pol"))
BROKEN = sorted((ROOT / "tests" / "golden").glob("*.pol"))
CAR = ROOT / "examples" / "car_racing" / "initial.pol"
TIMEOUT = 60


def polc_command() -> list[str]:
    exe = Path(sys.executable).with_name("polc")
    return [str(exe), "lsp"] if exe.exists() else [sys.executable, "-m", "polc.cli", "lsp"]


class Session:
    """A client connected to one `polc lsp` process, driven from synchronous tests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = LanguageClient("polc-tests", "1")
        self.published: dict[str, list[L.PublishDiagnosticsParams]] = {}
        self.arrived: dict[str, asyncio.Event] = {}
        self.version = 0

        @self.client.feature(L.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: L.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append(params)
            self._event(params.uri).set()

        self.run(self.client.start_io(*polc_command()))
        self.init = self.run(self.client.initialize_async(L.InitializeParams(capabilities=L.ClientCapabilities())))

    def _event(self, uri: str) -> asyncio.Event:
        return self.arrived.setdefault(uri, asyncio.Event())

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, TIMEOUT))

    def open(self, text: str, path: Path) -> str:
        """Open `text` as the document at `path` and wait for its diagnostics."""
        uri = uris.from_fs_path(str(path))
        self._event(uri).clear()
        self.client.text_document_did_open(L.DidOpenTextDocumentParams(L.TextDocumentItem(uri, "pol", 1, text)))
        self.run(self._event(uri).wait())
        return uri

    def change(self, uri: str, text: str, wait: bool = True) -> None:
        self.version += 1
        self._event(uri).clear()
        self.client.text_document_did_change(L.DidChangeTextDocumentParams(
            L.VersionedTextDocumentIdentifier(self.version + 1, uri), [L.TextDocumentContentChangeWholeDocument(text)]))
        if wait:
            self.run(self._event(uri).wait())

    def diagnostics(self, uri: str) -> list[L.Diagnostic]:
        return self.published[uri][-1].diagnostics

    def close(self) -> None:
        self.run(self.client.shutdown_async(None))
        self.client.exit(None)
        self.run(self.client.stop())
        self.loop.close()


@pytest.fixture(scope="module")
def lsp():
    s = Session()
    yield s
    s.close()


def doc_id(uri: str) -> L.TextDocumentIdentifier:
    return L.TextDocumentIdentifier(uri)


def position_of(text: str, needle: str, offset: int = 0, nth: int = 0) -> L.Position:
    """The 0-based position of the `nth` occurrence of `needle` (plus `offset` characters)."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    i += offset
    line = text.count("\n", 0, i)
    return L.Position(line, i - (text.rfind("\n", 0, i) + 1))


# ---- diagnostics: exactly polc check's ---------------------------------------------------


def check_json(path: Path) -> list[dict]:
    """`polc check --verbose --format json`, with `--env NAME` where a task folder above the
    file names its environment (the server checks against it: `lsp/environment.py`)."""
    found = Environments().find(str(path))
    out = io.StringIO()
    with redirect_stdout(out):
        cli.main(["check", "--verbose", "--format", "json", str(path)] + (["--env", found.name] if found else []))
    return json.loads(out.getvalue())


SEVERITY = {L.DiagnosticSeverity.Error: "error", L.DiagnosticSeverity.Warning: "warning",
            L.DiagnosticSeverity.Information: "note"}


def from_lsp(d: L.Diagnostic) -> tuple:
    message, _, hint = d.message.partition("\nHint: ")
    r = d.range
    return (d.code, SEVERITY[d.severity], (r.start.line + 1, r.start.character + 1, r.end.line + 1,
                                           r.end.character + 1), message, hint or None)


def utf16_column(lines: list[str], line: int, column: int) -> int:
    """A 1-based column in characters as a 1-based column in UTF-16 units (LSP's default)."""
    text = lines[line - 1] if line <= len(lines) else ""
    head = text[: column - 1]
    return len(head.encode("utf-16-le")) // 2 + max(column - 1 - len(text), 0) + 1


def from_json(d: dict, text: str) -> tuple:
    s, lines = d["span"], text.split("\n")
    where = (1, 1, 1, 1) if s is None else (s["line"], utf16_column(lines, s["line"], s["column"]),
                                             s["end_line"], utf16_column(lines, s["end_line"], s["end_column"]))
    return (d["code"], d["severity"], where, d["message"], d["hint"])


@pytest.mark.parametrize("path", EXAMPLES + BROKEN, ids=lambda p: str(p.relative_to(ROOT)))
def test_diagnostics_are_polc_checks(lsp, path):
    text = path.read_text(encoding="utf-8")
    uri = lsp.open(text, path)
    assert [from_lsp(d) for d in lsp.diagnostics(uri)] == [from_json(d, text) for d in check_json(path)]
    assert all(d.source == "polc" for d in lsp.diagnostics(uri))


def test_the_environment_of_the_task_folder_is_checked_w0509_at_the_echo_read(lsp):
    """copycat.pol's folder has a task.md naming `env: car_racing`, whose schema says
    `steer_ind` echoes `steer`: the server warns at the read, as `polc check --env` does."""
    path = ROOT / "examples" / "car_racing" / "copycat.pol"
    text = path.read_text(encoding="utf-8")
    uri = lsp.open(text, path)
    (echo,) = [d for d in lsp.diagnostics(uri) if d.code == "W0509"]
    assert echo.severity == L.DiagnosticSeverity.Warning
    assert echo.range.start == position_of(text, "+ k_ind * steer_ind", 10)
    assert echo.message.startswith('The action "steer" depends on the observation "steer_ind", which echoes its own')


def test_a_task_md_above_the_file_names_its_environment_and_an_edit_of_it_is_seen(lsp, tmp_path):
    task = tmp_path / "task"
    (task / "drafts").mkdir(parents=True)
    (task / "task.md").write_text("---\nenv: car_racing\n---\nDrive.\n", encoding="utf-8")
    text = (ROOT / "examples" / "car_racing" / "copycat.pol").read_text(encoding="utf-8")
    uri = lsp.open(text, task / "drafts" / "mine.pol")
    assert [d.code for d in lsp.diagnostics(uri) if d.code.startswith(("W05", "E05"))] == ["W0509"]
    # The task.md now names an environment polc does not know: the next check says so.
    (task / "task.md").write_text("---\nenv: car_racin\n---\nDrive.\n", encoding="utf-8")
    os.utime(task / "task.md", ns=(1, 1))  # another mtime, however coarse the file system's clock
    lsp.change(uri, text + "\n")
    (unknown,) = [d for d in lsp.diagnostics(uri) if d.code.startswith(("W05", "E05"))]
    assert unknown.code == "E0500" and 'There is no environment "car_racin". Did you mean "car_racing"?' in unknown.message
    # Without a task folder above it, the same text gets no environment diagnostics.
    uri = lsp.open(text, tmp_path / "loose.pol")
    assert not [d for d in lsp.diagnostics(uri) if d.code.startswith(("W05", "E05"))]


def test_the_broken_programs_do_get_errors(lsp):
    """The comparison above is not vacuous: every golden program has an error the server shows."""
    for path in BROKEN[:10]:
        uri = lsp.open(path.read_text(encoding="utf-8"), path)
        assert any(d.severity == L.DiagnosticSeverity.Error for d in lsp.diagnostics(uri)), path


def test_intents_map_to_information_warning_and_error(lsp, tmp_path):
    text = """obs x : real in [-1, 1]
weight k : real = 0.5
weight g : real >= 0 = 1
latent y = g * x
latent z = k * x
latent u = x * x - 0.5
action a : real in [-1, 1] = clip(y + z + u, -1, 1)
expect y increasing in x
expect z increasing in x
"""
    uri = lsp.open(text, tmp_path / "intents.pol")
    by_line = {d.range.start.line: d for d in lsp.diagnostics(uri)}
    assert by_line[7].severity == L.DiagnosticSeverity.Information and by_line[7].code == "I0408"
    assert by_line[8].severity == L.DiagnosticSeverity.Warning and by_line[8].code == "W0406"
    lsp.change(uri, text + "expect u >= 0\n")
    by_line = {d.range.start.line: d for d in lsp.diagnostics(uri)}
    assert by_line[9].severity == L.DiagnosticSeverity.Error and by_line[9].code == "E0405"


def test_a_change_is_checked_again_and_the_last_text_wins(lsp, tmp_path):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, tmp_path / "edited.pol")
    assert not any(d.severity == L.DiagnosticSeverity.Error for d in lsp.diagnostics(uri))
    # Typing: several edits in a row; the debounced check publishes for the last one.
    for k in range(1, 4):
        lsp.change(uri, text + "latent extra = slip * sllip" + "p" * k + "\n", wait=False)
    lsp.change(uri, text + "latent extra = slip * sllip\n")
    (last,) = [d for d in lsp.diagnostics(uri) if d.code == "E0101"]
    assert 'Name "sllip" is not declared. Did you mean "slip"?' == last.message.partition("\nHint: ")[0]
    assert last.range.start == position_of(text + "latent extra = slip * sllip\n", "sllip")
    assert lsp.published[uri][-1].version == lsp.version + 1


# ---- hover ------------------------------------------------------------------------------


def hover(lsp, uri: str, pos: L.Position) -> str:
    h = lsp.run(lsp.client.text_document_hover_async(L.HoverParams(doc_id(uri), pos)))
    return "" if h is None else h.contents.value


def test_hover_on_a_weight_shows_its_constraint_initial_value_and_doc(lsp):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, CAR)
    shown = hover(lsp, uri, position_of(text, "w_slip * slip", 1))  # a use, not the declaration
    assert "**weight** `w_slip` : `real`" in shown
    assert "constraint: `<= 0`" in shown
    assert "initial value: `-0.5`" in shown
    assert "sign: nonpositive" in shown
    assert "speed change per unit of rear-wheel slip (speed-reducing)" in shown


def test_hover_on_a_weight_shows_its_prior(lsp, tmp_path):
    text = CAR.read_text(encoding="utf-8").replace(
        "weight k_center  : real >= 0 = 0.3", "weight k_center  : real >= 0 = 0.3 ~ half_normal(0.5)")
    assert "half_normal(0.5)" in text
    uri = lsp.open(text, tmp_path / "prior.pol")
    shown = hover(lsp, uri, position_of(text, "k_center * offset", 1))
    assert "prior: `half_normal(" in shown and "constraint: `>= 0`" in shown


def test_hover_on_a_latent_shows_its_proved_range_and_sign(lsp):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, CAR)
    shown = hover(lsp, uri, position_of(text, "latent slip ", 8))
    assert "**latent** `slip` : `real`" in shown
    assert "proved range: `[0, 3]` (sign: nonnegative)" in shown
    assert "rear wheels outrunning the car" in shown
    obs = hover(lsp, uri, position_of(text, "obs speed ", 5))
    assert "**obs** `speed` : `real`" in obs and "declared range: `in [0, 1.5]`" in obs


def test_hover_on_an_action_and_a_builtin(lsp):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, CAR)
    steer = hover(lsp, uri, position_of(text, "action steer", 8))
    assert "**action** `steer` : `real`" in steer and "declared range: `in [-1, 1]`" in steer
    assert "std: `[" in steer
    assert "`clip(x, lo, hi)`" in hover(lsp, uri, position_of(text, "clip(steer_cmd", 1))


def test_hover_on_an_intent_shows_its_verdict_and_witness_or_deciding_weight(lsp, tmp_path):
    text = """obs x : real in [-1, 1]
weight k : real = 0.5
latent z = k * x
latent u = x * x - 0.5
action a : real in [-1, 1] = clip(z + u, -1, 1)
expect z increasing in x
expect u >= 0
expect u <= 0.5 "a square minus a half"
"""
    uri = lsp.open(text, tmp_path / "verdicts.pol")
    deciding = hover(lsp, uri, position_of(text, "expect z", 2))
    assert "verdict: **unknown**" in deciding and "holds only if weight k is declared real >= 0" in deciding
    refuted = hover(lsp, uri, position_of(text, "expect u >= 0", 2))
    assert "verdict: **refuted**" in refuted and "u = -0.5 < 0" in refuted  # the witness
    proved = hover(lsp, uri, position_of(text, "expect u <= 0.5", 2))
    assert "verdict: **proved**" in proved and "a square minus a half" in proved
    # On a name inside an intent: the verdict and the name's own entry.
    both = hover(lsp, uri, position_of(text, "expect u >= 0", 7))
    assert "verdict: **refuted**" in both and "**latent** `u`" in both


def test_hover_still_shows_ranges_when_the_analysis_finds_an_error(lsp, tmp_path):
    """An analysis error (a std that is not provably positive) stops `polc.loads`; hover
    still has the types and ranges."""
    text = """obs x : real in [-1, 1]
weight s : real = 0.1
latent y = 2 * x
action a : real in [-1, 1] = clip(y, -1, 1) ~ normal(std = s)
"""
    uri = lsp.open(text, tmp_path / "std.pol")
    assert any(d.severity == L.DiagnosticSeverity.Error for d in lsp.diagnostics(uri))
    assert "proved range: `[-2, 2]`" in hover(lsp, uri, position_of(text, "latent y", 7))


# ---- definition, references, rename --------------------------------------------------------


def test_definition_and_references(lsp):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, CAR)
    use = position_of(text, "decreasing in slip", 14)
    loc = lsp.run(lsp.client.text_document_definition_async(L.DefinitionParams(doc_id(uri), use)))
    assert loc.range.start == position_of(text, "latent slip ", 7) and loc.uri == uri
    refs = lsp.run(lsp.client.text_document_references_async(
        L.ReferenceParams(L.ReferenceContext(include_declaration=True), doc_id(uri), use)))
    starts = sorted((r.range.start.line, r.range.start.character) for r in refs)
    expected = sorted((p.line, p.character) for p in (
        position_of(text, "latent slip ", 7), position_of(text, "w_slip * slip", 9),
        position_of(text, "decreasing in slip", 14), position_of(text, "expect slip", 7)))
    assert starts == expected
    # A word inside a doc string or a comment is not a reference.
    assert lsp.run(lsp.client.text_document_definition_async(
        L.DefinitionParams(doc_id(uri), position_of(text, "rear-wheel slip", 12)))) is None


def apply_edits(text: str, edits: list[L.TextEdit]) -> str:
    lines = text.split("\n")
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        assert e.range.start.line == e.range.end.line
        s = lines[e.range.start.line]
        lines[e.range.start.line] = s[: e.range.start.character] + e.new_text + s[e.range.end.character:]
    return "\n".join(lines)


def test_rename_rewrites_every_use_and_the_result_checks(lsp, tmp_path):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, tmp_path / "rename.pol")
    edit = lsp.run(lsp.client.text_document_rename_async(
        L.RenameParams(doc_id(uri), position_of(text, "w_slip * slip", 9), "rear_slip")))
    renamed = apply_edits(text, edit.changes[uri])
    assert "latent rear_slip " in renamed and "expect target_speed decreasing in rear_slip" in renamed
    assert "w_slip * rear_slip" in renamed and "rear-wheel slip" in renamed  # the doc string is untouched
    prog = analyze_document(renamed, "renamed.pol")
    assert [d.code for d in prog.diagnostics] == [d.code for d in analyze_document(text, "x.pol").diagnostics]


@pytest.mark.parametrize("new_name, why", [("speed", 'already declared (an obs)'), ("expect", "keyword"),
                                           ("2fast", "not a Pol name"), ("clip", "builtin function")])
def test_rename_refuses_a_clash_and_the_server_keeps_serving(lsp, new_name, why):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, CAR)
    with pytest.raises(JsonRpcException, match=re.escape(why)):
        lsp.run(lsp.client.text_document_rename_async(
            L.RenameParams(doc_id(uri), position_of(text, "latent slip ", 8), new_name)))
    assert "**latent** `slip`" in hover(lsp, uri, position_of(text, "latent slip ", 8))


# ---- completion, symbols, formatting ----------------------------------------------------------


def test_completion_offers_names_builtins_with_signatures_and_keywords(lsp, tmp_path):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, tmp_path / "complete.pol")
    lsp.change(uri, text + "latent extra = sl\n")  # a half-typed name: still checks to diagnostics only
    got = lsp.run(lsp.client.text_document_completion_async(
        L.CompletionParams(doc_id(uri), L.Position(text.count("\n"), 17))))
    items = {i.label: i for i in got.items}
    assert items["slip"].kind == L.CompletionItemKind.Variable and items["slip"].detail == "latent"
    assert items["speed"].detail == "obs real" and items["speed"].documentation == "forward speed / 100"
    assert items["clip"].detail == "clip(x, lo, hi)" and items["clip"].kind == L.CompletionItemKind.Function
    assert items["expect"].kind == L.CompletionItemKind.Keyword
    # The text does not parse while typing `latent z = `: the last names that parsed are offered.
    lsp.change(uri, text + "latent extra = \n")
    got = lsp.run(lsp.client.text_document_completion_async(
        L.CompletionParams(doc_id(uri), L.Position(text.count("\n"), 15))))
    assert "slip" in {i.label for i in got.items}


def test_every_builtin_of_the_checker_has_a_signature():
    from polc.check.expr import FUNCTIONS

    assert set(FUNCTIONS) == set(builtins.FUNCTIONS)
    lark = (ROOT / "grammar" / "pol.lark").read_text(encoding="utf-8")
    reserved = lark.split("NAME: /(?!(", 1)[1].split(")\\b)", 1)[0].split("|")
    assert set(reserved) == set(builtins.KEYWORDS)


def test_document_symbols_outline_the_program(lsp):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, CAR)
    symbols = lsp.run(lsp.client.text_document_document_symbol_async(L.DocumentSymbolParams(doc_id(uri))))
    kinds = {s.name: s.kind for s in symbols}
    assert kinds["car_racing"] == L.SymbolKind.Module
    assert kinds["tiles"] == L.SymbolKind.Field and kinds["k_look"] == L.SymbolKind.Constant
    assert kinds["slip"] == L.SymbolKind.Variable and kinds["steer"] == L.SymbolKind.Event
    assert kinds["expect slip >= 0"] == L.SymbolKind.Boolean
    assert len(symbols) == 1 + text.count("\nobs ") + text.count("\nweight ") + text.count("\nlatent ") \
        + text.count("\naction ") + text.count("\nexpect ")


def test_formatting_is_polc_fmt(lsp, tmp_path):
    # The shipped example is formatted (tests/compiler/tools/test_examples_fmt.py): undo that with extra blanks.
    text = CAR.read_text(encoding="utf-8").replace(" = ", "   =   ").replace("\n\n", "\n\n\n\n")
    uri = lsp.open(text, tmp_path / "fmt.pol")
    opts = L.FormattingOptions(tab_size=4, insert_spaces=True)
    edits = lsp.run(lsp.client.text_document_formatting_async(L.DocumentFormattingParams(doc_id(uri), opts)))
    expected = format_program(parse_program(text, "fmt.pol"))
    assert expected != text and len(edits) == 1 and edits[0].new_text == expected
    lsp.change(uri, expected)
    assert lsp.run(lsp.client.text_document_formatting_async(L.DocumentFormattingParams(doc_id(uri), opts))) in ([], ())
    lsp.change(uri, "obs x : real\nlatent y = (x +\n")
    assert lsp.run(lsp.client.text_document_formatting_async(L.DocumentFormattingParams(doc_id(uri), opts))) is None


# ---- bad input never crashes it ---------------------------------------------------------------


def mutations(text: str, n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = ["", "\x00\x01\ufeff", "(" * 5000 + "x", "obs é : real\nlatent ü = é 😋\n", text[: len(text) // 2]]
    while len(out) < n:
        i, j = sorted(rng.randrange(len(text)) for _ in range(2))
        k = rng.randrange(3)
        out.append(text[:i] + text[j:] if k == 0 else text[:i] + text[i:j][::-1] + text[j:] if k == 1
                   else text[:i] + rng.choice("()[]=:~#\",.-+*/^") + text[i:])
    return out


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_mutated_examples_never_crash_the_server(lsp, tmp_path):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, tmp_path / "mutated.pol")
    for bad in mutations(text, 30):
        lsp.change(uri, bad)
        assert all(d.message for d in lsp.diagnostics(uri))
        assert not any(d.code == "internal-error" for d in lsp.diagnostics(uri)), lsp.diagnostics(uri)
        hover(lsp, uri, L.Position(3, 5))
        lsp.run(lsp.client.text_document_document_symbol_async(L.DocumentSymbolParams(doc_id(uri))))
    lsp.change(uri, text)
    assert "**latent** `slip`" in hover(lsp, uri, position_of(text, "latent slip ", 8))


def test_positions_count_utf16_units(lsp, tmp_path):
    """An emoji is one character to the compiler and two UTF-16 units to the client."""
    text = 'obs x : real in [0, 1] "\U0001F600 wide" latent y = x + zz\naction a : real = y\n'
    uri = lsp.open(text, tmp_path / "wide.pol")
    (d,) = [d for d in lsp.diagnostics(uri) if d.code == "E0101"]
    assert d.range.start == L.Position(0, text.index("zz") + 1)
    assert "**latent** `y`" in hover(lsp, uri, L.Position(0, text.index("latent y") + 1 + 7))


def test_server_reports_its_capabilities(lsp):
    caps = lsp.init.capabilities
    assert caps.hover_provider and caps.definition_provider and caps.references_provider
    assert caps.rename_provider and caps.document_formatting_provider and caps.document_symbol_provider
    assert caps.completion_provider is not None
    assert lsp.init.server_info.name == "polc"


def test_polc_lsp_is_a_compiler_command():
    assert "lsp" in cli.COMPILER_COMMANDS
    assert os.path.exists(polc_command()[0])


def test_an_internal_error_is_kept_not_raised(monkeypatch):
    """A bug in polc on some text becomes one message the server shows; it never escapes."""
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    import polc.analysis.program

    monkeypatch.setattr(polc.analysis.program, "analyze_program", broken)
    doc = analyze_document(CAR.read_text(encoding="utf-8"), "car.pol")
    assert doc.internal_error.startswith("Internal compiler error: RuntimeError: a bug.")
    assert doc.diagnostics == [] and "slip" in doc.symbols  # the index still serves hover and completion


# ---- quick fixes and semantic tokens ------------------------------------------------------------


def code_actions(lsp, uri: str, line: int) -> list[L.CodeAction]:
    rng = L.Range(L.Position(line, 0), L.Position(line, 0))
    return lsp.run(lsp.client.text_document_code_action_async(
        L.CodeActionParams(doc_id(uri), rng, L.CodeActionContext(diagnostics=[]))))


def test_quick_fixes_apply_the_checkers_suggestions(lsp, tmp_path):
    text = CAR.read_text(encoding="utf-8")
    typo = text + "latent extra = slip * sllip\naction a2 : real in [0, 1] = clip(extra, 0, 1)\n"
    uri = lsp.open(typo, tmp_path / "fix.pol")
    (fix,) = code_actions(lsp, uri, text.count("\n"))
    assert fix.title == 'Change to "slip"' and fix.diagnostics[0].code == "E0101"
    fixed = apply_edits(typo, fix.edit.changes[uri])
    assert "latent extra = slip * slip\n" in fixed
    signs = """obs x : real in [-1, 1]
weight k : real = 0.5 "a gain of either sign"
latent z = k * x
action a : real in [-1, 1] = clip(z, -1, 1)
expect z increasing in x
"""
    uri = lsp.open(signs, tmp_path / "sign.pol")
    (fix,) = code_actions(lsp, uri, 4)
    assert fix.title == "Declare weight k : real >= 0" and fix.diagnostics[0].code == "W0406"
    fixed = apply_edits(signs, fix.edit.changes[uri])
    assert 'weight k : real >= 0 = 0.5 "a gain of either sign"' in fixed
    assert [d.code for d in analyze_document(fixed, "fixed.pol").diagnostics] == ["I0408"]  # now proved


def test_semantic_tokens_colour_names_by_kind(lsp):
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, CAR)
    legend = lsp.init.capabilities.semantic_tokens_provider.legend
    assert list(legend.token_types) == ["obs", "weight", "latent", "action"]
    data = lsp.run(lsp.client.text_document_semantic_tokens_full_async(L.SemanticTokensParams(doc_id(uri)))).data
    lines, line, char, found = text.split("\n"), 0, 0, []
    for i in range(0, len(data), 5):
        dl, dc, length, kind, mods = data[i:i + 5]
        line, char = line + dl, (char + dc if dl == 0 else dc)
        found.append((lines[line][char:char + length], legend.token_types[kind], bool(mods & 1)))
    assert ("tiles", "obs", True) in found and ("tiles", "obs", False) in found
    assert ("w_slip", "weight", False) in found and ("slip", "latent", False) in found
    assert ("steer", "action", True) in found
    assert not any(name == "slip" and kind != "latent" for name, kind, _ in found)


def test_polc_check_never_imports_the_language_server():
    code = ("import sys; from polc import cli; code = cli.main(['check', sys.argv[1]]);"
            "loaded = [m for m in ('pygls', 'lsprotocol', 'pygments', 'polc.lsp', 'polc.runtime') if m in sys.modules];"
            "assert code == 0 and not loaded, loaded")
    import subprocess

    subprocess.run([sys.executable, "-c", code, str(CAR)], check=True, capture_output=True, timeout=120)


def test_a_failing_request_is_an_lsp_error_and_the_server_keeps_serving(lsp, tmp_path):
    """A request about a file that was never opened and does not exist fails as an LSP error."""
    ghost = uris.from_fs_path(str(tmp_path / "never-written.pol"))
    with pytest.raises(JsonRpcException):
        hover(lsp, ghost, L.Position(0, 0))
    text = CAR.read_text(encoding="utf-8")
    uri = lsp.open(text, CAR)
    assert "**latent** `slip`" in hover(lsp, uri, position_of(text, "latent slip ", 8))


def test_closing_a_document_clears_its_diagnostics(lsp, tmp_path):
    uri = lsp.open("obs x : real\nlatent y = x +\n", tmp_path / "closed.pol")
    assert lsp.diagnostics(uri)
    lsp._event(uri).clear()
    lsp.client.text_document_did_close(L.DidCloseTextDocumentParams(doc_id(uri)))
    lsp.run(lsp._event(uri).wait())
    assert list(lsp.diagnostics(uri)) == []


NEW_SYNTAX = '''const lookahead = 6   # a named constant
obs state : real[6] {[0] in [0, 1.5] "speed", [2:6] in [0, 3] "wheel speeds"}
obs tiles : real[lookahead, 4] in [-5, 5]
latent slip = relu(mean(state[2:6]) - state[0])
latent ahead = nan_to_num(mean(tiles[0:lookahead, 0]))
action gas : real in [0, 1] = clip(0.7 - slip + 0 * ahead + 0 * state[1], 0, 1)
'''


def test_constants_and_element_ranges_in_hover_outline_and_completion(lsp, tmp_path):
    uri = lsp.open(NEW_SYNTAX, tmp_path / "new.pol")
    assert not [d for d in lsp.diagnostics(uri) if d.severity == L.DiagnosticSeverity.Error]
    const = hover(lsp, uri, position_of(NEW_SYNTAX, "0:lookahead", 3))
    assert "**const** `lookahead` : `real`" in const and "value: `6`" in const
    state = hover(lsp, uri, position_of(NEW_SYNTAX, "obs state", 5))
    assert "declared range: `unbounded`" in state  # element 1 has no range
    assert "per element: 0 `in [0, 1.5]`, 1 `unbounded`, 2-5 `in [0, 3]`" in state
    tiles = hover(lsp, uri, position_of(NEW_SYNTAX, "obs tiles", 5))
    assert "`real[6, 4]`" in tiles
    symbols = lsp.run(lsp.client.text_document_document_symbol_async(L.DocumentSymbolParams(doc_id(uri))))
    kinds = {s.name: (s.kind, s.detail) for s in symbols}
    assert kinds["lookahead"][0] == L.SymbolKind.Number
    assert kinds["tiles"][1] == "obs real[lookahead, 4]"
    items = lsp.run(lsp.client.text_document_completion_async(L.CompletionParams(doc_id(uri), L.Position(0, 0))))
    labels = {i.label: i for i in items.items}
    assert labels["lookahead"].kind == L.CompletionItemKind.Value
    assert labels["nan_to_num"].detail.startswith("nan_to_num(x") and "const" in labels

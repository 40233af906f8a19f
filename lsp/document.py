"""One open `.pol` document as the language server sees it: what `polc check -v`
reports, and an index of its names (declarations, references, hover text).

Nothing here imports pygls: positions are the compiler's own (1-based lines,
1-based columns counted in characters), and `server.py` converts them to the
client's units. A document whose text does not parse still gets its
diagnostics; its index is then empty, and the server keeps the last good one
for completion.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Iterator, Optional

from polc.frontend import ast
from polc import errors
from polc.messages import Diagnostic, PolError
from polc.text import claim as claim_text, constraint as constraint_text, number

from .builtins import FUNCTIONS, KEYWORDS
from .environment import Environments

# A name as the grammar spells it (grammar/pol.lark: NAME), keywords excluded.
NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_WORD = re.compile(r"[A-Za-z_0-9]")

KIND_OF_DECL = {ast.ObsDecl: "obs", ast.WeightDecl: "weight", ast.LatentDecl: "latent",
                ast.ActionDecl: "action"}


@dataclass(frozen=True)
class Symbol:
    """A declared name: its kind, its declaration and where its name is written."""

    name: str
    kind: str  # "obs", "weight", "latent", "action" (or a newer declaration's keyword)
    decl: object  # the ast declaration
    name_span: ast.Span


@dataclass
class Document:
    """The result of checking one version of a document's text."""

    text: str
    file: str
    diagnostics: list[Diagnostic]
    program: Optional[object] = None  # polc.Program when the text checks, else None
    tree: Optional[ast.Program] = None  # the untyped AST when the text parses
    typed: Optional[object] = None  # a TypedProgram when the text type-checks
    analysis: Optional[object] = None  # the Analysis when the checker passed
    symbols: dict[str, Symbol] = field(default_factory=dict)
    references: dict[str, list[ast.Span]] = field(default_factory=dict)  # uses (not the declaration)
    internal_error: Optional[str] = None  # a bug in polc met on this text (the server shows it)

    # ---- lookups at a position (1-based line and column, in characters) -------------

    def word_at(self, line: int, column: int) -> Optional[tuple[str, int, int]]:
        """The identifier under (line, column): (word, start column, end column), or None.
        A position just past the word's end counts (the cursor after the last letter)."""
        lines = self.text.split("\n")
        if not 1 <= line <= len(lines):
            return None
        s = lines[line - 1]
        i = column - 1
        if not (0 <= i < len(s) and _WORD.match(s[i])) and i > 0 and i - 1 < len(s) and _WORD.match(s[i - 1]):
            i -= 1
        if not (0 <= i < len(s) and _WORD.match(s[i])):
            return None
        start, end = i, i
        while start > 0 and _WORD.match(s[start - 1]):
            start -= 1
        while end < len(s) and _WORD.match(s[end]):
            end += 1
        word = s[start:end]
        if not NAME.fullmatch(word):
            return None  # a number
        return word, start + 1, end + 1

    def name_at(self, line: int, column: int) -> Optional[str]:
        """The declared name at the position (a declaration or a use of it), or None."""
        w = self.word_at(line, column)
        if w is None or w[0] not in self.symbols:
            return None
        word, start, _ = w
        for span in self.occurrences(word):
            if span.line == line and span.column == start:
                return word
        return None

    def occurrences(self, name: str) -> list[ast.Span]:
        """Every place `name` is written as a name: its declaration first, then its uses."""
        sym = self.symbols.get(name)
        out = [sym.name_span] if sym else []
        return out + self.references.get(name, [])

    def intent_at(self, line: int, column: int):
        """(the `expect` declaration, its IntentResult or None) containing the position, or None."""
        if self.tree is None:
            return None
        for d in self.tree.decls:
            if isinstance(d, ast.ExpectDecl) and _contains(d.span, line, column):
                result = None
                if self.analysis is not None:
                    result = next((r for r in self.analysis.intents
                                   if _contains(d.span, r.intent.span.line, r.intent.span.column)), None)
                return d, result
        return None


def _contains(span: ast.Span, line: int, column: int) -> bool:
    if (line, column) < (span.line, span.column):
        return False
    return (line, column) <= (span.end_line, span.end_column)


# ---- checking ----------------------------------------------------------------------------


def check_diagnostics(text: str, file: str) -> tuple[list[Diagnostic], Optional[object]]:
    """What `polc check --verbose FILE` reports for `text`, in its order: the errors,
    or the warnings and one note per proved intent. And the Program, if it checks."""
    doc = analyze_document(text, file)
    return doc.diagnostics, doc.program


def analyze_document(text: str, file: str, environments: Optional[Environments] = None) -> Document:
    """Check `text` and index its names. Never raises for any text: a PolError is
    diagnostics, and an internal error of the compiler is kept in `internal_error`.
    With `environments`, a program that checks is checked against the environment its
    task folder names too (`environment.Environments`: what `polc check --env` adds)."""
    doc = Document(text, file, [])
    try:
        _check(doc)
        if environments is not None and doc.program is not None:
            doc.diagnostics += environments.check(doc.typed, doc.tree, file)
    except Exception as e:  # a bug in polc: the editor shows it, the server keeps serving
        doc.internal_error = _internal(e)
    return doc


def _internal(e: Exception) -> str:
    return (f"Internal compiler error: {type(e).__name__}: {e}. This is a bug in polc, not in your "
            "program; please report it with the .pol file.")


def _position(d: Diagnostic) -> tuple:
    return (0, 0) if d.span is None else (d.span.line, d.span.column)


def _check(doc: Document) -> None:
    """`polc.loads`' phases, each run once, keeping what each produced for the index and
    hover (the AST; the typed program and analysis even when the analysis finds an error).
    The diagnostics are composed as `loads` and `polc check --verbose` compose them;
    tests/lsp/test_lsp.py compares the two on every example and golden program."""
    from polc import Program
    from polc.analysis.program import analyze_program
    from polc.check.program import check_program
    from polc.frontend.parse import parse_program

    try:
        doc.tree = parse_program(doc.text, doc.file)
    except PolError as e:
        doc.diagnostics = list(e.diagnostics)
        return
    _index(doc)
    try:
        doc.typed, warnings = check_program(doc.tree)
    except PolError as e:
        doc.diagnostics = list(e.diagnostics)
        return
    doc.analysis = analyze_program(doc.typed)
    warnings = list(warnings) + [d for d in doc.analysis.diagnostics if not d.is_error]
    found = [d for d in doc.analysis.diagnostics if d.is_error]
    if found:  # as `loads`: the errors with every warning, all at once
        doc.diagnostics = sorted(found + warnings, key=_position)
        return
    doc.program = Program(doc.typed, tuple(warnings), doc.analysis)
    doc.diagnostics = warnings + [errors.intent_proved_info(r.intent.span, r.intent.text)
                                  for r in doc.analysis.intents if r.status == "proved"]


def _index(doc: Document) -> None:
    for d in doc.tree.decls:
        name, span = getattr(d, "name", None), getattr(d, "name_span", None)
        if isinstance(d, ast.PolicyDecl) or name is None or span is None:
            continue
        kind = KIND_OF_DECL.get(type(d), type(d).__name__.removesuffix("Decl").lower())
        doc.symbols.setdefault(name, Symbol(name, kind, d, span))
    for n in _names(doc.tree.decls):
        if n.id in doc.symbols:
            doc.references.setdefault(n.id, []).append(n.span)
    for spans in doc.references.values():
        spans.sort(key=lambda s: (s.line, s.column))


def _names(node) -> Iterator[ast.Name]:
    """Every `Name` in the tree (expressions, intents, noise and priors), generically over
    the AST's dataclasses so that a new kind of node is indexed without a change here. The
    fields to visit are looked up once per node type (a tenth of a re-check's time otherwise)."""
    stack = [node]
    fields = _FIELDS
    while stack:
        x = stack.pop()
        t = type(x)
        if t is ast.Name:
            yield x
        elif t is tuple or t is list:
            stack.extend(x)
        else:
            names = fields.get(t)
            if names is None:
                names = fields[t] = _fields_of(x)
            stack.extend(getattr(x, n) for n in names)


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields_of(x) -> tuple[str, ...]:
    """The fields of an AST node that may hold names (none for a span, a string or a number)."""
    if not dataclasses.is_dataclass(x) or isinstance(x, (ast.Span, type)):
        return ()
    return tuple(f.name for f in dataclasses.fields(x))


# ---- hover text -----------------------------------------------------------------------------


def sign_of(lo: float, hi: float) -> str:
    if lo == hi == 0:
        return "zero"
    if lo > 0:
        return "positive"
    if lo >= 0:
        return "nonnegative"
    if hi < 0:
        return "negative"
    if hi <= 0:
        return "nonpositive"
    return "either sign"


def _value_text(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_value_text(x) for x in v) + "]"
    return number(v) if not isinstance(v, bool) else str(v).lower()


def _proved(doc: Document, key: str) -> list[str]:
    if doc.analysis is None or key not in doc.analysis.intervals:
        return []
    iv = doc.analysis.intervals[key]
    lo, hi = float(iv.lo), float(iv.hi)
    return [f"proved range: `{iv}` (sign: {sign_of(lo, hi)})"]


def hover_name(doc: Document, name: str) -> str:
    """Markdown: the name's kind and type, its declared and proved range and sign, its doc;
    for a weight also its constraint, initial value and prior."""
    sym = doc.symbols[name]
    t = doc.typed.decl(name) if doc.typed is not None else None
    type_text = str(t.type) if t is not None else _ast_type(sym.decl)
    lines = [f"**{sym.kind}** `{name}`" + (f" : `{type_text}`" if type_text else "")]
    if t is not None and hasattr(t, "lo") and hasattr(t, "hi"):
        label = "constraint" if sym.kind == "weight" else "declared range"
        lines.append(f"{label}: `{constraint_text(t.lo, t.hi)}`")
    if t is not None and sym.kind == "const":
        lines.append(f"value: `{_value_text(t.value)}`")
    if t is not None and getattr(t, "bounds", None) is not None:
        lines.append("per element" + (" (flat index)" if len(t.type.shape) > 1 else "") + ": "
                     + ", ".join(f"{run} `{constraint_text(lo, hi)}`" for run, lo, hi in _runs(t.bounds)))
    if t is not None and sym.kind in ("weight", "state"):  # a state: its value at an episode's start
        lines.append(f"initial value: `{_value_text(t.init)}`")
        if getattr(t, "prior", None) is not None:
            lines.append(f"prior: `{t.prior}`")
    lines += _proved(doc, name)
    if sym.kind == "action":
        for part in ("mean", "std"):
            key = f"{name}.{part}"
            if doc.analysis is not None and key in doc.analysis.intervals:
                lines.append(f"{part}: `{doc.analysis.intervals[key]}`")
    doc_string = getattr(sym.decl, "doc", None)
    if doc_string:
        lines.append("")
        lines.append(doc_string)
    return "  \n".join(lines)


def _runs(bounds) -> list[tuple[str, float, float]]:
    """Elements' ranges as runs of equal ones: ("0", lo, hi), ("2-5", lo, hi), ..."""
    out: list[list] = []
    for i, (lo, hi) in enumerate(zip(*bounds)):
        if out and out[-1][2:] == [lo, hi]:
            out[-1][1] = i
        else:
            out.append([i, i, lo, hi])
    return [(str(a) if a == b else f"{a}-{b}", lo, hi) for a, b, lo, hi in out]


def _ast_type(decl) -> str:
    spec = getattr(decl, "type", None)
    if spec is None:
        return ""
    dims = [str(n) if isinstance(n, int) else n.id for n in spec.dims]  # a constant by its name
    return spec.base + ("[" + ", ".join(dims) + "]" if dims else "")


def hover_intent(decl: ast.ExpectDecl, result) -> str:
    """Markdown: the intent's verdict and what decided it (the proof, the witness, the deciding weight)."""
    claim = decl.claim
    head = f"**expect** `{claim_text(claim)}`"
    if result is None:
        return head + "  \nverdict: not analysed (the program has errors)"
    out = [head, f"verdict: **{result.status}**", result.detail]
    if result.diagnostic is not None and result.diagnostic.hint:
        out.append(f"Hint: {result.diagnostic.hint}")
    if decl.doc:
        out += ["", decl.doc]
    return "  \n".join(out)


def hover_builtin(word: str) -> Optional[str]:
    f = FUNCTIONS.get(word)
    if f is not None:
        return f"**function** `{f.signature}`  \n{f.doc}"
    if word in KEYWORDS:
        return f"**keyword** `{word}`  \n{KEYWORDS[word]}"
    return None


def valid_new_name(doc: Document, old: str, new: str) -> Optional[str]:
    """None if `old` may be renamed to `new`, else the sentence saying why not."""
    if not NAME.fullmatch(new):
        return f'"{new}" is not a Pol name (a letter or _, then letters, digits or _).'
    if new in KEYWORDS:
        return f'"{new}" is a keyword of Pol; choose another name.'
    if new != old and new in doc.symbols:
        kind = doc.symbols[new].kind
        return f'"{new}" is already declared ({"an" if kind[0] in "aeiou" else "a"} {kind}); one namespace holds every name.'
    if new in FUNCTIONS:
        return f'"{new}" is a builtin function; a name that shadows it would read as a call.'
    return None


# ---- quick fixes for the checker's suggestions ------------------------------------------------

_DID_YOU_MEAN = re.compile(r'Did you mean "([A-Za-z_][A-Za-z_0-9]*)"\?')
_DECLARE_WEIGHT = re.compile(r"Declare `weight ([A-Za-z_][A-Za-z_0-9]*) : ([^`]+)`")


@dataclass(frozen=True)
class Fix:
    """A quick fix: a title, the diagnostic it repairs, and the text edits (span, new text)."""

    title: str
    diagnostic: Diagnostic
    edits: tuple[tuple[ast.Span, str], ...]


def _span_text(text: str, span: ast.Span) -> Optional[str]:
    lines = text.split("\n")
    if span.line != span.end_line or not 1 <= span.line <= len(lines):
        return None
    return lines[span.line - 1][span.column - 1: span.end_column - 1]


def quick_fixes(doc: Document, line: int, end_line: int) -> list[Fix]:
    """The fixes for the diagnostics on lines [line, end_line] whose suggestion is one edit:
    the did-you-mean name (E0101 and every other "Did you mean" message), and the sign to
    declare for a weight that decides an intent (W0406)."""
    out = []
    for d in doc.diagnostics:
        if d.span is None or d.span.end_line < line or d.span.line > end_line:
            continue
        m = _DID_YOU_MEAN.search(d.message)
        if m and NAME.fullmatch(_span_text(doc.text, d.span) or ""):
            out.append(Fix(f'Change to "{m.group(1)}"', d, ((d.span, m.group(1)),)))
        m = _DECLARE_WEIGHT.search(d.hint or "")
        if m and doc.tree is not None:
            decl = doc.symbols.get(m.group(1))
            if decl is not None and isinstance(decl.decl, ast.WeightDecl):
                w = decl.decl
                where = w.type.span if w.range is None else w.type.span.to(w.range.span)
                out.append(Fix(f"Declare weight {w.name} : {m.group(2)}", d, ((where, m.group(2)),)))
    return out


# ---- semantic tokens: every declared name by its kind ------------------------------------------

TOKEN_KINDS = ("obs", "weight", "latent", "action")  # the legend's token types, in order


def name_tokens(doc: Document) -> list[tuple[ast.Span, str, bool]]:
    """(span, kind, is the declaration) for every occurrence of a declared name, in text order."""
    out = []
    for name, sym in doc.symbols.items():
        if sym.kind not in TOKEN_KINDS:
            continue
        out.append((sym.name_span, sym.kind, True))
        out += [(s, sym.kind, False) for s in doc.references.get(name, [])]
    out.sort(key=lambda t: (t[0].line, t[0].column))
    return out

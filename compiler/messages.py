"""Compiler messages: what polc tells a person (or an LLM) about their program.

(`polc.runtime.diagnostics` is something else: the checks `polc analyze` runs over a trace.)
A `Span` is where a message points in the source.

A `Diagnostic` is plain data; `render` lays it out the way stanc3 does
(heading with file, line and columns; numbered source lines with carets; one
sentence; a suggestion), and `to_json` gives the same content for tools.
The constructors for every kind of diagnostic live in `errors.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from .util.record import record


@record
class Span:
    """A region of one source file. Lines and columns are 1-based; the end is
    exclusive in columns (`end_column` is one past the last character)."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def to(self, other: "Span") -> "Span":
        """The span from the start of `self` to the end of `other`."""
        return Span(self.file, self.line, self.column, other.end_line, other.end_column)


_MAX_SHOWN = 120  # characters of one source line shown in an excerpt
_RULE = "   " + "-" * 49


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # "error", "warning" or "note"
    code: str  # stable identifier, e.g. "E0201"
    phase: str  # "Syntax", "Semantic", "Analysis"
    span: Optional[Span]
    message: str  # one sentence
    hint: Optional[str] = None  # a suggestion that repairs it
    notes: tuple[tuple[Span, str], ...] = field(default_factory=tuple)

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def heading(self) -> str:
        what = f"{self.phase} {self.severity}"  # "error", "warning", or "note" (`check --verbose`)
        s = self.span
        if s is None:
            return f"{what} [{self.code}]:"
        if s.end_line == s.line:
            cols = f"column {s.column} to column {s.end_column}"
            return f"{what} [{self.code}] in '{s.file}', line {s.line}, {cols}:"
        return (
            f"{what} [{self.code}] in '{s.file}', line {s.line}, column {s.column}"
            f" to line {s.end_line}, column {s.end_column}:"
        )


def source_lines(text: str) -> list[str]:
    """The lines as the parser numbers them: split at "\r\n", "\n" and a lone "\r", as
    editors do (str.splitlines also splits at form feeds and other separators, which would
    shift every line number after them)."""
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _visible(line: str) -> str:
    """The line as printed: a tab is one space (columns count characters) and a
    control character is its visible symbol (NUL as \u2400), so carets stay aligned."""
    return "".join(" " if c == "\t" else chr(0x2400 + ord(c)) if ord(c) < 0x20 else c for c in line)


def _excerpt(span: Span, lines: Sequence[str], context: int = 1) -> list[str]:
    """Numbered source lines around `span` with carets under it."""
    first = max(1, span.line - context)
    last = min(len(lines), span.end_line)
    width = len(str(last))
    out = [_RULE]
    for n in range(first, last + 1):
        text = _visible(lines[n - 1]) if n - 1 < len(lines) else ""
        start = end = 0
        if span.line <= n <= span.end_line:
            start = span.column if n == span.line else 1 + (len(text) - len(text.lstrip()))
            end = span.end_column if n == span.end_line else len(text) + 1
            end = max(end, start + 1)
        # A very long line (a generated program) is shown as a window around the carets.
        shift = 0
        if len(text) > _MAX_SHOWN:
            left = max(0, min(start - 1 - _MAX_SHOWN // 3, len(text) - _MAX_SHOWN)) if start else 0
            shown = text[left:left + _MAX_SHOWN]
            text = ("\u2026" if left else "") + shown + ("\u2026" if left + _MAX_SHOWN < len(text) else "")
            shift = left - (1 if left else 0)
            end = min(end, left + _MAX_SHOWN + 1)
        out.append(f"   {n:>{width}}:  {text}")
        if start:
            out.append(" " * (3 + width + 3 + start - shift - 1) + "^" * max(1, end - start))
    out.append(_RULE)
    return out


def render(diag: Diagnostic, source_text: Optional[str], lines: Optional[Sequence[str]] = None) -> str:
    """The stanc3-style text of one diagnostic (`lines`: `source_lines(source_text)`, if split already)."""
    out = [diag.heading()]
    if lines is None:
        lines = source_lines(source_text) if source_text is not None else []
    if diag.span is not None and lines and diag.span.line <= len(lines) + 1:
        out += _excerpt(diag.span, lines)
    out.append(diag.message)
    if diag.hint:
        out.append(f"Hint: {diag.hint}")
    for span, note in diag.notes:
        out.append(f"Note: {note} (line {span.line}, column {span.column}).")
    return "\n".join(out)


def render_all(diags: Sequence[Diagnostic], source_text: Optional[str]) -> str:
    lines = source_lines(source_text) if source_text is not None else []  # once: 5,000 warnings, one split
    return "\n\n".join(render(d, source_text, lines) for d in diags)


def to_json(diag: Diagnostic) -> dict:
    """The same content as `render`, as a JSON-ready dict."""
    def span(s: Optional[Span]) -> Optional[dict]:
        if s is None:
            return None
        return {"file": s.file, "line": s.line, "column": s.column,
                "end_line": s.end_line, "end_column": s.end_column}

    return {
        "severity": diag.severity,
        "code": diag.code,
        "phase": diag.phase,
        "span": span(diag.span),
        "message": diag.message,
        "hint": diag.hint,
        "notes": [{"span": span(s), "message": m} for s, m in diag.notes],
    }


def dumps(diags: Sequence[Diagnostic]) -> str:
    import json  # only for --format json: `polc check` imports it otherwise never

    return json.dumps([to_json(d) for d in diags], indent=2)


class PolError(Exception):
    """Raised when a program has errors; carries every diagnostic found."""

    def __init__(self, diagnostics: Sequence[Diagnostic], source_text: Optional[str] = None):
        self.diagnostics = list(diagnostics)
        self.source_text = source_text
        super().__init__(render_all(self.diagnostics, source_text))


class InternalCompilerError(Exception):
    """A bug in polc itself, never the user's fault."""

    def __init__(self, what: str):
        super().__init__(
            f"Internal compiler error: {what}\n"
            "This is a bug in polc, not in your program; please report it with the .pol file."
        )


def ice(what: str) -> InternalCompilerError:
    return InternalCompilerError(what)


__all__ = ["Diagnostic", "InternalCompilerError", "PolError", "Span", "dumps", "ice", "render", "render_all", "source_lines", "to_json"]

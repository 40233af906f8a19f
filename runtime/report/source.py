"""Pol source on the page: syntax highlighting and the diff between two rounds.

The tokenizer follows grammar/pol.lark's terminals (keywords, types, numbers, strings,
comments); a name followed by `(` is a function. It only colours text: a source that
does not parse still shows, token by token, and every piece is escaped.
"""

from __future__ import annotations

import difflib
import re

from .page import esc

KEYWORDS = ("policy", "obs", "weight", "latent", "action", "expect", "in", "if", "then", "else", "and", "or",
            "not", "true", "false", "inf", "increasing", "decreasing")
TYPES = ("real", "bool")

_TOKEN = re.compile(r"""
    (?P<com>\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"?)
  | (?P<nm>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<word>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<other>[^#"A-Za-z_0-9.]+|.)
""", re.VERBOSE | re.DOTALL)


def highlight_line(line: str) -> str:
    """One line of Pol as HTML with `<span class=kw|ty|nm|str|com|fn>`."""
    out = []
    for m in _TOKEN.finditer(line):
        kind, text = m.lastgroup, m.group()
        if kind == "word":
            rest = line[m.end():].lstrip()
            kind = "kw" if text in KEYWORDS else "ty" if text in TYPES else "fn" if rest.startswith("(") else None
        elif kind == "other":
            kind = None
        out.append(f'<span class="{kind}">{esc(text)}</span>' if kind else esc(text))
    return "".join(out)


def highlight(source: str) -> str:
    """A whole .pol source as a highlighted `<pre>` block, with line numbers."""
    lines = source.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    width = len(str(len(lines)))
    body = "\n".join(f'<span class="ln">{i:>{width}}</span>  {highlight_line(line)}' for i, line in enumerate(lines, 1))
    return f'<pre class="pol">{body}</pre>'


def diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """A unified diff of two sources as a `<pre>` block (added lines green, removed red);
    says so when the two are the same."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name, lineterm=""))
    if not lines:
        return f'<p class="same">{esc(after_name)} is the same as {esc(before_name)}.</p>'
    out = []
    for line in lines:
        if line.startswith(("+++", "---", "@@")):
            out.append(f'<span class="hunk">{esc(line)}</span>')
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
            out.append(f'<span class="{kind}">{esc(line[:1])}{highlight_line(line[1:])}</span>')
    return '<pre class="diff pol">' + "".join(out) + "</pre>"

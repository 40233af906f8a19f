"""Pol source on the page: syntax highlighting and the diff between two rounds.

Highlighting is Pygments with polc's own Pol lexer (`polc.highlight.PolLexer`, the one
`pygmentize -l pol` uses): it tokenises a declared name by its kind, so the page colours
observations, weights, latents and actions as the graph does (the paper's Figure 2).
Lines are lexed one at a time, so the diff's lines are highlighted the same way, and a
source that does not parse still shows; Pygments escapes every piece of text.
"""

from __future__ import annotations

import difflib
import functools

from .page import esc


@functools.lru_cache(maxsize=1)
def _pygments() -> tuple:
    from pygments import highlight as pygmentize
    from pygments.formatters import HtmlFormatter

    from polc.highlight import PolLexer

    return pygmentize, PolLexer(ensurenl=False, stripnl=False), HtmlFormatter(nowrap=True)


def highlight_line(line: str) -> str:
    """One line of Pol as HTML spans with Pygments' short token classes (`kd`, `vg`, ...)."""
    pygmentize, lexer, formatter = _pygments()
    return pygmentize(line, lexer, formatter).rstrip("\n")


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

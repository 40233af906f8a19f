"""What a revision changed, declaration by declaration, as the history of later rounds shows it.

    structure_changes(before, after)
        -> ["added weight k_tc: `weight k_tc : real >= 0 = 2`",
            "changed action gas: `action gas : real in [0, 1] = clip(...) ~ normal(std = s_pedal)`",
            "removed latent slip"]

Declarations are matched by kind and name (an `expect` by its claim); one whose text
differs only in layout, comments or its doc string is unchanged. Added and changed ones
are shown as their new text without the doc string, on one line.
"""

from __future__ import annotations

import re
from typing import Any

from polc.frontend import ast
from polc.frontend.parse import parse_program

KINDS = {ast.PolicyDecl: "policy", ast.ObsDecl: "obs", ast.WeightDecl: "weight", ast.LatentDecl: "latent",
         ast.ActionDecl: "action", ast.ExpectDecl: "expect", ast.ConstDecl: "const"}
ORDER = ("obs", "const", "weight", "latent", "action", "expect", "policy")
MAX_LINES = 10  # the history stays a few lines a round


def _without_comment(line: str) -> str:
    """The line up to a `#` that is not inside a string literal."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i]
    return line


def _text(source_lines: list[str], span: Any) -> str:
    """The declaration's source text on one line, without comments or its doc string."""
    lines = source_lines[span.line - 1:span.end_line]
    lines[-1] = lines[-1][:span.end_column - 1]
    lines[0] = lines[0][span.column - 1:]
    code = " ".join(_without_comment(ln) for ln in lines)
    code = re.sub(r'\s*"(?:[^"\\]|\\.)*"\s*$', "", code.strip())  # the doc string ends a declaration
    return re.sub(r"\s+", " ", code).strip()


def _declarations(text: str) -> dict[tuple[str, str], str]:
    program = parse_program(text, "structure.pol")
    lines = program.text.splitlines()
    out = {}
    for d in program.decls:
        kind = KINDS.get(type(d))
        if kind is None:
            continue
        if kind == "policy":  # one per program: a new name is a rename, not a removal and an addition
            out[("policy", "")] = d.name
            continue
        code = _text(lines, d.span)
        out[(kind, code if kind == "expect" else d.name)] = code
    return out


def structure_changes(before: str, after: str) -> list[str]:
    """The declarations `after` adds, changes or removes relative to `before`, at most
    `MAX_LINES` lines (the rest counted on the last one); [] when the two are the same."""
    old, new = _declarations(before), _declarations(after)
    lines = []
    for key in sorted(old.keys() | new.keys(), key=lambda k: (ORDER.index(k[0]), k[1])):
        kind, name = key
        what = kind if kind == "expect" else f"{kind} {name}"
        if kind == "policy":
            if old.get(key) != new.get(key):
                lines.append(f"renamed the policy {old.get(key)} -> {new.get(key)}")
            continue
        if key not in new:
            lines.append(f"removed {what}" + (f": `{old[key]}`" if kind == "expect" else ""))
        elif key not in old:
            lines.append(f"added {what}: `{new[key]}`" if kind != "expect" else f"added `{new[key]}`")
        elif old[key] != new[key]:
            lines.append(f"changed {what}: `{old[key]}` -> `{new[key]}`" if len(old[key]) <= 60
                         else f"changed {what}: now `{new[key]}`")
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES - 1] + [f"and {len(lines) - MAX_LINES + 1} more declarations added, changed "
                                         "or removed"]
    return lines

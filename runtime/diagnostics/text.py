"""`Report.text()`: the diagnostics as compact plain text, problems first.

Layout: the header and the counts; the problems (errors, then warnings) grouped by
check; the pre-rendered tables (latent statistics); then the notes (info) and what
passed, each grouped by check (intents first among the passed: an LLM revising the
policy wants to know which claims the data support). The text stays within a
character budget: what does not fit is counted and `polc analyze --json` named, or, in a
prompt (whose reader can run no command), left out without a mention of what the reader
cannot see.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .base import CHECKS, SEVERITIES, Finding

PASSED_ORDER = ("intents", "reconstruction", "weights", "signs", "obs_range", "branches", "echo", "demo", "trace")
TABLED = ("latents",)  # checks whose passing findings the tables already show


def _grouped(findings: Sequence[Finding], order: Sequence[str]) -> list[tuple[str, list[Finding]]]:
    """Findings by check: the checks with the worst findings first, then in `order`;
    within a check, the worst first."""
    rank = {c: i for i, c in enumerate(order)}
    groups: dict[str, list[Finding]] = {}
    for f in sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), rank.get(f.check, len(rank)))):
        groups.setdefault(f.check, []).append(f)
    return sorted(groups.items(), key=lambda g: (SEVERITIES.index(g[1][0].severity), rank.get(g[0], len(rank))))


ELSEWHERE = "polc analyze --json lists every finding"


def _section(title: str, findings: Sequence[Finding], budget: float, tag: bool,
             order: Sequence[str] = CHECKS, elsewhere: Optional[str] = ELSEWHERE) -> list[str]:
    """`title`, then per check its name and one line per finding, within `budget` characters;
    the findings that do not fit are counted, by check, and `elsewhere` says where to read them.
    With `elsewhere=None` (a prompt: its reader can run no command) they are left out unmentioned."""
    if not findings:
        return []
    lines, used, hidden = [title], len(title) + 1, []
    for check, group in _grouped(findings, order):
        shown = 0
        for f in group:
            line = f"- {f.severity}: {f.message}" if tag else f"- {f.message}"
            cost = len(line) + 1 + (len(check) + 2 if not shown else 0)
            if used + cost + 100 > budget:  # room for the "not shown" line
                break
            lines += [f"{check}:"] if not shown else []
            lines.append(line)
            used += cost
            shown += 1
        if shown < len(group):
            hidden.append(f"{len(group) - shown} in {check}")
    if hidden and elsewhere is not None:
        lines.append(f"... not shown: {', '.join(hidden)} ({elsewhere})")
    return lines if len(lines) > 1 or (hidden and elsewhere is not None) else []


def _size(lines: Sequence[str]) -> int:
    return sum(len(x) + 1 for x in lines)


def render(report, budget: int, elsewhere: Optional[str] = ELSEWHERE) -> str:
    text = _render(report, budget, elsewhere)
    for _ in range(3):  # the estimates above are close; trim until the text fits
        if len(text) <= budget:
            break
        text = _render(report, budget - (len(text) - budget) - 20, elsewhere)
    return text


def _render(report, budget: int, elsewhere: Optional[str]) -> str:
    c = report.counts()
    head = [report.header, f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} note(s), "
                           f"{c['ok']} passed."]
    tables = [block for _, block in report.tables]
    used = _size(head) + _size(tables) + 4 * 2
    problems = _section("Problems:", report.problems, max(budget // 2, budget - used - 800), tag=True,
                        elsewhere=elsewhere)
    used += _size(problems)
    if used > budget:  # problems come first: drop the tables
        used -= _size(tables)
        tables = []
    notes_f = [f for f in report.findings if f.severity == "info"]
    passed_f = [f for f in report.findings if f.severity == "ok" and f.check not in TABLED]
    room = budget - used
    need_p = _size(_section("Passed:", passed_f, budget, False, PASSED_ORDER, elsewhere))
    notes = _section("Notes:", notes_f, max(room // 2, room - need_p), False, elsewhere=elsewhere)
    passed = _section("Passed:", passed_f, room - _size(notes), False, PASSED_ORDER, elsewhere)
    blocks = [head, problems or ["No problems found."], tables, notes, passed]
    return "\n\n".join("\n".join(b) for b in blocks if b) + "\n"


__all__ = ["render"]

"""Every shipped example is in `polc fmt`'s canonical form (issue 12, item 8), so a
newcomer who runs `polc fmt --check` on one sees it pass, and a diff of a revision
shows only what changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from polc.fmt import format_program
from polc.frontend.parse import parse_program

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").rglob("*.pol")
                  if "session" not in p.parts)


def test_there_are_examples():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("path", EXAMPLES)
def test_example_is_formatted(path):
    text = (ROOT / path).read_text(encoding="utf-8")
    assert format_program(parse_program(text, path)) == text, f"run `polc fmt -i {path}`"

"""A Markdown file's front matter: `key: value` lines between two `---` lines at its top.

    ---
    env: door
    latents: approach, grab
    ---
    The text the model reads.

It is the one parser of such headers: task.md in a task folder (`folder.load_task`) and
the task file `polc generate` is given both read theirs here. A value is the text after
the first colon, stripped; a line without a colon is a key with an empty value. Which
keys mean something is the caller's business.
"""

from __future__ import annotations

import re

# The header's own lines are optional (`---` then `---` is an empty header); the closing
# `---` may end the file.
_HEADER = re.compile(r"---\n(.*?\n)?---[ \t]*(?:\n|\Z)", re.DOTALL)


def front_matter(raw: str) -> tuple[dict[str, str], str]:
    """(the header's keys and values, the text after it); ({}, raw) without a header."""
    m = _HEADER.match(raw)
    if not m:
        return {}, raw
    header: dict[str, str] = {}
    for line in (m.group(1) or "").splitlines():
        key, _, value = line.partition(":")
        header[key.strip()] = value.strip()
    return header, raw[m.end():]


__all__ = ["front_matter"]

"""The prompt templates: Markdown files in `prompts/` with named placeholders `{{name}}`.

    render("repair", attempt=1, max_repairs=5, diagnostics=text)

Every placeholder of a template must be given a value and every value must be used,
so a template and the code that fills it cannot drift apart silently. Values are
inserted verbatim (code, CSV and diagnostics may contain braces of their own).
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
NAMES = ("system", "generate", "round", "rollout", "analysis-request", "feedback", "table",
         "diagnostics", "moves", "repair", "regenerate", "nonfinite", "reply-error")


class TemplateError(Exception):
    """A template was rendered with missing or unused values (a bug in polc)."""


@functools.lru_cache(maxsize=None)
def template(name: str) -> str:
    """The text of `prompts/<name>.md`."""
    if name not in NAMES:
        raise TemplateError(f"no prompt template named {name!r}; known: {', '.join(NAMES)}")
    return resources.files(__package__).joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def placeholders(name: str) -> set[str]:
    return set(PLACEHOLDER.findall(template(name)))


def render(name: str, **values: Any) -> str:
    """The template `name` with each `{{key}}` replaced by `str(values[key])`."""
    wanted = placeholders(name)
    missing, unused = wanted - set(values), set(values) - wanted
    if missing or unused:
        raise TemplateError(f"prompt template {name!r}: missing values {sorted(missing)}, "
                            f"unused values {sorted(unused)}")
    return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template(name))

"""Every Pol construct a refinement prompt suggests is documented in the system prompt's
"Pol in brief", with an example line there, and the example lines are valid Pol (issue 37:
a prompt recommended priors `~ normal(mu, sigma)` that the summary never showed).

The suggestions are the code spans (`...`) of every prompt template and of every string
the refine modules write into prompts; a span is a Pol construct when it starts with a
declaration keyword, holds a `~ FAMILY(...)`, or calls a function."""

from __future__ import annotations

import ast
import re
from importlib import resources
from pathlib import Path

import pytest

import polc
from polc.runtime.refine import templates

KEYWORDS = ("policy", "obs", "weight", "latent", "action", "expect", "const", "memory")
SPAN = re.compile(r"`([^`\n]+)`")
DISTRIBUTION = re.compile(r"~\s*([a-z_]+)\((std\s*=)?")
CALL = re.compile(r"\b([a-z_][a-z0-9_]*)\(")
PYTHON = re.compile(r"\bdf\b|\bnp\.|\bpd\.")
REFINE = Path(resources.files("polc.runtime.refine"))


def brief() -> str:
    system = templates.template("system")
    return system[system.index("# Pol in brief"):system.index("# How to reply")]


def example_lines() -> list[str]:
    """The brief's indented example block, one declaration a line, comments removed."""
    return [ln.split("#")[0].strip() for ln in brief().splitlines() if ln.startswith("    ") and ln.strip()]


def suggested_spans() -> list[tuple[str, str]]:
    """(where, span) for every code span in a template or a string of a refine module."""
    found = [(f"prompts/{name}.md", s) for name in templates.NAMES for s in SPAN.findall(templates.template(name))]
    for path in sorted(REFINE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and not _docstring(node, path):
                found += [(path.name, s) for s in SPAN.findall(node.value)]
    return found


_DOCSTRINGS: dict[Path, set[int]] = {}


def _docstring(node: ast.Constant, path: Path) -> bool:
    """Module, class and function docstrings talk to programmers, not to the model."""
    if path not in _DOCSTRINGS:
        ids = set()
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
                first = n.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    ids.add((first.value.lineno, first.value.col_offset))
        _DOCSTRINGS[path] = ids
    return (node.lineno, node.col_offset) in _DOCSTRINGS[path]


def constructs(span: str) -> list[tuple[str, re.Pattern]]:
    """What a span suggests, each with the pattern an example line of the brief must match."""
    out = []
    head = span.split()[0] if span.split() else ""
    if head in KEYWORDS:
        out.append((f"the declaration `{head}`", re.compile(rf"^{head}\b")))
    for family, named_std in DISTRIBUTION.findall(span):
        if named_std:  # an action's noise, `~ normal(std = ...)`
            out.append((f"noise `~ {family}(std = ...)`", re.compile(rf"~ {family}\(std\s*=")))
        else:  # a weight's prior, `~ normal(mu, sigma)`
            out.append((f"a prior `~ {family}(...)`", re.compile(rf"^weight\b.*~ {family}\((?!std)")))
    return out


def test_the_prompts_suggest_priors_and_noise():
    """The scan below sees what it must (so an empty scan cannot pass the next test)."""
    spans = [s for _, s in suggested_spans()]
    assert any("~ normal(mu, sigma)" in s for s in spans)
    assert any("~ normal(std = ...)" in s for s in spans)


@pytest.mark.parametrize("where,span", suggested_spans())
def test_every_suggested_construct_has_an_example_line_in_pol_in_brief(where, span):
    lines = example_lines()
    for what, pattern in constructs(span):
        assert any(pattern.search(ln) for ln in lines), \
            f"{where} suggests {what} (`{span}`), but the system prompt's \"Pol in brief\" has no example line of it"
    if PYTHON.search(span):  # analysis code, not Pol
        return
    text = brief()
    for name in CALL.findall(span):
        if name not in ("normal", "analyze"):  # analyze(df) is the analysis code's entry point
            assert re.search(rf"`{name}\b|\b{name}\(", text), \
                f"{where} suggests the function {name}() (`{span}`), which \"Pol in brief\" never names"


def test_the_brief_names_every_prior_family_the_compiler_knows():
    from polc.check.priors import FAMILIES

    for family in FAMILIES:
        assert f"`{family}(" in brief(), f"\"Pol in brief\" does not name the prior family {family}"


def test_the_briefs_weight_examples_are_valid_pol():
    """Each `weight` example line, renamed, in a small program that `polc check` accepts."""
    weights = [ln for ln in example_lines() if ln.startswith("weight ")]
    assert any("~" in ln for ln in weights), "no prior among the brief's weight examples"
    decls = [re.sub(r"^weight NAME\b", f"weight w{i}", ln) for i, ln in enumerate(weights)]
    total = " + ".join(f"w{i}" for i in range(len(decls)))
    program = "\n".join(["policy p", "obs x : real in [0, 1]", *decls,
                         f"action a : real in [-10, 10] = ({total}) * x ~ normal(std = 0.1)"]) + "\n"
    polc.loads(program, "brief.pol")

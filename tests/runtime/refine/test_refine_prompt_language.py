"""Every Pol construct a refinement prompt suggests is documented in the system prompt's
"Pol in brief", with an example line there, and the example lines are valid Pol (issue 37:
a prompt recommended priors `~ normal(mu, sigma)` that the summary never showed; issue 38:
memory, `state NAME : TYPE [RANGE] = INIT next EXPR`, is taught there with its semantics).

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

KEYWORDS = ("policy", "obs", "weight", "latent", "action", "expect", "const", "state")
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


def test_the_brief_teaches_state_with_its_semantics_and_uses():
    """Issue 38: the model learns the state construct from "Pol in brief": an example line, what
    reading a state and `next` mean, and the three uses a controls engineer reaches for."""
    text = brief()
    assert any(ln.startswith("state NAME") and " next " in ln for ln in example_lines()), \
        "\"Pol in brief\" has no example line of a `state` declaration"
    for phrase in ("its value at the start of this step", "becomes its value at the next step, clipped to its range",
                   "a velocity from positions", "integral action", "a phase or mode"):
        assert phrase in text, f"\"Pol in brief\" does not say {phrase!r} about states"


def test_the_briefs_state_lines_are_valid_pol():
    """The `state` example line (renamed) and every `state ...` span the brief shows, each in a
    small program whose other free names are observations, pass `polc check`."""
    line = next(ln for ln in example_lines() if ln.startswith("state NAME"))
    spans = [re.sub(r"\bEXPR\b", "x", line.replace("NAME", "s"))]
    spans += [s for s in SPAN.findall(brief()) if s.startswith("state ")]
    assert len(spans) >= 3, spans
    for span in spans:
        state = span.split()[1]
        names = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", re.sub(r'"[^"]*"', "", span)))
        free = sorted(names - {state, "state", "real", "bool", "in", "next", "if", "then", "else", "true", "false",
                               "and", "or", "not"})
        program = "\n".join(["policy p", *(f"obs {n} : real in [-1, 1]" for n in free), span,
                             f"action a : real in [-1, 1] = if {state} then 1 else 0" if "bool" in span.split("=")[0]
                             else f"action a : real in [-1, 1] = clip({state}, -1, 1)"]) + "\n"
        polc.loads(program, "brief.pol")

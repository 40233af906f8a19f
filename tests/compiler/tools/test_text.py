"""polc.text: one wording for a number, a range and an intent's claim, wherever polc writes one.

The unit tests pin the wording; the last tests read the same weight's range back from the
places that used to format it each their own way (`polc graph`, the generated code, the
language server's hover, the report, the refinement prompt, the C header) and check
they agree.
"""

from __future__ import annotations

import math

import jax
import pytest

import polc
from polc import graph, text
from polc.backend.emit import emit_python
from polc.backend.emit_c import emit_c, weight_values
from polc.fmt import format_text
from polc.backend.lower import lower
from polc.lsp.document import analyze_document, hover_intent, hover_name
from polc.frontend.parse import parse_program
from polc.runtime.refine import context
from polc.runtime.report.run import weights_table

INF = math.inf

SRC = """policy p
obs speed : real in [0, 1.5] "forward speed"
obs gap : real >= 0.25 "distance ahead"
weight k : real >= 0 = 0.5
weight c : real <= 0 = -0.5
weight u : real = 0.1
weight big : real in [0, 2000000] = 1000
latent y = k * speed + c * gap + u + 0 * big
action a : real in [-1, 1] = clip(y, -1, 1)
expect a increasing in speed
"""


@pytest.mark.parametrize("x, expected", [
    (3.0, "3"), (-0.0, "0"), (1.5e6, "1500000"), (0.1234567, "0.123457"), (2.5e-7, "2.5e-07"),
    (1e15, "1e+15"), (INF, "inf"), (-INF, "-inf"), (math.nan, "nan"),
])
def test_number_writes_whole_numbers_in_full_and_others_with_six_digits(x, expected):
    assert text.number(x) == expected


def test_number_takes_the_digits_a_caller_asks_for():
    assert text.number(0.1234567, 3) == "0.123"
    assert text.number(1234567.0, 3) == "1234567"  # a whole number is never rounded


@pytest.mark.parametrize("lo, hi, expected", [
    (0.0, 1.5, "in [0, 1.5]"), (0.0, INF, ">= 0"), (-INF, 2.0, "<= 2"), (-INF, INF, ""),
])
def test_bounds_read_as_a_declaration_writes_them(lo, hi, expected):
    assert text.bounds(lo, hi) == expected


def test_constraint_says_unbounded_where_bounds_would_be_empty():
    assert text.constraint(-INF, INF) == "unbounded"
    assert text.constraint(0.0, INF) == ">= 0"


def test_interval_writes_open_ends_as_inf():
    assert text.interval(0.0, INF) == "[0, inf]"
    assert text.interval(-1.0, 1.0) == "[-1, 1]"


@pytest.mark.parametrize("claim", ["a increasing in speed", "a in [-1, 1]", "a >= -1", "a < 1"])
def test_claim_reads_as_the_source_writes_it(claim):
    prog = parse_program(f"policy p\nobs speed : real in [0, 1]\naction a : real in [-1, 1] = speed\nexpect {claim}\n",
                      "c.pol")
    assert text.claim(prog.decls[-1].claim) == claim


@pytest.fixture(scope="module")
def checked():
    return polc.loads(SRC, "p.pol", analyze=False)


def test_every_place_writes_a_weights_range_the_same_way(checked):
    tp = checked.typed
    labels = {n.name: n.label for n in graph.nodes(tp)}
    module = emit_python(tp)
    policy = lower(tp)
    header = emit_c(tp, weight_values(tp, policy.init(jax.random.PRNGKey(0)), "init", policy), "p.h").h
    doc = analyze_document(SRC, "p.pol")
    table = weights_table(checked, None)
    for name, written in [("k", ">= 0"), ("c", "<= 0"), ("big", "in [0, 2000000]")]:
        assert labels[name] == f"real {written}"
        assert f"'{name}': " in module and f"  # {written}" in module
        assert f"{written} */" in header
        assert f"constraint: `{written}`" in hover_name(doc, name)
        assert f"<td>{written.replace('>', '&gt;').replace('<', '&lt;')}</td>" in table
    assert "constraint: `unbounded`" in hover_name(doc, "u")
    assert "<td>unbounded</td>" in table
    assert "  # unbounded" in module


def test_the_prompt_and_the_hover_write_an_observations_range_as_declared(checked):
    fields = [type("F", (), {"name": o.name, "shape": (), "lo": o.lo, "hi": o.hi, "doc": o.doc})
              for o in checked.typed.obs]
    assert context.env_fields(fields) == ('- speed : real in [0, 1.5]  "forward speed"\n'
                                          '- gap : real >= 0.25  "distance ahead"')
    doc = analyze_document(SRC, "p.pol")
    assert "declared range: `>= 0.25`" in hover_name(doc, "gap")


def test_the_formatter_and_the_hover_write_a_claim_the_same_way():
    doc = analyze_document(SRC, "p.pol")
    decl = doc.tree.decls[-1]
    assert format_text(SRC).splitlines()[-1] == "expect a increasing in speed"
    assert hover_intent(decl, None).startswith("**expect** `a increasing in speed`")

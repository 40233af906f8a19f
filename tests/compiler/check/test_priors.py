"""Priors on weights (`weight k : real >= 0 = 0.3 ~ normal(0.3, 0.1)`): parse, check,
fmt, graph, JSON, and the compiled `log_prior` against SciPy's densities and the
emitted module. The errors themselves are golden files (tests/golden/71_* to 75_*)."""

from __future__ import annotations

import importlib.util
import json

import jax
import numpy as np
import pytest
import scipy.stats as st

import polc
from polc.frontend import ast
from polc.backend.emit import emit_json, emit_python
from polc.fmt import format_program
from polc.graph import to_dot
from polc.frontend.parse import parse_program

SRC = '''policy p "priors of every family"
obs x : real in [-1, 1]
weight k_center : real >= 0 = 0.3 ~ normal(0.3, 0.1) "steer back per half-width"
weight gains : real[2] >= 0 = [0.5, 2] ~ lognormal(mu = 0, sigma = 0.5)
weight k_yaw : real >= 0 = 0.05 ~ half_normal(0.2)
weight rate : real in [0, 5] = 0.3 ~ exponential(1.5)
weight bias : real = 0.1
action a : real = k_center * x + gains[0] * gains[1] * k_yaw * rate + bias ~ normal(std = 0.1)
'''


def test_a_prior_parses_after_the_initial_value_with_its_span():
    (_, _, w, g, *_rest) = parse_program(SRC, "p.pol").decls
    assert isinstance(w.prior, ast.Prior) and w.prior.dist == "normal"
    assert [a.value for a in w.prior.args] == [0.3, 0.1] and w.doc == "steer back per half-width"
    line = SRC.splitlines()[2]
    assert line[w.prior.span.column - 1: w.prior.span.end_column - 1] == "~ normal(0.3, 0.1)"
    assert [k.name for k in g.prior.kwargs] == ["mu", "sigma"] and g.prior.args == ()


def test_check_resolves_families_keywords_and_array_weights():
    tp = polc.loads(SRC, "p.pol").typed
    priors = {w.name: w.prior for w in tp.weights}
    assert (priors["k_center"].family, priors["k_center"].args) == ("normal", (0.3, 0.1))
    assert (priors["gains"].family, priors["gains"].args) == ("lognormal", (0.0, 0.5))
    assert str(priors["k_yaw"]) == "half_normal(0.2)" and priors["bias"] is None


@pytest.mark.parametrize("decl, code", [
    ("weight w : real = 1 ~ lognormal(0, 1)", "E0310"),          # unconstrained: negative values allowed
    ("weight w : real <= 0 = -1 ~ half_normal(1)", "E0310"),     # never inside the support
    ("weight w : real >= -1 = 0.5 ~ exponential(2)", "E0310"),   # partly outside
    ("weight w : real = -1 ~ exponential(2)", "E0311"),          # the start itself is outside
    ("weight w : real >= 0 = 1 ~ normal(0, -1)", "E0309"),
    ("weight w : real >= 0 = 1 ~ exponential(rate = 0)", "E0309"),
    ("weight w : real >= 0 = 1 ~ gaussian(0, 1)", "E0307"),
    ("weight w : real >= 0 = 1 ~ normal(x, 1)", "E0308"),
    ("weight w : real >= 0 = 1 ~ normal(1)", "E0206"),
    ("weight w : real >= 0 = 1 ~ normal(1, sd = 2)", "E0207"),
])
def test_bad_priors_are_located_errors(decl, code):
    with pytest.raises(polc.PolError) as e:
        polc.loads(f"obs x : real\n{decl}\naction a : real = w * x\n", "t.pol")
    assert [d.code for d in e.value.diagnostics] == [code]
    assert e.value.diagnostics[0].span.line == 2 and e.value.diagnostics[0].hint


def test_normal_fits_any_constraint_as_a_truncated_prior():
    for decl in ("weight w : real = 1 ~ normal(0, 1)", "weight w : real <= 0 = -1 ~ normal(0, 1)",
                 "weight w : real in [0.5, 2] = 1 ~ lognormal(0, 1)"):
        polc.loads(f"obs x : real\n{decl}\naction a : real = w * x\n", "t.pol")


def test_fmt_keeps_priors_and_is_idempotent():
    messy = SRC.replace("~ normal(0.3, 0.1)", "~normal( 0.3,0.1 )").replace("= [0.5, 2] ~", "=[0.5,2]~")
    once = format_program(parse_program(messy, "p.pol"))
    assert "weight k_center : real >= 0 = 0.3 ~ normal(0.3, 0.1)" in once
    assert "~ lognormal(mu = 0, sigma = 0.5)" in once
    assert format_program(parse_program(once, "p.pol")) == once
    again = [w.prior for w in polc.loads(once, "p.pol").typed.weights]
    assert [(p.family, p.args) for p in again if p] == [
        ("normal", (0.3, 0.1)), ("lognormal", (0.0, 0.5)), ("half_normal", (0.2,)), ("exponential", (1.5,))]


def test_graph_and_json_show_the_prior():
    tp = polc.loads(SRC, "p.pol").typed
    assert "real &gt;= 0 ~ normal(0.3, 0.1)" in to_dot(tp)
    nodes = {n["name"]: n for n in json.loads(emit_json(tp))["nodes"]}
    assert nodes["gains"]["prior"] == {"family": "lognormal", "args": [0.0, 0.5]}
    assert nodes["bias"]["prior"] is None


def _scipy_log_prior(v: dict) -> float:
    return float(st.norm(0.3, 0.1).logpdf(v["k_center"]) + st.lognorm(s=0.5, scale=1.0).logpdf(v["gains"]).sum()
                 + st.halfnorm(scale=0.2).logpdf(v["k_yaw"]) + st.expon(scale=1 / 1.5).logpdf(v["rate"]))


def test_log_prior_is_the_sum_of_the_declared_densities_at_the_constrained_values(tmp_path):
    policy = polc.loads(SRC, "p.pol").compile()
    params = policy.init(jax.random.PRNGKey(0))
    path = tmp_path / "p_emit.py"
    path.write_text(emit_python(policy.program))
    spec = importlib.util.spec_from_file_location("p_emit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(0)
    for _ in range(3):
        moved = {k: v + rng.normal(size=np.shape(v)).astype(np.float32) for k, v in params.items()}
        values = {k: np.asarray(v, np.float64) for k, v in policy.constrain(moved).items()}
        want = _scipy_log_prior(values)
        assert float(policy.log_prior(moved)) == pytest.approx(want, rel=1e-5, abs=1e-4)
        assert float(module.log_prior(moved)) == pytest.approx(float(policy.log_prior(moved)), rel=1e-6)
    grads = jax.grad(policy.log_prior)(params)
    assert float(grads["bias"]) == 0.0 and np.all(np.isfinite(np.asarray(grads["gains"])))


def test_a_program_without_priors_has_a_zero_log_prior():
    policy = polc.loads("obs x : real\nweight w : real = 1\naction a : real = w * x\n", "t.pol").compile()
    assert float(policy.log_prior(policy.init(jax.random.PRNGKey(0)))) == 0.0

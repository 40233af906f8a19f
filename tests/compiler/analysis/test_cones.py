"""The analysis works in each intent's cone: a cone pass knows what a whole
pass knows about its target, the counterexample search runs only the cone
(and batches its checks) without changing the witness, and the work, counted
in abstract node evaluations, grows linearly with the program."""

import importlib.util
import pathlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from polc.analysis import counterexample as C
from polc.check import typed as T
from polc.analysis.abstract import run_cone, run_pass
from polc.analysis.program import analyze_program
from polc.check.program import check_program
from polc.analysis.deps import Deps
from polc.analysis.intervals import Interval
from polc.frontend.parse import parse_program
from test_differential import programs  # the shared random program writer
from tiers import examples

ROOT = pathlib.Path(__file__).resolve().parents[3]


def typed(text: str) -> T.TypedProgram:
    tp, _ = check_program(parse_program(text, "t.pol"))
    return tp


def generated(lines: int) -> T.TypedProgram:
    """The benchmark's generated program (benchmarks/gen_program.py, imported by path)."""
    spec = importlib.util.spec_from_file_location("gen_program", ROOT / "benchmarks" / "gen_program.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return typed(gen.generate(lines))


def size(e: T.TExpr) -> int:
    """Expression nodes under `e`, names not counted (the interpreter looks those up)."""
    return (not isinstance(e, T.Ref)) + sum(size(c) for c in T.children(e))


def node_size(n) -> int:
    return size(n.expr) + (size(n.std) if isinstance(n, T.Action) and n.std is not None else 0)


def same(a, b) -> bool:
    return (a.dir, a.why, a.iv.shape) == (b.dir, b.why, b.iv.shape) and a.iv == b.iv


# ---- a cone pass is a whole pass, restricted to what the target needs -------------------------


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=programs())
def test_a_cone_pass_knows_what_a_whole_pass_knows_about_its_target(text):
    tp = typed(text)
    base = run_pass(tp, report=True)
    signed = [w for w in tp.weights if w.lo < 0 < w.hi]
    for var in [None, *(d.name for d in (*tp.obs, *tp.weights, *tp.nodes))]:
        restricts = [{}] + [{w.name: Interval(lo, hi).broadcast_to(w.type.shape)}
                            for w in signed if w.name != var for lo, hi in ((w.lo, 0.0), (0.0, w.hi))]
        for restrict in restricts:
            whole = run_pass(tp, var=var, restrict=restrict)
            for node in tp.nodes:
                cone = run_cone(base, node.name, var, restrict)
                assert same(cone.env[node.name], whole.env[node.name]), (var, list(restrict), node.name, text)


def test_a_cone_pass_evaluates_only_the_changed_part_of_the_cone():
    tp = typed("""
obs x : real in [-1, 1]
obs y : real in [0, 2]
weight k : real = 1
latent far = exp(y) * sin(y) + log(1 + y)
latent near = k * x + far
latent other = far * x
action u : real = near + other
""")
    base = run_pass(tp, report=True)
    cone = run_cone(base, "near", "x")
    assert cone.env["near"].dir == "unknown"  # k's sign is open
    assert cone.evaluated == 2  # `k * x` and `k * x + far`: nothing of far, other or u
    signed = run_cone(base, "near", "x", {"k": Interval(0.0, np.inf)})
    assert signed.env["near"].dir == "increasing" and signed.evaluated == 2
    assert run_cone(base, "far", None, {"k": Interval(0.0, 1.0)}).evaluated == 0


# ---- the counterexample search runs the cone, and batches without changing a thing --------


REFUTED = [
    (ROOT / "tests" / "golden" / "60_intent_refuted.pol").read_text(),
    """
obs x : real[3] in [-2, 2]
obs y : real in [0.5, 4]
weight a : real = 0.5
weight b : real[3] >= -1 = [0, 1, 2]
weight c : real in [-1, 1] = 0.2
latent s = sum(b * x) + a * y
latent t = if s > 0 then c * s else s / y
latent unrelated = exp(a) + y
action u : real in [-1, 1] = tanh(t) + 0 * unrelated
expect t increasing in y
expect t >= -3
expect s decreasing in a
""",
]


@pytest.mark.parametrize("text", REFUTED)
def test_batched_simplification_finds_the_point_one_by_one_checks_find(text, monkeypatch):
    tp = typed(text)
    one_by_one = []
    real = C.simplify

    def sequential(tp, intent, p, check, var_iv, check_many=None):
        return real(tp, intent, p, check, var_iv)  # without check_many: one check per change

    for intent in tp.intents:
        var_iv = run_pass(tp).env[intent.var].iv if isinstance(intent, T.MonoIntent) else None
        batched = C.search(tp, intent, var_iv)
        with monkeypatch.context() as m:
            m.setattr(C, "simplify", sequential)
            one_by_one.append((batched, C.search(tp, intent, var_iv)))
    assert all(a == b for a, b in one_by_one)
    assert any(a is not None for a, _ in one_by_one)  # the cases do reach the simplification


def test_the_cone_program_holds_what_the_target_is_computed_from():
    tp = typed(REFUTED[1])
    cone = C.cone_program(tp, "s")
    assert [n.name for n in cone.nodes] == ["s"]
    assert [w.name for w in cone.weights] == ["a", "b"] and [o.name for o in cone.obs] == ["x", "y"]
    assert cone.intents == ()
    assert [n.name for n in C.cone_program(tp, "u").nodes] == ["s", "t", "unrelated", "u"]


# ---- the work grows linearly ---------------------------------------------------------------


def test_each_intent_evaluates_at_most_its_cone():
    tp = generated(500)
    deps = Deps(tp)
    analysis = analyze_program(tp)
    assert analysis.intents and all(r.status == "proved" for r in analysis.intents)
    for r in analysis.intents:
        cone = sum(node_size(deps.nodes[n]) for n in deps.cone(r.intent.target))
        assert r.evaluations <= cone, r.intent.text


def test_analysis_work_grows_linearly_with_the_program():
    work, sizes = [], []
    for lines in (500, 1500):
        tp = generated(lines)
        sizes.append(sum(node_size(n) for n in tp.nodes))
        work.append(analyze_program(tp).evaluations)
        assert work[-1] <= 2 * sizes[-1]  # the whole-program pass once, plus small cones
    assert work[1] / work[0] <= 1.1 * sizes[1] / sizes[0]


def _chain(n: int) -> str:
    """n latents in a chain, each with a monotonicity intent in the chain's start."""
    lines = ["policy chain", 'obs x : real in [-1, 1] "x"', 'obs y : real in [-1, 1] "y"']
    prev = "x"
    for i in range(n):
        lines += [f"weight w{i} : real >= 0 = 0.5", f"latent l{i} = {prev} + w{i} * y",
                  f"expect l{i} increasing in x"]
        prev = f"l{i}"
    return "\n".join(lines + [f"action a : real in [-1, 1] = clip({prev}, -1, 1)"])


def test_intents_along_a_chain_cost_linear_work_and_keep_their_verdicts():
    from polc.analysis.program import decide

    work = []
    for n in (30, 300):
        tp = typed(_chain(n))
        analysis = analyze_program(tp)
        assert [r.status for r in analysis.intents] == ["proved"] * n
        work.append(analysis.evaluations)
    # One cone pass for all intents in x: 10x the chain, 10x the work (one pass each: ~100x).
    assert work[1] / work[0] <= 11
    base = run_pass(tp, report=True)
    alone = [decide(tp, i, base) for i in tp.intents[::37]]  # each intent with its own cone pass
    assert [(r.status, r.detail) for r in alone] == [(r.status, r.detail) for r in analysis.intents[::37]]

"""The analysis is sound on random programs: every value the reference
interpreter computes lies in the range the analysis gives it, and every
direction the rules claim holds between two nearby inputs.

The programs come from the differential test's generator (every operation,
function, reduction, index form, selection, vector literal and mlp); inputs
come from the counterexample search's samplers, which reach far into
unbounded ranges and hit range ends exactly."""

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from polc import counterexample as C, reference
from polc.abstract import DEC, INC, run_pass
from polc.analyze import analyze_program
from polc.check import check_program
from polc.parse import parse_program
from test_differential import programs  # the shared random program writer
from tiers import examples

N = 64


def inputs(tp, rng):
    weights = {w.name: C.sample_weight(w, rng, N) for w in tp.weights}
    obs = {o.name: C.sample_obs(o, rng, N) for o in tp.obs}
    return weights, obs, reference.random_mlp_params(tp, rng)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=programs(), seed=st.integers(0, 2**31 - 1))
def test_every_computed_value_is_inside_its_interval(text, seed):
    tp, _ = check_program(parse_program(text, "random.pol"))
    analysis = analyze_program(tp)
    weights, obs, mlps = inputs(tp, np.random.default_rng(seed))
    out = reference.run(tp, weights, obs, mlps, batch=N)
    values = {**out.values, **{k + ".mean": v for k, v in out.means.items()},
              **{k + ".std": v for k, v in out.stds.items()}}
    for name, value in values.items():
        iv = analysis.elementwise[name]
        v = np.asarray(value, dtype=float)
        ok = np.isnan(v) | ((iv.lo <= v) & (v <= iv.hi))
        assert ok.all(), f"{name} outside {iv} in\n{text}"


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=programs(), seed=st.integers(0, 2**31 - 1))
def test_every_claimed_direction_holds(text, seed):
    tp, _ = check_program(parse_program(text, "random.pol"))
    rng = np.random.default_rng(seed)
    weights, obs, mlps = inputs(tp, rng)
    for o in tp.obs:
        dirs = {n: a.dir for n, a in run_pass(tp, var=o.name).env.items()
                if n in {node.name for node in tp.nodes} and a.dir in (INC, DEC)}
        if not dirs:
            continue
        low = obs[o.name]
        step = 10.0 ** rng.uniform(-3, 1, low.shape) * (rng.random(low.shape) < 0.7)
        high = np.clip(low + step, o.lo, o.hi)
        at_low = reference.run(tp, weights, obs, mlps, {o.name: low}, batch=N).values
        at_high = reference.run(tp, weights, obs, mlps, {o.name: high}, batch=N).values
        for name, d in dirs.items():
            a, b = np.asarray(at_low[name], float), np.asarray(at_high[name], float)
            change = (b - a) if d == INC else (a - b)
            tol = 1e-9 * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
            bad = np.isfinite(a) & np.isfinite(b) & (change < -tol)
            assert not bad.any(), f"{name} claimed {d} in {o.name} in\n{text}"

"""The analysis is sound on random programs: every value the reference
interpreter computes lies in the range the analysis gives it, and every
direction the rules claim holds between two nearby inputs.

The programs come from the differential test's generator (every operation,
function, reduction, index form, selection, vector literal and mlp); inputs
come from the counterexample search's samplers, which reach far into
unbounded ranges and hit range ends exactly."""

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from polc.analysis import counterexample as C, reference
from polc.analysis.abstract import DEC, INC, run_pass
from polc.analysis.program import analyze_program
from polc.check.program import check_program
from polc.frontend.parse import parse_program
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


# ---- rational forms: (a + m B) / (c + k B), both sides moving with one B ----------------------

_RANGES = ["in [0, 3]", ">= 0", "in [-2, 2]", "<= 0", "in [0.5, 4]", ""]
_CONSTRAINTS = [(">= 0", "0.5"), ("in [0.1, 2]", "1"), ("", "0.3"), ("<= 0", "-0.5"), ("in [-1, 1]", "0.2")]
_BASES = ["p", "exp(p)", "-p", "tanh(p)", "relu(p - 1)", "square(p)", "b", "sigmoid(p) * 2"]
_CONSTS = ["1", "s", "o", "2 * t", "abs(t) + 0.5", "-1", "0"]


@st.composite
def rational_programs(draw):
    """A program `f = (a + m B) / (c + k B)` in every spelling the rule reads: `k * B`, `B * k`,
    `B / k`, `-B`, terms in either order, minus signs; B a latent or written out twice."""
    base = draw(st.sampled_from(_BASES))

    def multiple():
        c = draw(st.sampled_from(_CONSTS[:5]))
        return draw(st.sampled_from([f"{c} * {base}", f"{base} * ({c})", f"{base} / ({c} + 3)", f"-{base}",
                                     base]))

    def affine(moving: bool):
        parts = [draw(st.sampled_from(_CONSTS))]
        if moving or draw(st.booleans()):
            parts.append(multiple())
        draw(st.randoms()).shuffle(parts)
        out = parts[0]
        for x in parts[1:]:
            out += draw(st.sampled_from([" + ", " - "])) + f"({x})"
        return out

    (cs, ci), (ct, ti) = draw(st.sampled_from(_CONSTRAINTS)), draw(st.sampled_from(_CONSTRAINTS))
    return "\n".join([
        f"obs p : real {draw(st.sampled_from(_RANGES))}",
        f"obs o : real {draw(st.sampled_from(_RANGES))}",
        f"weight s : real {cs} = {ci}",
        f"weight t : real {ct} = {ti}",
        "latent b = 0.5 * p + 1",
        f"latent f = ({affine(True)}) / ({affine(True)})",
        "action act : real = f + 0 * b + 0 * o + 0 * s + 0 * t",
    ]) + "\n"


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=rational_programs(), seed=st.integers(0, 2**31 - 1))
def test_a_proved_direction_through_a_rational_form_holds(text, seed):
    """Sampled points never contradict a direction the rules claim for `f` in `p` (two values of
    `p`, everything else held), nor a value its interval."""
    tp, _ = check_program(parse_program(text, "rational.pol"))
    rng = np.random.default_rng(seed)
    weights, obs, mlps = inputs(tp, rng)
    analysis = analyze_program(tp)
    d = run_pass(tp, var="p").env["f"].dir
    p = next(o for o in tp.obs if o.name == "p")
    low = obs["p"]
    step = 10.0 ** rng.uniform(-3, 1, low.shape) * (rng.random(low.shape) < 0.8)
    high = np.clip(low + step, p.lo, p.hi)
    a = np.asarray(reference.run(tp, weights, obs, mlps, {"p": low}, batch=N).values["f"], float)
    b = np.asarray(reference.run(tp, weights, obs, mlps, {"p": high}, batch=N).values["f"], float)
    iv = analysis.elementwise["f"]
    for v in (a, b):  # a zero divisor's inf is outside by design (W0402 reports it)
        assert (~np.isfinite(v) | ((iv.lo <= v) & (v <= iv.hi))).all(), f"f outside {iv} in\n{text}"
    if d not in (INC, DEC):
        return
    change = (b - a) if d == INC else (a - b)
    tol = 1e-9 * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
    bad = np.isfinite(a) & np.isfinite(b) & (change < -tol)
    assert not bad.any(), f"f claimed {d} in p in\n{text}"


def test_the_rational_rule_is_exercised():
    """The property above is not vacuous: forms both sides of which move are proved."""
    for body, want in (("p / (1 + s * p)", INC), ("(2 + 3 * p) / (1 + p)", INC), ("(1 - p) / (p * s + 2)", DEC),
                       ("-b / (o + 1 + b)", DEC)):
        text = ("obs p : real >= 0\nobs o : real in [0, 3]\nweight s : real >= 0 = 0.5\nlatent b = 0.5 * p + 1\n"
                f"latent f = {body}\naction act : real = f + 0 * b + 0 * o\n")
        tp, _ = check_program(parse_program(text, "rational.pol"))
        assert run_pass(tp, var="p").env["f"].dir == want, body


# ---- ranges per element, and guards of non-finite values -----------------------------------------

_PART_RANGES = ["in [0, 1.5]", "in [-3, 3]", ">= 2", "<= -1", "in [0.25, 0.5]", "in [-1e3, 1e3]"]


@st.composite
def element_programs(draw):
    """An observation `v : real[n]` whose `{...}` block gives disjoint slices their own ranges,
    read by index, slice and reduction, some reads guarded with isfinite / nan_to_num."""
    n = draw(st.integers(2, 6))
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1)))
    bounds = [0] + cuts + [n]
    parts = []
    for a, b in zip(bounds, bounds[1:]):
        if draw(st.booleans()):
            index = f"[{a}]" if b == a + 1 and draw(st.booleans()) else f"[{a}:{b}]"
            parts.append(f"{index} {draw(st.sampled_from(_PART_RANGES))}")
    block = (" {" + ", ".join(parts) + "}") if parts else ""
    i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
    a = draw(st.integers(0, n - 1))
    b = draw(st.integers(a + 1, n))
    rep = draw(st.sampled_from(["", ", nan = 0.5", ", nan = -2, posinf = 4, neginf = -4"]))
    return "\n".join([
        f"obs v : real[{n}]{block}",
        "weight k : real in [-2, 2] = 0.5",
        f"latent x = v[{i}] * k - v[{j}]",
        f"latent s = sum(v[{a}:{b}]) + max(v[{a}:{b}])",
        f"latent g = nan_to_num(v[{i}]{rep}) + nan_to_num(x{rep})",
        f"latent f = if isfinite(v[{j}]) then v[{j}] else 0",
        "action act : real = x + s + g + f",
    ]) + "\n"


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=element_programs(), seed=st.integers(0, 2**31 - 1), poison=st.booleans())
def test_element_ranges_and_guards_are_sound(text, seed, poison):
    """Every value lies in its interval for observations inside their elements' ranges; and the
    guards' values do even where an observation is nan or +-inf (outside every range)."""
    tp, _ = check_program(parse_program(text, "elements.pol"))
    analysis = analyze_program(tp)
    rng = np.random.default_rng(seed)
    weights, obs, mlps = inputs(tp, rng)
    checked = {n.name for n in tp.nodes} | {"v"}
    if poison:  # a sensor fault: some elements nan or infinite
        v = obs["v"].copy()
        mask = rng.random(v.shape) < 0.3
        v[mask] = rng.choice([np.nan, np.inf, -np.inf], int(mask.sum()))
        obs = {**obs, "v": v}
        checked = {"g", "f"}
    with np.errstate(all="ignore"):
        out = reference.run(tp, weights, obs, mlps, batch=N).values
    for name in checked:
        iv = analysis.elementwise[name]
        value = np.asarray(obs["v"] if name == "v" else out[name], dtype=float)
        if poison:  # guarded: no nan comes through
            assert not np.isnan(value).any(), f"{name} is nan in\n{text}"
        ok = ~np.isfinite(value) | ((iv.lo <= value) & (value <= iv.hi))
        assert ok.all(), f"{name} = {value[~ok][:3]} outside {iv} in\n{text}"

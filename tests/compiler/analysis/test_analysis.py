"""The analysis phase: ranges, the diagnostics they raise, and intents,
with the paper's Table 5 slip revisions as the main case."""

import subprocess
import sys

import numpy as np
import pytest

from polc.analysis.program import analyze_program
from polc.check.program import check_program
from polc.messages import render
from polc.analysis.intervals import Interval
from polc.frontend.parse import parse_program

SPEED = """
obs speed       : real in [0, 1.5]
obs wheel_speed : real[4] in [0, 3]
obs curvature   : real in [0, 3.15]
weight v_base  : real in [0.2, 1.4] = 0.9
weight k_curve : real >= 0 = 0.5
weight k_gas   : real >= 0 = 4.0
weight s_pedal : real in [0.01, 0.5] = 0.05
latent speed_err = target_speed - speed
action gas : real in [0, 1] = clip(k_gas * speed_err, 0, 1) ~ normal(std = s_pedal)
"""


def typed(text: str):
    tp, _ = check_program(parse_program(text, "t.pol"))
    return tp


def analyze(text: str):
    return analyze_program(typed(text))


def codes(analysis) -> list[str]:
    return [d.code for d in analysis.diagnostics]


def only_intent(analysis):
    assert len(analysis.intents) == 1
    return analysis.intents[0]


# ---- the paper's Table 5 ----------------------------------------------------------------


ROUNDS = {
    0: ("weight w_q : real = 0.1", "latent slip = mean(wheel_speed)",
        "latent target_speed = v_base - k_curve * curvature + w_q * slip", "slip"),
    1: ("weight w_q : real = 0.1", "latent slip = mean(wheel_speed) - speed",
        "latent target_speed = v_base - k_curve * curvature + w_q * slip", "slip"),
    2: ("weight w_q : real = 0.1", "latent slip = max(mean(wheel_speed) - speed, 0)",
        "latent target_speed = v_base - k_curve * curvature + w_q * slip", "slip"),
}


@pytest.mark.parametrize("round_", [0, 1, 2])
def test_unconstrained_slip_coefficient_is_flagged_with_the_sign_to_declare(round_):
    weight, slip, target, var = ROUNDS[round_]
    a = analyze(SPEED + "\n".join([weight, slip, target, f"expect target_speed decreasing in {var}"]))
    r = only_intent(a)
    assert r.status == "unknown"
    assert r.diagnostic.code == "W0406" and not r.diagnostic.is_error
    assert '"w_q"' in r.diagnostic.message
    assert r.diagnostic.hint == "Declare `weight w_q : real <= 0` so fitting cannot flip it."
    assert r.diagnostic.span == r.intent.span
    assert codes(a) == ["W0406"]


ROUND3 = SPEED + """
weight alpha : real >= 0 = 1.0
latent p = max(mean(wheel_speed) - speed, 0)
latent p_c = p / (1 + alpha * p)
latent target_speed = v_base - k_curve * curvature + w_q * p_c
expect target_speed decreasing in p_c
expect p_c >= 0
"""


def test_round_three_compressed_slip_with_a_nonpositive_weight_is_proved():
    a = analyze(ROUND3 + "weight w_q : real <= 0 = -0.1\n")
    assert [r.status for r in a.intents] == ["proved", "proved"]
    assert a.diagnostics == []
    assert a.intervals["p_c"].lo == 0 and a.intervals["p"].hi == 3
    assert a.intervals["target_speed"].hi == pytest.approx(1.4)


def test_round_three_with_a_nonnegative_weight_is_refuted_with_a_witness():
    a = analyze(ROUND3 + "weight w_q : real >= 0 = 0.1\n")
    mono, rng = a.intents
    assert rng.status == "proved"
    assert mono.status == "refuted"
    d = mono.diagnostic
    assert d.code == "E0405" and d.is_error and d.span == mono.intent.span
    assert "w_q = " in d.message and "target_speed rises from" in d.message and "when p_c goes from" in d.message
    assert d.message.startswith("The intent `target_speed decreasing in p_c` is false: with w_q = ")
    assert "v_base" not in d.message  # an additive weight plays no part in the violation


def test_the_witness_really_breaks_the_intent():
    from polc.analysis import reference

    tp = typed(ROUND3 + "weight w_q : real >= 0 = 0.1\n")
    msg = analyze_program(tp).intents[0].detail
    w_q = float(msg.split("w_q = ")[1].split()[0].rstrip(",(")) if "w_q = " in msg else 0.1
    lo, hi = (float(v) for v in msg.split("goes from ")[1].split(" to "))
    obs = {"speed": 0.0, "wheel_speed": np.zeros(4), "curvature": 0.0}
    t = [reference.evaluate(tp, {"w_q": w_q}, obs, overrides={"p_c": v})["target_speed"] for v in (lo, hi)]
    assert lo < hi and t[1] > t[0]


def test_the_example_programs_give_the_same_verdicts():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[3] / "examples" / "slip"
    if not root.exists():
        pytest.skip("examples not present")
    verdicts = {}
    for f in sorted(root.glob("round*.pol")):
        tp, _ = check_program(parse_program(f.read_text(), str(f)))
        verdicts[f.stem] = [r.status for r in analyze_program(tp).intents]
    assert verdicts == {"round0": ["unknown"], "round1": ["unknown"], "round2": ["unknown"],
                        "round3": ["proved", "proved"]}


# ---- range diagnostics ------------------------------------------------------------------


def test_division_by_a_value_that_may_be_zero_is_a_warning_at_the_divisor():
    a = analyze("""
obs x : real in [-1, 1]
obs y : real in [0, 2]
action a : real = x / y + x / (1 + y) + x / max(y, 0.01)
""")
    assert codes(a) == ["W0402"]
    d = a.diagnostics[0]
    assert (d.span.line, d.span.column, d.span.end_column) == (4, 23, 24)
    assert "[0, 2]" in d.message


def test_log_and_sqrt_domains():
    a = analyze("""
obs x : real in [-1, 1]
obs y : real in [0, 1]
latent l = log(x) + log(1 + y) + log(y)
latent s = sqrt(x) + sqrt(y)
action a : real = l + s
""")
    assert codes(a) == ["W0403", "W0403", "W0403"]
    log_x, log_y, sqrt_x = a.diagnostics
    assert "`log`" in log_x.message and "[-1, 1]" in log_x.message and log_x.span.column == 16
    assert "`log`" in log_y.message and "[0, 1]" in log_y.message
    assert "`sqrt`" in sqrt_x.message and "non-negative" in sqrt_x.message


def test_a_guard_in_a_condition_narrows_the_branch():
    a = analyze("""
obs x : real in [-1, 1]
latent safe = if x > 0 then log(x) else 0
latent safe2 = where(not (x <= 0.5), sqrt(x - 0.5), 0)
action a : real = safe + safe2
""")
    assert codes(a) == []
    assert a.intervals["safe"].hi == 0


@pytest.mark.parametrize("expr, warned", [
    ("x ^ 1.5", True),  # a negative base with a fractional exponent is nan
    ("x ^ k", True),  # a variable exponent may be fractional
    ("x ^ [2, 0.5]", True),  # one element's exponent is fractional
    ("x ^ 2 + x ^ -3 + x ^ [1, 2]", False),  # whole-number exponents are defined for every base
    ("y ^ 1.5 + y ^ k", False),  # a non-negative base takes any exponent
    ("max(x, 0) ^ 0.5", False),
])
def test_power_with_a_possibly_negative_base_needs_a_whole_exponent(expr, warned):
    a = analyze(f"""
obs x : real in [-1, 1]
obs y : real in [0, 2]
weight k : real = 1.5
action u : real[2] = {expr}
""")
    if not warned:
        assert codes(a) == []
        return
    assert codes(a) == ["W0409"]
    d = a.diagnostics[0]
    assert (d.span.line, d.span.column, d.span.end_column) == (5, 22, 23)  # the base
    assert d.message == ("The base of `^` lies in [-1, 1], but a negative base needs a whole-number constant "
                         "exponent: any other exponent gives NaN.")


def test_action_range_exceeded_unless_clipped_or_inside():
    a = analyze("""
obs x : real in [-1, 1]
weight k : real = 1
action a : real in [-1, 1] = k * x
action b : real in [-1, 1] = clip(k * x, -1, 1)
action c : real in [0, 1] = sigmoid(k * x)
action d : real in [-1, 1] = 0.5 * x
action e : real in [0, 1] = x
""")
    assert codes(a) == ["W0404", "W0404"]
    first, second = a.diagnostics
    assert '"a"' in first.message and "[-inf, inf]" in first.message and first.span.line == 4
    assert '"e"' in second.message and "[-1, 1]" in second.message
    assert a.intervals["a"].lo == -1 and a.intervals["a.mean"].lo == -np.inf


def test_widened_function_ends_stay_inside_the_functions_own_range():
    """exp, tanh and sigmoid ends are widened for NumPy's rounding (element_rules.py), then
    clamped to the function's range, and an exact power is not widened: actions and intents
    at those ranges still hold."""
    a = analyze("""
obs x : real in [-3, 3]
weight k : real = 1
latent e = exp(k * x)
latent p = relu(x) ^ 2
action t : real in [-1, 1] = tanh(k * x)
action s : real in [0, 1] = sigmoid(x) * sigmoid(k * x)
expect e >= 0
expect t in [-1, 1]
expect s in [0, 1]
expect p in [0, 9]
""")
    assert codes(a) == []
    assert [r.status for r in a.intents] == ["proved"] * 4
    assert a.intervals["p"] == Interval(0, 9) and a.intervals["e"].lo == 0


@pytest.mark.parametrize("std, ok", [
    ("exp(x)", False),
    ("softplus(x)", False),
    ("x", False),
    ("w_free", False),
    ("w_nonneg", False),
    ("softplus(x) + 0.01", True),
    ("exp(x) + 1e-3", True),
    ("exp(w_box)", True),
    ("w_box", True),
    ("w_floor", True),
    ("0.1 + abs(x)", True),
])
def test_noise_std_must_be_provably_positive(std, ok):
    a = analyze(f"""
obs x : real
weight w_free : real = 0.1
weight w_nonneg : real >= 0 = 0.1
weight w_box : real in [0.01, 1] = 0.1
weight w_floor : real >= 0.05 = 0.1
action u : real in [-1, 1] = clip(x, -1, 1) ~ normal(std = {std})
""")
    if ok:
        assert codes(a) == []
    else:
        assert codes(a) == ["E0401"]
        d = a.diagnostics[0]
        assert d.is_error and d.span.line == 7 and d.span.column == 60
        assert d.message.startswith('The noise std of action "u" is not provably positive')


def test_intervals_cover_every_declaration():
    a = analyze("""
obs x : real[2] in [0, 1]
obs y : real
weight k : real in [-2, 3] = 1
latent z = k * x
action u : real in [-1, 1] = tanh(sum(z) + y) ~ normal(std = 0.1)
""")
    assert set(a.intervals) == {"x", "y", "k", "z", "u", "u.mean", "u.std"}
    assert str(a.intervals["z"]) == "[-2, 3]"
    assert a.intervals["y"].lo == -np.inf
    assert a.elementwise["x"].shape == (2,)
    assert str(a.intervals["u.std"]) == "[0.1, 0.1]"


def test_vector_literals_keep_a_range_per_element():
    a = analyze("""
obs x : real in [0, 1]
latent v = [x, x - 5]
latent first = v[0]
action u : real = sqrt(first)
""")
    assert codes(a) == []
    assert str(a.intervals["first"]) == "[0, 1]"


# ---- intents -------------------------------------------------------------------------------


def test_range_intents_proved_sign_dependent_refuted():
    a = analyze("""
obs x : real in [0, 2]
weight b : real in [-1, 1] = 0.5
weight c : real in [0.5, 1] = 0.7
latent y = b * x
latent z = c * x - 1
latent t = sigmoid(x)
latent zero = x - x
action u : real = y + z + t + zero
expect t in [0, 1]
expect y >= 0
expect z > -1
expect zero >= 0
""")
    statuses = [(r.intent.text, r.status) for r in a.intents]
    assert statuses == [("t in [0, 1]", "proved"), ("y >= 0", "unknown"), ("z > -1", "refuted"),
                        ("zero >= 0", "unknown")]
    y, z, t = (r.diagnostic for r in a.intents[1:])
    assert y.code == "W0406" and "`weight b : real in [0, 1]`" in y.hint
    assert z.code == "E0405" and "z = -1 <= -1" in z.message
    assert t.code == "W0407" and "zero can only be bounded to [-2, 2]" in t.message


def test_a_true_claim_the_rules_cannot_prove_is_unknown():
    a = analyze("""
obs x : real in [-1, 1]
latent cube = x * x * x
action u : real = cube
expect cube increasing in x
""")
    r = only_intent(a)
    assert r.status == "unknown" and r.diagnostic.code == "W0407"
    assert "the sign of `x` is not fixed (it lies in [-1, 1])" in r.diagnostic.message
    assert "256 random samples found no counterexample" in r.diagnostic.message


def test_the_reason_quotes_the_source_even_after_a_form_feed():
    a = analyze("""
obs x : real in [-1, 1]
# a form feed \x0c is no line break for the parser
latent cube = x * x * x
action u : real = cube
expect cube increasing in x
""")
    assert "the sign of `x` is not fixed" in only_intent(a).diagnostic.message


def test_a_path_through_an_mlp_is_unknown_and_says_so():
    a = analyze("""
obs x : real in [-1, 1]
latent m = mlp(x; hidden = [8])
action u : real = m + x
expect u increasing in x
""")
    r = only_intent(a)
    assert r.status == "unknown"
    assert "it passes through `mlp(x; hidden = [8])`" in r.diagnostic.message


@pytest.mark.parametrize("expr, direction", [
    ("k * x", "increasing"),
    ("-k * x + 3", "decreasing"),
    ("x - k * x", "unknown"),  # k may exceed 1
    ("relu(x) + softplus(x) + exp(x) + tanh(x) + sigmoid(x)", "increasing"),
    ("clip(x, -0.5, 0.5) + min(x, 0) + max(x, 1)", "increasing"),
    ("abs(x)", "unknown"),
    ("abs(x + 2)", "increasing"),
    ("square(x - 2)", "decreasing"),
    ("1 / (2 + x)", "decreasing"),
    ("x / (1 + k)", "increasing"),
    ("(x + 2) ^ 2", "increasing"),
    ("(x + 2) ^ -1", "decreasing"),
    ("k ^ x", "unknown"),
    ("2 ^ x", "increasing"),
    ("sin(x)", "increasing"),
    ("cos(x + 2)", "decreasing"),
    ("atan2(x, 1)", "increasing"),
    ("atan2(1, x + 2)", "decreasing"),
    ("mean([x, 2 * x, x + k])", "increasing"),
    ("if x > 0 then x else 0", "increasing"),
    ("if x > 0 then 1 else 0", "increasing"),
    ("if x > 0 then 0 else 1", "decreasing"),
    ("if x > 0 then 0 else x", "increasing"),  # min(x, 0)
    ("if x > 0 then -1 else x", "unknown"),  # jumps down where x passes 0
    ("if k > 1 then x else 2 * x", "increasing"),
    ("norm([x + 1, x + 2])", "increasing"),
])
def test_directions(expr, direction):
    from polc.analysis.abstract import run_pass

    tp = typed(f"""
obs x : real in [-1, 1]
weight k : real >= 0 = 1
latent t = {expr}
action u : real = t
""")
    got = run_pass(tp, var="x").env["t"].dir
    assert got == direction or (direction == "increasing" and got == "constant")


def test_directions_are_sound_on_samples():
    """Every direction the rules claim holds on random points."""
    from polc.analysis import counterexample as C, reference
    from polc.analysis.abstract import run_pass

    exprs = ["k * x", "-k * x + 3", "1 / (2 + x)", "(x + 2) ^ -1", "square(x - 2)", "sin(x)",
             "cos(x + 2)", "atan2(1, x + 2)", "if x > 0 then x else 0", "if x > 0 then 0 else 1",
             "norm([x + 1, x + 2])", "k ^ (x + 1)", "x * abs(x)", "max(x, k) - min(0, k)"]
    rng = np.random.default_rng(0)
    for expr in exprs:
        tp = typed(f"obs x : real in [-1, 1]\nweight k : real >= 0 = 1\nlatent t = {expr}\naction u : real = t\n")
        d = run_pass(tp, var="x").env["t"].dir
        if d not in ("increasing", "decreasing"):
            continue
        k = C.sample_weight(tp.weights[0], rng, 200)
        x = np.sort(rng.uniform(-1, 1, (200, 2)), axis=1)
        t = [reference.run(tp, {"k": k}, {"x": x[:, i]}, batch=200).values["t"] for i in (0, 1)]
        diff = (t[1] - t[0]) * (1 if d == "increasing" else -1)
        assert np.all(diff >= -1e-9 * (1 + np.abs(t[0]))), expr


def test_intervals_are_sound_on_samples():
    """Values computed by the reference interpreter stay inside the analysis' ranges."""
    import pathlib

    from polc.analysis import counterexample as C, reference

    texts = [ROUND3 + "weight w_q : real <= 0 = -0.1\n", """
obs x : real[3] in [-2, 2]
obs y : real in [0.5, 4]
weight k : real in [-1, 1] = 0.2
weight g : real >= 0 = 1
latent a = [x[0] * y, x[1] / y, log(y) - sqrt(y), atan2(x[2], y)]
latent b = if x[0] > 0 then g * x[0] else k * x[1]
latent c = norm(x) + max(x) - min(a) + mean(square(x))
latent d = (y ^ 1.5) + (y ^ -2) + (y ^ x[0]) + abs(sin(x[1]) * cos(x[2]))
latent e = mlp(x, y; hidden = [4], out = 2)
action u : real[2] in [-1, 1] = tanh(e) * g + b ~ normal(std = 0.1 + softplus(k))
action v : real in [0, 1] = sigmoid(c + d + sum(a))
"""]
    root = pathlib.Path(__file__).resolve().parents[3] / "examples"
    texts += [f.read_text() for f in sorted(root.rglob("*.pol"))]
    rng = np.random.default_rng(0)
    for text in texts:
        tp = typed(text)
        a = analyze_program(tp)
        n = 300
        weights = {w.name: C.sample_weight(w, rng, n) for w in tp.weights}
        obs = {o.name: C.sample_obs(o, rng, n) for o in tp.obs}
        out = reference.run(tp, weights, obs, reference.random_mlp_params(tp, rng), batch=n)
        for name, value in {**out.values, **{k + ".std": v for k, v in out.stds.items()}}.items():
            iv = a.elementwise[name]
            v = np.asarray(value, dtype=float)
            ok = np.isnan(v) | ((iv.lo <= v) & (v <= iv.hi))
            assert ok.all(), (tp.name, name, iv)


def test_diagnostics_render_with_the_offending_source():
    text = """obs x : real in [-1, 1]
obs y : real in [0, 2]
action a : real = x / y
"""
    a = analyze_program(typed(text))
    shown = render(a.diagnostics[0], text)
    assert shown.splitlines()[0] == "Analysis warning [W0402] in 't.pol', line 3, column 23 to column 24:"
    assert "The divisor may be zero: it lies in [0, 2]." in shown


def test_analysis_never_imports_jax():
    code = ("import sys, polc, polc.analysis.program, polc.analysis.reference, polc.check.program, polc.frontend.parse\n"
            "polc.loads(open('examples/car_racing/initial.pol').read())\n"
            "assert not any(m == 'jax' or m.startswith('jax.') for m in sys.modules), 'jax imported'\n")
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[3]
    if not (root / "examples" / "car_racing" / "initial.pol").exists():
        code = code.replace("polc.loads(open('examples/car_racing/initial.pol').read())\n", "")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)

"""The language gaps a hand translation of the paper authors' PyTorch policies found (issue 15):
every analysis finding at once, one namespace said clearly, rational forms' directions, named
constants, per-element observation ranges, and guards for non-finite values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polc
from polc import PolError, loads

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden"


def codes(diags) -> list[str]:
    return [d.code for d in diags]


# ---- 1. an analysis error does not hide the analysis' warnings -----------------------------


def test_an_analysis_error_comes_with_every_analysis_warning():
    path = GOLDEN / "79_analysis_error_keeps_warnings.pol"
    with pytest.raises(PolError) as e:
        polc.load(str(path))
    assert codes(e.value.diagnostics) == ["W0402", "E0401", "W0406"]


def test_the_language_server_reports_them_all_as_well():
    from polc.lsp.document import analyze_document

    path = GOLDEN / "79_analysis_error_keeps_warnings.pol"
    doc = analyze_document(path.read_text(), str(path))
    assert codes(doc.diagnostics) == ["W0402", "E0401", "W0406"]


# ---- 5. one namespace, said so ------------------------------------------------------------------


def test_a_latent_named_like_an_observation_says_one_namespace_and_suggests_a_free_name():
    text = ("obs speed : real in [0, 1.5]\nobs speed_latent : real\nlatent speed = 2 * speed\n"
            "action gas : real in [0, 1] = clip(speed + speed_latent, 0, 1)\n")
    with pytest.raises(PolError) as e:
        loads(text, "car.pol")
    d = next(d for d in e.value.diagnostics if d.code == "E0113")
    assert d.span.line == 3 and d.span.column == 8
    assert d.message.startswith('"speed" is already the name of an observation (line 1)')
    assert "share one namespace" in d.message
    assert '"speed_latent2"' in d.hint  # "speed_latent" is taken


def test_two_latents_of_one_name_are_still_a_duplicate():
    with pytest.raises(PolError) as e:
        loads("obs x : real\nlatent y = x\nlatent y = 2 * x\naction a : real = y\n")
    assert codes(e.value.diagnostics) == ["E0102"]


# ---- 3. named constants ------------------------------------------------------------------------

CONSTS = '''
const lookahead = 6
const last = lookahead - 1   # from another constant
const gain = 0.5 * 2 ^ 2 / 4
obs tiles : real[12, 4] in [-5, 5]
weight k_ahead : real[lookahead] >= 0 = 0.1
latent ahead_x = tiles[0:lookahead, 0]
latent far_x = tiles[last, 0] + tiles[-lookahead, 1]
latent steer_x = sum(k_ahead * ahead_x) / lookahead + gain * far_x
latent h = mlp(ahead_x; hidden = [lookahead, lookahead], out = lookahead - 4)
action steer : real in [-1, 1] = clip(steer_x + 0 * sum(h), -1, 1)
'''


def test_constants_in_shapes_slices_indices_keywords_and_expressions():
    p = loads(CONSTS, "c.pol")
    tp = p.typed
    assert [(c.name, c.value) for c in tp.consts] == [("lookahead", 6.0), ("last", 5.0), ("gain", 0.5)]
    assert tp.decl("k_ahead").type.shape == (6,)
    latents = {x.name: x for x in tp.latents}
    assert latents["ahead_x"].type.shape == (6,)
    assert latents["h"].type.shape == (2,) and latents["h"].expr.hidden == (6, 6)
    assert not [w for w in p.warnings if w.code == "W0109"]
    assert p.analysis.intervals["far_x"].lo == -10 and p.analysis.intervals["far_x"].hi == 10


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_constant_reads_as_its_number_in_the_compiled_policy():
    import jax

    policy = loads(CONSTS, "c.pol").compile()
    params = policy.init(jax.random.PRNGKey(0))
    tiles = np.linspace(-1, 1, 48, dtype=np.float32).reshape(12, 4)
    _, latents = policy.apply(params, {"tiles": tiles})
    want = float(np.sum(0.1 * tiles[0:6, 0]) / 6 + 0.5 * (tiles[5, 0] + tiles[-6, 1]))
    assert float(latents["steer_x"]) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("text,code,says", [
    ("const a = b\nconst b = a\n", "E0312", 'depends on itself: a -> b -> a'),
    ("obs x : real\nconst a = x + 1\n", "E0312", 'reads "x", an observation'),
    ("const a = max(1, 2)\n", "E0312", "is not a number expression"),
    ("const a = 1 / 0\n", "E0312", "is not a finite number"),
    ("const a = 2.5\nobs y : real[a]\n", "E0313", 'The dimension "a" is 2.5, not a whole number'),
    ("obs n : real\nobs y : real[n]\n", "E0313", 'is an observation, not a constant'),
    ("const a = 2.5\nobs y : real[3]\nlatent z = y[a]\n", "E0205", "integer literal or constant"),
    ("obs y : real[3]\nlatent z = y[0:nope]\n", "E0101", '"nope" is not declared'),
    ("const a = -1\nobs y : real[a]\n", "E0214", "must be positive"),
])
def test_bad_constants_are_located_errors(text, code, says):
    with pytest.raises(PolError) as e:
        loads(text + "action act : real = 0\n", "c.pol")
    d = next(d for d in e.value.diagnostics if d.code == code)
    assert says in d.message and d.span is not None and d.hint


def test_an_unused_constant_is_a_warning():
    p = loads("const spare = 3\nobs x : real\naction a : real = x\n")
    assert [(w.code, w.message) for w in p.warnings] == [("W0109", 'The constant "spare" is never used.')]


# ---- 2. ranges per element -----------------------------------------------------------------------

STATE = '''obs state : real[6] {[0] in [0, 1.5] "speed", [1] in [-3, 3] "yaw rate", [2:6] in [0, 3] "wheel speeds"}
obs tiles : real[3, 4] in [-5, 5] {[:, 3] in [0, 1]}
latent slip = mean(state[2:6]) - state[0]
latent flag = tiles[2, 3]
latent x = tiles[0, 0]
action gas : real in [-10, 10] = clip(slip + flag + x + state[1], -10, 10)
expect slip >= -1.5
expect flag in [0, 1]
'''


def test_element_ranges_start_the_analysis_of_indexed_and_sliced_reads():
    p = loads(STATE, "s.pol")
    o = p.typed.decl("state")
    assert (o.lo, o.hi) == (-3, 3)  # the hull, for everything that needs one range
    assert o.bounds == ((0, -3, 0, 0, 0, 0), (1.5, 3, 3, 3, 3, 3))
    iv = p.analysis.elementwise["state"]
    assert iv.lo.tolist() == [0, -3, 0, 0, 0, 0] and iv.hi.tolist() == [1.5, 3, 3, 3, 3, 3]
    assert str(p.analysis.intervals["slip"]) == "[-1.5, 3]"
    assert str(p.analysis.intervals["flag"]) == "[0, 1]" and str(p.analysis.intervals["x"]) == "[-5, 5]"
    assert [r.status for r in p.analysis.intents] == ["proved", "proved"]


def test_a_counterexample_respects_every_elements_range():
    from polc.analysis import counterexample as C

    with pytest.raises(PolError) as e:  # slip < 0 where the wheels are slower than the car
        loads(STATE.replace("expect slip >= -1.5", "expect slip >= 0"), "s.pol")
    assert [d.code for d in e.value.diagnostics] == ["E0405"]
    o = loads(STATE, "s.pol").typed.decl("state")
    x = C.sample_obs(o, np.random.default_rng(0), 500)
    lo, hi = np.array(o.bounds[0]), np.array(o.bounds[1])
    assert ((x >= lo) & (x <= hi)).all()
    assert (x == lo).any() and (x == hi).any()  # the ends are hit


def test_an_element_of_unbounded_kind_is_sampled_far_and_a_bounded_one_inside():
    from polc.analysis import counterexample as C

    tp = loads("obs v : real[3] {[0] in [0, 1], [1] >= 2}\naction a : real = sum(v)\n").typed
    x = C.sample_obs(tp.decl("v"), np.random.default_rng(1), 400)
    assert ((x[:, 0] >= 0) & (x[:, 0] <= 1)).all() and (x[:, 1] >= 2).all()
    assert np.abs(x[:, 2]).max() > 10 and (x[:, 2] < 0).any()


@pytest.mark.parametrize("block,code", [
    ("{[0] in [1, 0]}", "E0301"),
    ("{[3] in [0, 1]}", "E0203"),
    ("{[0, 0] in [0, 1]}", "E0204"),
    ("in [0, 1] {[0] in [0, 2]}", "E0314"),
    ("{[0:2] >= 0, [1] <= 0}", "E0315"),
    ("{[x] in [0, 1]}", "E0205"),
])
def test_bad_element_ranges_are_located_errors(block, code):
    with pytest.raises(PolError) as e:
        loads(f"obs x : real\nobs v : real[3] {block}\naction a : real = sum(v) + x\n", "v.pol")
    assert code in [d.code for d in e.value.diagnostics]


# ---- formatting round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("text", [CONSTS, STATE, (GOLDEN / "83_elem_range_outside.pol").read_text()])
def test_fmt_round_trips_the_new_syntax(text):
    from polc.fmt import format_text
    from polc.frontend.parse import parse_program
    from test_fmt import meaning

    once = format_text(text)
    assert format_text(once) == once
    assert meaning(parse_program(once, "x.pol"))[0] == meaning(parse_program(text, "x.pol"))[0]


def test_fmt_writes_a_long_block_one_part_per_line_with_columns():
    from polc.fmt import format_text

    out = format_text(STATE.replace('"wheel speeds"', '"the four wheel speeds, front left first"'))
    assert out.splitlines()[:5] == [
        "obs state : real[6] {",
        '    [0]   in [0, 1.5] "speed"',
        '    [1]   in [-3, 3]  "yaw rate"',
        '    [2:6] in [0, 3]   "the four wheel speeds, front left first"',
        "}",
    ]
    assert "obs tiles : real[3, 4] in [-5, 5] {[:, 3] in [0, 1]}" in out


# ---- 4. guards of non-finite values ----------------------------------------------------------------

GUARDED = '''obs speed : real in [0.2, 1.5]
obs raw : real[3] in [-1, 1]
latent v = if isfinite(speed) then speed else 0
latent r = nan_to_num(raw, nan = 0, posinf = 1, neginf = -2)
latent u = nan_to_num(speed)
latent ok = isfinite(raw)
action gas : real in [0, 2] = clip(v + sum(r) + u + sum(if ok then 1 else 0), 0, 2)
expect v increasing in speed
expect u increasing in speed
'''


def test_guards_type_check_and_the_analysis_allows_the_replacement():
    p = loads(GUARDED, "g.pol")
    iv = p.analysis.intervals
    assert str(iv["v"]) == "[0, 1.5]" and str(iv["u"]) == "[0, 1.5]" and str(iv["r"]) == "[-2, 1]"
    assert str(iv["ok"]) == "[0, 1]"
    assert [r.status for r in p.analysis.intents] == ["proved", "proved"]
    assert str(p.typed.decl("ok").type) == "bool[3]"


def test_a_guard_of_a_value_that_may_overflow_has_no_direction():
    p = loads("obs x : real\nlatent e = nan_to_num(exp(x))\naction a : real = e\nexpect e increasing in x\n")
    r = p.analysis.intents[0]
    assert r.status == "unknown" and "overflows to inf" in r.detail


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_the_compiled_guard_replaces_non_finite_observations(bad):
    import jax

    from polc.analysis import reference

    tp = loads(GUARDED, "g.pol").typed
    policy = loads(GUARDED, "g.pol").compile()
    obs = {"speed": np.float32(bad), "raw": np.array([bad, 0.5, -0.25], np.float32)}
    _, latents = policy.apply(policy.init(jax.random.PRNGKey(0)), obs)
    want_r = {"nan": 0.0, "inf": 1.0, "-inf": -2.0}[str(bad)]
    assert float(latents["v"]) == 0.0 and float(latents["u"]) == 0.0
    assert np.asarray(latents["r"]).tolist() == [want_r, 0.5, -0.25]
    assert np.asarray(latents["ok"]).tolist() == [False, True, True]
    ref = reference.run(tp, {}, {k: np.asarray(v, float)[None] for k, v in obs.items()}, {}, batch=1).values
    assert np.asarray(ref["r"])[0].tolist() == [want_r, 0.5, -0.25] and float(np.asarray(ref["v"])[0]) == 0.0


@pytest.mark.parametrize("call,code", [
    ("nan_to_num(raw, nan = speed)", "E0211"),
    ("nan_to_num(raw, zero = 1)", "E0207"),
    ("nan_to_num(raw, 1)", "E0206"),
    ("isfinite(raw, raw)", "E0206"),
    ("isfinite(raw) + 1", "E0201"),
])
def test_bad_guards_are_located_errors(call, code):
    with pytest.raises(PolError) as e:
        loads(f"obs speed : real\nobs raw : real[3]\nlatent g = {call}\naction a : real = speed\n", "g.pol")
    assert code in [d.code for d in e.value.diagnostics]


def test_the_emitted_module_guards_too(tmp_path):
    from polc.cli import main

    src = tmp_path / "g.pol"
    src.write_text(GUARDED)
    out = tmp_path / "g.py"
    assert main(["compile", str(src), "-o", str(out)]) == 0
    text = out.read_text()
    assert "jnp.nan_to_num(raw, nan=0.0, posinf=1.0, neginf=-2.0)" in text and "jnp.isfinite(speed)" in text


def test_emit_json_lists_every_elements_range(tmp_path, capsys):
    import json

    from polc.cli import main

    src = tmp_path / "s.pol"
    src.write_text(STATE)
    out = tmp_path / "s.json"
    assert main(["compile", str(src), "--emit", "json", "-o", str(out)]) == 0
    nodes = {n["name"]: n for n in json.loads(out.read_text())["nodes"]}
    assert nodes["state"]["range"] == [-3, 3]
    assert nodes["state"]["element_ranges"] == [[0, 1.5], [-3, 3], [0, 3], [0, 3], [0, 3], [0, 3]]
    assert "element_ranges" not in nodes["tiles"] or len(nodes["tiles"]["element_ranges"]) == 12


def test_a_checker_error_comes_with_the_checkers_warnings_found_so_far():
    text = ("obs x : real\nobs y : real\nlatent a = 2 * x\nlatent b = true + y\n"
            "action act : real = a + y\nexpect a increasing in y\n")
    with pytest.raises(PolError) as e:
        loads(text, "w.pol")
    assert codes(e.value.diagnostics) == ["E0201", "W0110"]


# ---- 7. rational forms ------------------------------------------------------------------------------


def test_the_papers_round3_slip_compression_is_proved_decreasing_in_the_raw_slip():
    """`target_speed decreasing in p` through `slip_c = p / (1 + alpha * p)` (alpha >= 0, p >= 0):
    unknown (W0407) before the rational rule, proved now."""
    text = (ROOT / "examples/slip/round3.pol").read_text()
    text = text.replace("expect target_speed decreasing in slip_c", "expect target_speed decreasing in p")
    p = loads(text, "round3.pol")
    assert [(r.intent.text, r.status) for r in p.analysis.intents] == [
        ("target_speed decreasing in p", "proved"), ("slip_c >= 0", "proved")]
    assert not p.warnings


def test_a_rational_form_whose_slope_changes_sign_is_not_proved():
    # (p - s) / (1 + p): slope 1 + s, with s in [-2, 2] of either sign: refuted or unknown, never proved
    p = loads("obs p : real in [0, 5]\nweight s : real in [-2, 2] = 0\nlatent f = (p - s) / (1 + p)\n"
              "action a : real = f\nexpect f increasing in p\n")
    assert p.analysis.intents[0].status != "proved"


def test_constants_in_weight_initial_values_and_prior_arguments():
    p = loads("const g0 = 0.3\nconst spread = g0 / 3\nobs x : real\n"
              "weight k : real >= 0 = g0 ~ normal(g0, spread)\nweight v : real[2] = [g0, -g0]\n"
              "action a : real = k * x + sum(v) * x\n")
    k, v = p.typed.decl("k"), p.typed.decl("v")
    assert k.init == 0.3 and k.prior.args == pytest.approx((0.3, 0.1)) and v.init == (0.3, -0.3)
    assert not p.warnings  # every constant counted as used
    with pytest.raises(PolError) as e:  # a weight's value is still not a constant
        loads("weight k : real = 1\nweight j : real = 2 * k\naction a : real = k + j\n")
    assert codes(e.value.diagnostics) == ["E0304"]

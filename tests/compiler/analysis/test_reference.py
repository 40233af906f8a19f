"""The NumPy reference interpreter: the meaning of every typed node, written out
by hand for small programs, and its batching, overrides and mlp parameters."""

import numpy as np
import pytest

from polc.analysis import reference as R
from polc.check.program import check_program
from polc.frontend.parse import parse_program


def typed(text: str):
    tp, _ = check_program(parse_program(text, "t.pol"))
    return tp


def test_arithmetic_broadcasting_and_clipped_actions():
    tp = typed("""
obs x : real[3]
obs s : real
weight k : real = 2
latent y = k * x + s
latent total = sum(y)
action a : real[3] in [-1, 1] = y
action b : real in [0, 10] = total
""")
    out = R.evaluate(tp, {}, {"x": [0.1, -2.0, 0.3], "s": 0.5})
    np.testing.assert_allclose(out["y"], [0.7, -3.5, 1.1])
    np.testing.assert_allclose(out["total"], -1.7)
    np.testing.assert_allclose(out["a"], [0.7, -1.0, 1.0])  # clipped to [-1, 1]
    assert out["b"] == 0.0
    out = R.evaluate(tp, {"k": -1.0}, {"x": [1.0, 2.0, 3.0], "s": 0.0})
    np.testing.assert_allclose(out["y"], [-1, -2, -3])


def test_matrix_indexing_slicing_and_axis_reductions():
    tp = typed("""
obs m : real[3, 4]
latent row = m[1]
latent col = m[:, 2]
latent block = m[0:2, 1:3]
latent col_max = max(m, axis = 0)
latent row_norm = norm(m, axis = 1)
latent avg = mean(m)
latent smallest = min(m)
action a : real = avg
""")
    m = np.arange(12.0).reshape(3, 4) - 5
    out = R.evaluate(tp, {}, {"m": m})
    np.testing.assert_array_equal(out["row"], m[1])
    np.testing.assert_array_equal(out["col"], m[:, 2])
    np.testing.assert_array_equal(out["block"], m[0:2, 1:3])
    np.testing.assert_array_equal(out["col_max"], m.max(axis=0))
    np.testing.assert_allclose(out["row_norm"], np.linalg.norm(m, axis=1))
    assert out["avg"] == pytest.approx(m.mean()) and out["smallest"] == m.min()


def test_elementwise_functions_and_selection():
    tp = typed("""
obs x : real[4]
latent f = [abs(x[0]), exp(x[1]), sigmoid(x[2]), softplus(x[3])]
latent g = [relu(x[0]), square(x[1]), sign(x[2]), tanh(x[3])]
latent h = [atan2(x[0], x[1]), min(x[2], x[3]), max(x[2], x[3]), clip(x[0], -0.5, 0.5)]
latent w = where(x > 0, x, 0 - x)
latent i = if x[0] < x[1] and not (x[2] == x[3]) then 1 else 2
latent p = x[1] ^ 2 + sqrt(abs(x[0])) + log(1 + abs(x[2])) + sin(x[3]) * cos(x[3])
action a : real = i
""")
    x = np.array([-1.5, 0.3, 2.0, -0.7])
    out = R.evaluate(tp, {}, {"x": x})
    np.testing.assert_allclose(out["f"], [1.5, np.exp(0.3), 1 / (1 + np.exp(-2.0)), np.log1p(np.exp(-0.7))])
    np.testing.assert_allclose(out["g"], [0.0, 0.09, 1.0, np.tanh(-0.7)])
    np.testing.assert_allclose(out["h"], [np.arctan2(-1.5, 0.3), -0.7, 2.0, -0.5])
    np.testing.assert_allclose(out["w"], np.abs(x))
    assert out["i"] == 1.0
    expected = 0.09 + np.sqrt(1.5) + np.log(3.0) + np.sin(-0.7) * np.cos(-0.7)
    assert out["p"] == pytest.approx(expected)


def test_bool_latents_stay_bool():
    tp = typed("""
obs x : real
latent on = x > 0.5 or x < -0.5
action a : real = if on then 1 else 0
""")
    out = R.evaluate(tp, {}, {"x": 0.7})
    assert out["on"].dtype == bool and bool(out["on"])
    assert out["a"] == 1.0


def test_weights_default_to_their_initial_value():
    tp = typed("""
obs x : real
weight k : real[2] = [0.5, -1]
action a : real[2] = k * x
""")
    np.testing.assert_allclose(R.evaluate(tp, {}, {"x": 2.0})["a"], [1.0, -2.0])
    np.testing.assert_allclose(R.evaluate(tp, {"k": np.array([1.0, 1.0])}, {"x": 2.0})["a"], [2.0, 2.0])


def test_noise_std_is_broadcast_to_the_action_shape():
    tp = typed("""
obs x : real[2]
weight s : real in [0.01, 1] = 0.2
action a : real[2] in [-1, 1] = x ~ normal(std = s)
action b : real = x[0]
""")
    stds = R.evaluate_std(tp, {}, {"x": [3.0, 0.0]})
    assert set(stds) == {"a"}
    np.testing.assert_allclose(stds["a"], [0.2, 0.2])
    out = R.run(tp, {}, {"x": [3.0, 0.0]})
    np.testing.assert_allclose(out.means["a"], [3.0, 0.0])
    np.testing.assert_allclose(out.values["a"], [1.0, 0.0])


def test_overrides_cut_the_graph_at_a_latent():
    tp = typed("""
obs u : real
weight w : real = -0.5
latent slip = u * 2
latent target = 1 + w * slip
latent other = slip + 1
action a : real = target + 0 * other
""")
    out = R.evaluate(tp, {}, {"u": 1.0}, overrides={"slip": 10.0})
    assert out["slip"] == 10.0
    assert out["target"] == pytest.approx(1 - 5.0)
    assert out["other"] == 11.0


def test_mlp_matches_a_hand_written_forward_pass():
    tp = typed("""
obs x : real[2]
obs y : real
latent h = mlp(x, y; hidden = [5], out = 3, activation = relu)
latent s = mlp(y; hidden = [4, 4])
action a : real[3] = h + s
""")
    rng = np.random.default_rng(0)
    params = R.random_mlp_params(tp, rng)
    assert set(params) == {"h.mlp", "s.mlp"}
    x, y = np.array([0.3, -1.2]), 0.8
    out = R.evaluate(tp, {}, {"x": x, "y": y}, params)
    d = params["h.mlp"]["params"]
    z = np.maximum(np.concatenate([x, [y]]) @ d["Dense_0"]["kernel"] + d["Dense_0"]["bias"], 0)
    np.testing.assert_allclose(out["h"], z @ d["Dense_1"]["kernel"] + d["Dense_1"]["bias"])
    d = params["s.mlp"]["params"]
    z = np.tanh(np.array([y]) @ d["Dense_0"]["kernel"] + d["Dense_0"]["bias"])
    z = np.tanh(z @ d["Dense_1"]["kernel"] + d["Dense_1"]["bias"])
    assert out["s"].shape == ()
    assert out["s"] == pytest.approx((z @ d["Dense_2"]["kernel"] + d["Dense_2"]["bias"])[0])
    # The inner layer dict alone, or the params inside the weights dict, work too.
    inner = {k: v["params"] for k, v in params.items()}
    np.testing.assert_allclose(R.evaluate(tp, {}, {"x": x, "y": y}, inner)["a"], out["a"])
    np.testing.assert_allclose(R.evaluate(tp, params, {"x": x, "y": y})["a"], out["a"])
    zero = R.evaluate(tp, {}, {"x": x, "y": y}, R.zero_mlp_params(tp))
    np.testing.assert_array_equal(zero["a"], [0.0, 0.0, 0.0])


def test_an_mlp_inside_a_noise_std_gets_parameters_too():
    tp = typed("""
obs x : real
action a : real = x ~ normal(std = 0.01 + softplus(mlp(x; hidden = [3])))
""")
    params = R.zero_mlp_params(tp)
    assert list(params) == ["a.mlp"]
    assert R.evaluate_std(tp, {}, {"x": 1.0}, params)["a"] == pytest.approx(0.01 + np.log(2.0))


def test_a_batch_is_the_same_as_one_input_at_a_time():
    tp = typed("""
obs x : real[3]
obs s : real
weight k : real = 2
latent m = max(x * k, axis = 0) + s
latent v = [m, sum(x), x[2]]
latent q = where(x > s, x, s)
action a : real in [-1, 1] = tanh(m) ~ normal(std = 0.1 + abs(s))
""")
    rng = np.random.default_rng(1)
    xs, ss, ks = rng.normal(size=(5, 3)), rng.normal(size=5), rng.normal(size=5)
    batch = R.run(tp, {"k": ks}, {"x": xs, "s": ss}, batch=5)
    for i in range(5):
        one = R.run(tp, {"k": ks[i]}, {"x": xs[i], "s": ss[i]})
        for name, value in one.values.items():
            np.testing.assert_allclose(batch.values[name][i], value)
        np.testing.assert_allclose(batch.stds["a"][i], one.stds["a"])


def test_undefined_math_gives_nan_or_inf_without_warnings():
    tp = typed("""
obs x : real
latent l = log(x)
latent d = 1 / x
action a : real = sqrt(x)
""")
    out = R.evaluate(tp, {}, {"x": -1.0})
    assert np.isnan(out["l"]) and np.isnan(out["a"])
    assert np.isinf(R.evaluate(tp, {}, {"x": 0.0})["d"])


def test_missing_or_misshapen_inputs_are_reported():
    tp = typed("""
obs x : real[2]
latent m = mlp(x)
action a : real = m
""")
    with pytest.raises(ValueError, match='observation "x"'):
        R.evaluate(tp, {}, {}, R.zero_mlp_params(tp))
    with pytest.raises(ValueError, match="shape"):
        R.evaluate(tp, {}, {"x": [1.0, 2.0, 3.0]}, R.zero_mlp_params(tp))
    with pytest.raises(ValueError, match='mlp "m.mlp"'):
        R.evaluate(tp, {}, {"x": [1.0, 2.0]})

"""The JAX lowering: typed program -> CompiledPolicy (init, apply, distribution, sample, log_prob)."""

import glob
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from polc.check.program import check_program
from polc.backend.lower import CompiledPolicy, lower
from polc.frontend.parse import parse_program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.pol"), recursive=True))


def compile_text(text: str) -> CompiledPolicy:
    typed, _ = check_program(parse_program(text, "test.pol"))
    return lower(typed)


def zeros_obs(policy: CompiledPolicy, value: float = 0.0) -> dict:
    return {o.name: np.full(o.type.shape, value, np.float32) for o in policy.program.obs}


def random_obs(policy: CompiledPolicy, rng: np.random.Generator, batch: tuple = ()) -> dict:
    out = {}
    for o in policy.program.obs:
        lo = o.lo if math.isfinite(o.lo) else -2.0
        hi = o.hi if math.isfinite(o.hi) else 2.0
        out[o.name] = rng.uniform(lo, hi, batch + o.type.shape).astype(np.float32)
    return out


GAIN = """
obs x : real
weight k : real >= 0 = 2
latent y = k * x + 1 "doubled plus one"
action a : real in [-1, 5] = y
"""


def test_apply_computes_the_declared_graph_and_clips_actions():
    policy = compile_text(GAIN)
    params = policy.init(jax.random.PRNGKey(0))
    actions, latents = policy.apply(params, {"x": 1.5})
    assert float(latents["y"]) == pytest.approx(4.0)
    assert float(actions["a"]) == pytest.approx(4.0)
    actions, latents = policy.apply(params, {"x": 3.0})
    assert float(latents["y"]) == pytest.approx(7.0)
    assert float(actions["a"]) == pytest.approx(5.0)
    actions, _ = policy.apply(params, {"x": -9.0})
    assert float(actions["a"]) == pytest.approx(-1.0)


def test_params_hold_unconstrained_weights_and_constrain_maps_back():
    policy = compile_text(GAIN)
    params = policy.init(jax.random.PRNGKey(0))
    assert set(params) == {"k"}
    assert params["k"].dtype == jnp.float32 and params["k"].shape == ()
    assert float(params["k"]) == pytest.approx(math.log(2.0))
    assert float(policy.constrain(params)["k"]) == pytest.approx(2.0)
    back = policy.unconstrain({"k": 3.0})
    assert float(back["k"]) == pytest.approx(math.log(3.0))
    with pytest.raises(KeyError, match="neither a weight nor an mlp"):
        policy.unconstrain({"nope": 1.0})


OPS = """
obs v : real[3]
obs m : real[2, 3]
obs s : real in [0, 1]
weight w : real[3] in [-2, 2] = [0.5, -1, 1.5]
weight b : real <= 0 = -0.25
latent row = m + v              "rank promotion made explicit"
latent col = sum(m; axis = 1)
latent top = m[0, 1:3]
latent big = max(v)
latent n = norm(v)
latent avg = mean(m)
latent lo = min(m; axis = 0)
latent pick = if s > 0.5 then v else w
latent both = s > 0.2 and not (s > 0.9)
latent fns = [abs(b), exp(s), log(s + 1), sqrt(s), tanh(s), sigmoid(s), relu(b), softplus(s)]
latent more = [sin(s), cos(s), square(b), sign(b), atan2(s, b), min(s, b), max(s, b), clip(s, 0.1, 0.4)]
latent p = s ^ 2 + abs(v) ^ 0.5 * 0 + 2 ^ s
latent vec = [s, 1 - s, -s]
latent mixed = where(v > 0, row, -row)
action out : real[3] in [-3, 3] = row[1] * w + b
action one : real in [0, 1] = s / 2 + big * 0
"""


def test_every_op_matches_numpy():
    policy = compile_text(OPS)
    params = policy.init(jax.random.PRNGKey(0))
    v = np.array([0.3, -1.2, 2.0], np.float32)
    m = np.array([[1.0, 2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    s = np.float32(0.7)
    w, b = np.array([0.5, -1.0, 1.5]), -0.25
    actions, lat = policy.apply(params, {"v": v, "m": m, "s": s})
    expect = {
        "row": m + v, "col": m.sum(axis=1), "top": m[0, 1:3], "big": v.max(), "n": np.linalg.norm(v),
        "avg": m.mean(), "lo": m.min(axis=0), "pick": v, "both": True,
        "fns": [abs(b), np.exp(s), np.log(s + 1), np.sqrt(s), np.tanh(s), 1 / (1 + np.exp(-s)), 0.0,
                np.log1p(np.exp(s))],
        "more": [np.sin(s), np.cos(s), b * b, -1.0, np.arctan2(s, b), b, s, 0.4],
        "p": s ** 2 + np.abs(v) ** 0.5 * 0 + 2 ** s, "vec": [s, 1 - s, -s], "mixed": np.where(v > 0, m + v, -(m + v)),
    }
    assert set(lat) == set(expect)
    for name, value in expect.items():
        np.testing.assert_allclose(np.asarray(lat[name]), np.asarray(value, np.float32), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    assert lat["both"].dtype == jnp.bool_
    np.testing.assert_allclose(actions["out"], np.clip((m + v)[1] * w + b, -3, 3), rtol=1e-5)
    assert float(actions["one"]) == pytest.approx(0.35)


def test_a_latent_reading_an_action_sees_its_clipped_mean():
    policy = compile_text("""
        obs x : real
        action a : real in [0, 1] = x
        latent twice = 2 * a
        action b : real = twice
    """)
    actions, latents = policy.apply({}, {"x": 4.0})
    assert float(actions["a"]) == 1.0
    assert float(latents["twice"]) == 2.0 and float(actions["b"]) == 2.0


def test_a_scalar_action_mean_is_broadcast_to_the_declared_shape():
    policy = compile_text("obs x : real\naction a : real[3] in [0, 1] = x / 2")
    actions, _ = policy.apply({}, {"x": 1.0})
    np.testing.assert_allclose(actions["a"], [0.5, 0.5, 0.5])


MLP = """
obs x : real[3]
obs y : real
latent h = mlp(x, y; hidden = [5, 4], out = 2, activation = relu)
latent g = mlp(h; hidden = [3])
action a : real in [-1, 1] = tanh(g + h[0])
"""


def _dense(p, x):
    return x @ np.asarray(p["kernel"]) + np.asarray(p["bias"])


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_mlp_params_are_flax_dense_layers_and_apply_matches_numpy():
    policy = compile_text(MLP)
    params = policy.init(jax.random.PRNGKey(3))
    assert set(params) == {"h.mlp", "g.mlp"}
    shapes = jax.tree.map(lambda a: a.shape, params["h.mlp"])
    assert shapes == {"Dense_0": {"kernel": (4, 5), "bias": (5,)}, "Dense_1": {"kernel": (5, 4), "bias": (4,)},
                      "Dense_2": {"kernel": (4, 2), "bias": (2,)}}
    assert jax.tree.map(lambda a: a.shape, params["g.mlp"])["Dense_1"]["kernel"] == (3, 1)
    x, y = np.array([0.5, -1.0, 2.0], np.float32), np.float32(0.3)
    p = params["h.mlp"]
    z = np.maximum(_dense(p["Dense_0"], np.concatenate([x, [y]])), 0)
    h = _dense(p["Dense_2"], np.maximum(_dense(p["Dense_1"], z), 0))
    q = params["g.mlp"]
    g = _dense(q["Dense_1"], np.tanh(_dense(q["Dense_0"], h)))[0]
    actions, lat = policy.apply(params, {"x": x, "y": y})
    np.testing.assert_allclose(lat["h"], h, rtol=1e-5, atol=1e-6)
    assert lat["g"].shape == () and float(lat["g"]) == pytest.approx(g, rel=1e-5, abs=1e-6)
    assert float(actions["a"]) == pytest.approx(np.tanh(g + h[0]), rel=1e-5, abs=1e-6)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_init_is_deterministic_and_splits_one_key_per_mlp_in_key_order():
    policy = compile_text(MLP)
    a, b = policy.init(jax.random.PRNGKey(7)), policy.init(jax.random.PRNGKey(7))
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
    c = policy.init(jax.random.PRNGKey(8))
    assert not np.array_equal(a["h.mlp"]["Dense_0"]["kernel"], c["h.mlp"]["Dense_0"]["kernel"])
    from polc.backend._mlp_block import MlpBlock

    k_g, k_h = jax.random.split(jax.random.PRNGKey(7), 2)  # "g.mlp" < "h.mlp"
    expect = MlpBlock((5, 4), 2, jax.nn.relu).init(k_h, jnp.zeros(4))["params"]
    np.testing.assert_array_equal(a["h.mlp"]["Dense_0"]["kernel"], expect["Dense_0"]["kernel"])


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_unconstrain_passes_mlp_params_through():
    policy = compile_text(MLP.replace("tanh(g + h[0])", "tanh(k * g + h[0])") + "weight k : real >= 0 = 1\n")
    params = policy.init(jax.random.PRNGKey(0))
    again = policy.unconstrain({**params, **policy.constrain(params)})
    for x, y in zip(jax.tree.leaves(params), jax.tree.leaves(again)):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


NOISY = """
obs x : real in [-1, 1]
weight s : real in [0.01, 1] = 0.2
action steer : real in [-1, 1] = 0.8 * x ~ normal(std = s)
action gas : real[2] in [0, 1] = [x, 1 - x] ~ normal(std = 0.1 + 0.05 * abs(x))
action brake : real in [0, 1] = 0.5 * x
"""


def test_distribution_gives_std_for_stochastic_actions_broadcast_to_their_shape():
    policy = compile_text(NOISY)
    params = policy.init(jax.random.PRNGKey(0))
    mean, std, latents = policy.distribution(params, {"x": 0.5})
    assert set(std) == {"steer", "gas"} and latents == {}
    assert std["gas"].shape == (2,)
    np.testing.assert_allclose(std["gas"], [0.125, 0.125], rtol=1e-6)
    assert float(std["steer"]) == pytest.approx(0.2, rel=1e-5)
    np.testing.assert_allclose(mean["gas"], [0.5, 0.5])


def test_log_prob_is_the_unclipped_diagonal_gaussian_of_the_stochastic_actions():
    policy = compile_text(NOISY)
    params = policy.init(jax.random.PRNGKey(0))
    act = {"steer": 0.3, "gas": np.array([0.45, 0.7], np.float32), "brake": 0.9}
    lp = float(policy.log_prob(params, {"x": 0.5}, act))

    def normal(a, mu, sd):
        return -0.5 * ((a - mu) / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi)

    expect = normal(0.3, 0.4, 0.2) + normal(0.45, 0.5, 0.125) + normal(0.7, 0.5, 0.125)
    assert lp == pytest.approx(expect, rel=1e-5)
    assert float(policy.log_prob(params, {"x": 0.5}, {**act, "brake": 0.0})) == pytest.approx(lp)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_sample_adds_noise_to_stochastic_actions_only_and_clips():
    policy = compile_text(NOISY)
    params = policy.init(jax.random.PRNGKey(0))
    keys = jax.random.split(jax.random.PRNGKey(1), 4000)
    actions, _ = jax.vmap(policy.sample, in_axes=(None, None, 0))(params, {"x": 0.5}, keys)
    np.testing.assert_allclose(actions["brake"], 0.25)
    steer = np.asarray(actions["steer"])
    assert steer.std() == pytest.approx(0.2, rel=0.1) and steer.mean() == pytest.approx(0.4, abs=0.02)
    assert np.all((np.asarray(actions["gas"]) >= 0) & (np.asarray(actions["gas"]) <= 1))
    edge, _ = jax.vmap(policy.sample, in_axes=(None, None, 0))(params, {"x": 1.0}, keys)
    assert np.max(edge["steer"]) == 1.0  # clipped draws sit on the bound


def test_log_prob_without_noise_is_zero():
    policy = compile_text(GAIN)
    assert float(policy.log_prob(policy.init(jax.random.PRNGKey(0)), {"x": 1.0}, {"a": 0.3})) == 0.0


# Each example costs 5-20 s here (the loop runs op by op, un-jitted): the fast tier keeps one
# structure and one MLP, the full suite runs them all.
FAST_EXAMPLES = {"examples/car_racing/initial.pol", "examples/car_racing/mlp.pol"}


ROWS = 3  # rows of the batch that is compared with a loop (each row of the loop is a copy to compile)


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=() if os.path.relpath(p, ROOT) in FAST_EXAMPLES else pytest.mark.slow)
    for p in EXAMPLES], ids=lambda p: os.path.relpath(p, ROOT))
def test_examples_vmap_equals_a_loop_and_gradients_are_finite(path):
    with open(path) as f:
        policy = compile_text(f.read())
    params = policy.init(jax.random.PRNGKey(0))
    rng = np.random.default_rng(0)
    batch = random_obs(policy, rng, (ROWS,))
    if policy.state0:  # a program with memory steps from a state (tests/compiler/backend/test_memory_lower.py has the rest)
        return _stateful_vmap_equals_a_loop(policy, params, batch)
    # One compile per example (the batch, the loop, the sample and the gradient together):
    # eagerly, the gradient alone dispatched (and compiled) each of its operations one by one.
    @jax.jit
    def run(params, batch, key):
        vmapped = jax.vmap(policy.apply, in_axes=(None, 0))(params, batch)
        looped = [policy.apply(params, {k: v[i] for k, v in batch.items()}) for i in range(ROWS)]
        obs = {k: v[0] for k, v in batch.items()}
        sample, _ = policy.sample(params, obs, key)
        grads = jax.grad(lambda p: policy.log_prob(p, obs, sample) + sum(
            jnp.sum(v) for v in jax.tree.leaves(policy.apply(p, obs)[0])))(params)
        return vmapped, looped, grads

    (acts, lats), looped, grads = run(params, batch, jax.random.PRNGKey(2))
    for i, (one_a, one_l) in enumerate(looped):
        for name in one_a:
            np.testing.assert_allclose(acts[name][i], one_a[name], rtol=1e-5, atol=1e-6)
        for name in one_l:
            np.testing.assert_allclose(lats[name][i], one_l[name], rtol=1e-5, atol=1e-6)
    assert set(lats) == {lat.name for lat in policy.program.latents}
    for a in policy.program.actions:
        assert np.all(np.asarray(acts[a.name]) >= a.lo) and np.all(np.asarray(acts[a.name]) <= a.hi)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    assert jax.tree.structure(grads) == jax.tree.structure(params)


def _stateful_vmap_equals_a_loop(policy, params, batch):
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (ROWS, *jnp.shape(x))), policy.state0)

    @jax.jit  # one compile, as above
    def run(params, batch, states, key):
        vmapped = jax.vmap(policy.step_distribution, in_axes=(None, 0, 0))(params, batch, states)
        looped = [policy.step_distribution(params, {k: v[i] for k, v in batch.items()}, policy.state0)
                  for i in range(ROWS)]
        obs = {k: v[0] for k, v in batch.items()}
        sample, _, _ = policy.step_sample(params, obs, policy.state0, key)
        grads = jax.grad(lambda p: policy.step_log_prob(p, obs, sample, policy.state0)[0] + sum(
            jnp.sum(v) for v in jax.tree.leaves(policy.step_distribution(p, obs, policy.state0)[0])))(params)
        return vmapped, looped, grads

    (mean, _, lats, nxt), looped, grads = run(params, batch, states, jax.random.PRNGKey(2))
    for i, one in enumerate(looped):
        for got, want in zip((mean, lats, nxt), (one[0], one[2], one[3])):
            for name in want:
                np.testing.assert_allclose(got[name][i], want[name], rtol=1e-5, atol=1e-6)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))


def test_functions_jit_and_lower_to_one_program():
    policy = compile_text(OPS)
    params = policy.init(jax.random.PRNGKey(0))
    obs = zeros_obs(policy, 0.5)
    text = policy.apply.lower(params, obs).as_text()
    assert "stablehlo" in text
    wrapped = jax.jit(lambda p, o: policy.apply(p, o)[0]["one"])
    assert float(wrapped(params, obs)) == pytest.approx(0.25)


def test_rank_promotion_stays_explicit_under_the_strict_config():
    assert jax.config.jax_numpy_rank_promotion == "raise"
    policy = compile_text(OPS)
    jax.make_jaxpr(policy.apply)(policy.init(jax.random.PRNGKey(0)), zeros_obs(policy))


def test_a_batched_obs_without_vmap_is_a_clear_error():
    policy = compile_text(GAIN)
    with pytest.raises(ValueError, match=r'obs "x" has shape \(4,\) but is declared real.*jax.vmap'):
        policy.apply(policy.init(jax.random.PRNGKey(0)), {"x": np.zeros(4)})


def test_obs_are_cast_to_float32():
    policy = compile_text(GAIN)
    actions, latents = policy.apply(policy.init(jax.random.PRNGKey(0)), {"x": np.float64(1.0)})
    assert latents["y"].dtype == jnp.float32 and actions["a"].dtype == jnp.float32


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_the_lowered_apply_is_the_program_a_person_would_write():
    policy = compile_text("""
        obs x : real[3]
        obs m : real[2, 3]
        weight k : real >= 0 = 2
        weight b : real[3] in [0, 1] = 0.5
        latent y = k * sum(m; axis = 0) + b * x
        latent h = mlp(y, x; hidden = [8], out = 2)
        action a : real[2] in [-1, 1] = tanh(h)
    """)
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = jnp.tanh(nn.Dense(8)(x))  # layers are named in creation order
            return nn.Dense(2)(x)

    def apply(params, obs):  # by hand
        k = jnp.exp(params["k"])
        b = jax.nn.sigmoid(params["b"])
        y = k * jnp.sum(obs["m"], axis=0) + b * obs["x"]
        h = Net().apply({"params": params["h.mlp"]}, jnp.concatenate([y, obs["x"]]))
        return {"a": jnp.clip(jnp.tanh(h), -1.0, 1.0)}, {"y": y, "h": h}

    params = policy.init(jax.random.PRNGKey(0))
    obs = {"x": np.zeros(3, np.float32), "m": np.zeros((2, 3), np.float32)}
    assert str(jax.make_jaxpr(policy.apply)(params, obs)) == str(jax.make_jaxpr(jax.jit(apply))(params, obs))


def test_an_mlp_inside_a_noise_std_gets_params_too():
    policy = compile_text("obs x : real\naction a : real = x ~ normal(std = 0.1 + softplus(mlp(x; hidden = [2])))")
    params = policy.init(jax.random.PRNGKey(0))
    assert set(params) == {"a.mlp"}
    _, std, _ = policy.distribution(params, {"x": 1.0})
    assert float(std["a"]) > 0.1


GUARDED = """
obs s : real in [0, 2]
obs v : real[3] in [0, 2]
weight k : real >= 0 = 1.5
latent r = if s > 0 then k / s else 0                "a divisor the guard excludes at 0"
latent l = if v > 0 then log(k * v) else 0           "elementwise guard over a vector"
latent q = if s > 0 then sqrt(k * s) ^ 0.5 else 0    "a non-integer power of a guarded root"
latent m = if v > 0 then sum(log(k * v + 1)) else 0 "a reduction inside: positions mix, no guard"
action a : real = r + sum(l) + q + sum(m)
"""


def test_a_guarded_branch_has_finite_gradients_where_its_guard_excludes_a_singular_point():
    # jnp.where alone gives NaN here: the discarded branch's inf derivative times 0
    policy = compile_text(GUARDED)
    params = policy.init(jax.random.PRNGKey(0))
    obs = {"s": np.float32(0.0), "v": np.array([0.0, 1.0, 0.0], np.float32)}
    grad = jax.grad(lambda p: policy.apply(p, obs)[0]["a"])(params)
    assert np.isfinite(np.asarray(grad["k"]))
    # the kept positions' values are those of the plain formulas
    k = 1.5
    _, lat = policy.apply(params, obs)
    np.testing.assert_allclose(lat["r"], 0.0)
    np.testing.assert_allclose(lat["l"], [0.0, np.log(k), 0.0], rtol=1e-6)
    np.testing.assert_allclose(lat["m"], [0.0, np.sum(np.log(k * obs["v"] + 1)), 0.0], rtol=1e-6)
    obs = {"s": np.float32(0.7), "v": np.array([0.5, 1.0, 2.0], np.float32)}
    _, lat = policy.apply(params, obs)
    np.testing.assert_allclose(lat["r"], k / 0.7, rtol=1e-6)
    np.testing.assert_allclose(lat["q"], np.sqrt(k * 0.7) ** 0.5, rtol=1e-6)


def test_a_guard_does_not_reach_through_an_operation_that_mixes_positions():
    # `sum` reads every position of v: making the guard's false positions "safe" would
    # change the kept ones, so inside the reduction the array guard does not apply
    policy = compile_text(GUARDED)
    obs = {"s": np.float32(1.0), "v": np.array([0.0, 1.0, 2.0], np.float32)}
    _, lat = policy.apply(policy.init(jax.random.PRNGKey(0)), obs)
    # v[0] = 0 is where the guard is false; had it been replaced by 1, m[1] would differ
    assert lat["m"][1] == pytest.approx(float(np.sum(np.log(1.5 * obs["v"] + 1))), rel=1e-6)


_LOWER_AND_LIST = """
import json, sys
import polc
policy = polc.loads(sys.stdin.read(), "p.pol").compile()
policy.init(__import__("jax").random.PRNGKey(0))
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
@pytest.mark.parametrize("with_mlp", [False, True])
def test_flax_is_imported_only_for_a_program_with_an_mlp_block(with_mlp):
    import json
    import subprocess
    import sys

    with open(os.path.join(ROOT, "examples", "car_racing", "initial.pol"), encoding="utf-8") as f:
        source = MLP if with_mlp else f.read()
    p = subprocess.run([sys.executable, "-c", _LOWER_AND_LIST], input=source, capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert ("flax" in json.loads(p.stdout.strip().splitlines()[-1])) == with_mlp

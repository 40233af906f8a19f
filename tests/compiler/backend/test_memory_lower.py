"""Policies with memory, the back end: `CompiledPolicy.state0` and the pure step functions carry
the state; vmap over environments and grad through a scan over steps work; the memoryless entry
points refuse a stateful program; the emitted module and the StableHLO export include the step."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polc
from polc.backend.emit import emit_hlo, emit_python
from polc.analysis.reference import run as reference_run

SRC = """
policy pid "A PID with a saturated integral, a latch and the previous action."
const IDLE = 0
const HOLD = 1
obs err : real in [-1, 1]
obs force : real in [0, 1]
weight k_p : real >= 0 = 1
weight k_i : real >= 0 = 0.2
weight s : real in [0.01, 1] = 0.1
state integ : real in [-0.5, 0.5] = 0 next integ + k_i * err
state prev_err : real = 0 next err
state grasped : bool = false next if grasped then force > 0.2 else force > 0.5
state mode : real in [0, 1] = IDLE next if mode == IDLE and grasped then HOLD else mode
state last_u : real in [-1, 1] = 0 next u
latent d_err = err - prev_err
action u : real in [-1, 1] = clip(k_p * err + integ + 0.1 * d_err + 0.1 * last_u, -1, 1) ~ normal(std = s)
action grip : real in [0, 1] = if grasped or mode == HOLD then 1 else 0
"""


@pytest.fixture(scope="module")
def policy():
    return polc.loads(SRC).compile()


def _obs(t: int) -> dict:
    return {"err": np.float32(np.sin(0.3 * t)), "force": np.float32(0.6 if 3 <= t < 6 else 0.1)}


def test_state0_and_a_step_that_carries_the_state(policy):
    params = policy.init(jax.random.PRNGKey(0))
    assert set(policy.state0) == {"integ", "prev_err", "grasped", "mode", "last_u"}
    assert policy.state0["grasped"].dtype == jnp.bool_ and policy.state0["integ"].dtype == jnp.float32
    state = policy.state0
    for t in range(8):
        mean, std, latents, nxt = policy.step_distribution(params, _obs(t), state)
        # each state's value at the start of the step is traced under its name
        for k in state:
            np.testing.assert_array_equal(latents[k], state[k])
        # the reference interpreter agrees on the step and on the next state
        weights = {k: np.asarray(v) for k, v in policy.constrain(params).items()}
        ref = reference_run(policy.program, weights, _obs(t), state={k: np.asarray(v) for k, v in state.items()},
                            step=True)
        np.testing.assert_allclose(mean["u"], ref.values["u"], rtol=1e-5, atol=1e-6)
        for k in nxt:
            np.testing.assert_allclose(np.asarray(nxt[k], float), np.asarray(ref.next_state[k], float),
                                       rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(nxt["last_u"], mean["u"])  # the previous action is the clipped mean
        assert -0.5 <= float(nxt["integ"]) <= 0.5
        state = nxt
    assert bool(state["grasped"]) is False and float(state["mode"]) == 1.0  # latched HOLD after the force


def test_step_sample_and_step_log_prob(policy):
    params = policy.init(jax.random.PRNGKey(0))
    actions, latents, nxt = policy.step_sample(params, _obs(1), policy.state0, jax.random.PRNGKey(3))
    logp, nxt2 = policy.step_log_prob(params, _obs(1), actions, policy.state0)
    assert np.isfinite(float(logp))
    for k in nxt:
        np.testing.assert_array_equal(nxt[k], nxt2[k])


def test_the_memoryless_entry_points_refuse_a_stateful_program(policy):
    params = policy.init(jax.random.PRNGKey(0))
    for name, call in (("apply", lambda: policy.apply(params, _obs(0))),
                       ("sample", lambda: policy.sample(params, _obs(0), jax.random.PRNGKey(0))),
                       ("log_prob", lambda: policy.log_prob(params, _obs(0), {"u": 0.0})),
                       ("distribution", lambda: policy.distribution(params, _obs(0)))):
        with pytest.raises(ValueError, match=f"has memory .* so `{name}` cannot run it: call `step_"):
            call()


def test_vmap_over_environments(policy):
    params = policy.init(jax.random.PRNGKey(0))
    n = 5
    obs = {"err": jnp.linspace(-1, 1, n), "force": jnp.full((n,), 0.6)}
    state = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), policy.state0)
    step = jax.vmap(policy.step_distribution, in_axes=(None, 0, 0))
    mean, _, _, nxt = step(params, obs, state)
    assert mean["u"].shape == (n,) and nxt["integ"].shape == (n,) and nxt["grasped"].dtype == jnp.bool_
    one = policy.step_distribution(params, {"err": obs["err"][1], "force": obs["force"][1]}, policy.state0)
    np.testing.assert_allclose(nxt["integ"][1], one[3]["integ"])


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_grad_through_a_scan_over_steps(policy):
    params = policy.init(jax.random.PRNGKey(0))
    T = 10
    seq = {"err": jnp.sin(0.3 * jnp.arange(T, dtype=jnp.float32)), "force": jnp.full((T,), 0.1)}
    acts = {"u": 0.3 * jnp.ones((T,)), "grip": jnp.zeros((T,))}

    def loss(p):
        def body(state, x):
            obs, a = x
            logp, nxt = policy.step_log_prob(p, obs, a, state)
            return nxt, logp
        _, logps = jax.lax.scan(body, policy.state0, (seq, acts))
        return -jnp.sum(logps)

    g = jax.grad(loss)(params)
    assert all(np.isfinite(np.asarray(v)).all() for v in g.values())
    assert float(jnp.abs(g["k_i"])) > 0  # k_i acts only through the integral state: gradient through time


def test_a_memoryless_program_steps_with_an_empty_state():
    p = polc.loads("obs x : real in [-1, 1]\nweight k : real = 0.5\naction a : real in [-1, 1] = clip(k * x, -1, 1)"
                   ).compile()
    params = p.init(jax.random.PRNGKey(0))
    assert p.state0 == {}
    mean, std, latents, nxt = p.step_distribution(params, {"x": 0.4}, {})
    assert nxt == {} and float(mean["a"]) == float(p.apply(params, {"x": 0.4})[0]["a"])


def test_the_emitted_module_steps_like_the_lowering(policy):
    src = emit_python(policy.program)
    mod = types.ModuleType("emitted_pid")
    exec(compile(src, "emitted_pid.py", "exec"), mod.__dict__)
    assert "def apply" not in src
    params = mod.init_params()
    s_emit, s_low = mod.init_state(), policy.state0
    for t in range(6):
        m1, l1, s_emit = mod.step(params, _obs(t), s_emit)
        m2, _, l2, s_low = policy.step_distribution(params, _obs(t), s_low)
        np.testing.assert_allclose(m1["u"], m2["u"], rtol=1e-6)
        for k in s_low:
            np.testing.assert_array_equal(s_emit[k], s_low[k])


def test_the_stablehlo_export_has_the_state_in_and_out(policy):
    text = emit_hlo(policy.program)
    assert "func.func public @main" in text
    # the five states come in as arguments and go out as results (bool as i1)
    assert text.count("tensor<i1>") >= 2


def test_a_memoryless_programs_entry_points_are_its_step_functions_with_an_empty_state():
    p = polc.loads("obs x : real[2] in [-1, 1]\nweight k : real >= 0 = 0.5\nweight s : real in [0.01, 1] = 0.2\n"
                   "latent y = k * sum(x)\naction a : real in [-1, 1] = clip(y, -1, 1) ~ normal(std = s)").compile()
    params = p.init(jax.random.PRNGKey(0))
    obs, key = {"x": np.array([0.3, -0.9], np.float32)}, jax.random.PRNGKey(7)
    acts, lat = p.sample(params, obs, key)
    acts2, lat2, nxt = p.step_sample(params, obs, {}, key)
    assert nxt == {} and float(acts["a"]) == float(acts2["a"]) and float(lat["y"]) == float(lat2["y"])
    lp, nxt = p.step_log_prob(params, obs, {"a": 0.1}, {})
    assert nxt == {} and float(lp) == float(p.log_prob(params, obs, {"a": 0.1}))

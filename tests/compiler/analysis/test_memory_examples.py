"""The example programs with memory (examples/memory/*.pol): each checks clean, compiles and
steps; random long rollouts in JAX (a batch of environments, a scan over steps, random observations
inside their ranges) never leave a proved range (the soundness of the state fixpoint); the
pick-place state machine walks through its modes; the C back end carries the state like JAX."""

from __future__ import annotations

import ctypes
import subprocess
import zlib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polc
from polc.analysis.reference import run as reference_run
from polc.check.typed import state_modes

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples" / "memory").glob("*.pol"))
STEPS, ENVS = 300, 32


def test_every_kind_of_memory_has_an_example():
    assert {p.stem for p in EXAMPLES} >= {"pid", "lowpass", "latch", "pick_place", "timer", "oscillator",
                                          "rate_limit"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_random_rollouts_stay_inside_the_proved_ranges(path):
    program = polc.load(str(path))
    tp = program.typed
    assert tp.states and not [d for d in program.warnings if d.is_error]
    assert all(r.status == "proved" for r in program.analysis.intents), program.analysis.intents
    policy = program.compile()
    params = policy.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(zlib.crc32(path.stem.encode()))
    obs = {}
    for o in tp.obs:  # observations drawn inside their ranges, half the time at an end
        key, k1, k2 = jax.random.split(key, 3)
        u = jax.random.uniform(k1, (STEPS, ENVS) + o.type.shape)
        u = jnp.where(jax.random.uniform(k2, u.shape) < 0.25, jnp.round(u), u)
        obs[o.name] = o.lo + (o.hi - o.lo) * u
    step = jax.vmap(policy.step_distribution, in_axes=(None, 0, 0))
    state0 = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (ENVS,) + x.shape), policy.state0)

    def body(state, o):
        mean, _, latents, nxt = step(params, o, state)
        return nxt, (mean, latents)

    _, (means, latents) = jax.jit(lambda s, o: jax.lax.scan(body, s, o))(state0, obs)
    seen = {**means, **latents}
    for st in tp.states:  # every state is traced under its name
        assert st.name in latents
    for name, values in seen.items():
        iv = program.analysis.intervals[name]
        v = np.asarray(values, dtype=np.float64)
        slack = 1e-5 * max(1.0, abs(iv.lo) if np.isfinite(iv.lo) else 1.0, abs(iv.hi) if np.isfinite(iv.hi) else 1.0)
        assert v.min() >= iv.lo - slack and v.max() <= iv.hi + slack, (name, str(iv), v.min(), v.max())


def _walk(tp, seq):
    state, modes = None, []
    for obs in seq:
        out = reference_run(tp, {}, obs, state=state, step=True)
        modes.append(int(out.values["mode"]))
        state = out.next_state
    return modes, out


def test_the_pick_place_machine_walks_through_its_modes_with_a_dwell_and_a_retry():
    tp = polc.load(str(ROOT / "examples" / "memory" / "pick_place.pol")).typed
    far = {"dx_obj": 0.5, "height": 0.3, "force": 0.0, "dx_goal": 1.0}
    above = dict(far, dx_obj=0.0)
    down = dict(above, height=0.0)
    gripped = dict(down, force=0.8)
    up = dict(gripped, height=0.3)
    slipped = dict(up, force=0.0)
    modes, _ = _walk(tp, [far, above, down] + [gripped] * 7 + [up, up])
    # APPROACH, DESCEND once above, GRASP once down, 6 steps of GRASP (the dwell), LIFT, TRANSPORT
    assert modes == [0, 0, 1, 2, 2, 2, 2, 2, 2, 3, 3, 4]
    modes, out = _walk(tp, [far, above, down] + [gripped] * 7 + [slipped, slipped])
    assert modes[-3:] == [3, 3, 1]  # the grasp failed in LIFT: back to DESCEND, one retry counted
    assert float(out.next_state["retries"]) == 1.0
    names = [n for n, _ in state_modes(tp, tp.states[0])]
    assert names == ["APPROACH", "DESCEND", "GRASP", "LIFT", "TRANSPORT"]


def test_the_latch_has_hysteresis():
    tp = polc.load(str(ROOT / "examples" / "memory" / "latch.pol")).typed
    state, grasped = None, []
    for f in (0.3, 0.6, 0.3, 0.25, 0.1, 0.3):
        out = reference_run(tp, {}, {"force": f}, state=state, step=True)
        state = out.next_state
        grasped.append(bool(state["grasped"]))
    assert grasped == [False, True, True, True, False, False]


def _c_library(tp, tmp_path):
    """The policy's C, built into a shared library (default weights: the declared ones)."""
    from polc.backend.emit_c import emit_c, weight_values
    from polc.backend.lower import lower
    from polc.runtime.io.c_policy import c_compiler

    cc = c_compiler()
    if cc is None:
        pytest.skip("no C compiler")
    policy = lower(tp)
    src = emit_c(tp, weight_values(tp, policy.init(jax.random.PRNGKey(0)), "the declared values"), "p.h")
    (tmp_path / "p.c").write_text(src.c)
    (tmp_path / "p.h").write_text(src.h)
    lib = tmp_path / "p.so"
    subprocess.run([cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Wdouble-promotion", "-Werror", "-O2",
                    "-shared", "-fPIC", str(tmp_path / "p.c"), "-o", str(lib), "-lm"], check=True)
    return ctypes.CDLL(str(lib)), policy


@pytest.mark.parametrize("name", ["pid", "pick_place", "oscillator"])
def test_the_c_back_end_carries_the_state_like_jax(name, tmp_path):
    tp = polc.load(str(ROOT / "examples" / "memory" / f"{name}.pol")).typed
    lib, policy = _c_library(tp, tmp_path)
    p = tp.name
    n, steps = 4, 40
    n_state = sum(st.type.size for st in tp.states)
    state = (ctypes.c_float * (n * n_state))()  # every field is 4 bytes (float, or int for a bool)
    for k in range(n):
        getattr(lib, f"{p}_init")(ctypes.byref(state, 4 * n_state * k))
    rng = np.random.default_rng(0)
    params = policy.init(jax.random.PRNGKey(0))
    jstate = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), policy.state0)
    step = jax.jit(jax.vmap(policy.step_distribution, in_axes=(None, 0, 0)))
    n_obs = sum(o.type.size for o in tp.obs)
    n_act = sum(a.type.size for a in tp.actions)
    for _ in range(steps):
        obs = {o.name: (o.lo + (o.hi - o.lo) * rng.random((n,) + o.type.shape)).astype(np.float32) for o in tp.obs}
        rows = np.concatenate([obs[o.name].reshape(n, -1) for o in tp.obs], axis=1).astype(np.float32)
        act = np.zeros((n, n_act), np.float32)
        getattr(lib, f"{p}_step_batch")(None, ctypes.c_size_t(n), state,
                                         rows.ctypes.data_as(ctypes.c_void_p), act.ctypes.data_as(ctypes.c_void_p),
                                         None)
        mean, _, _, jstate = step(params, obs, jstate)
        want = np.concatenate([np.asarray(mean[a.name]).reshape(n, -1) for a in tp.actions], axis=1)
        np.testing.assert_allclose(act, want, rtol=1e-5, atol=1e-5)
    assert rows.shape[1] == n_obs

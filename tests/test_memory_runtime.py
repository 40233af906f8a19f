"""Policies with memory through the runtime (docs/language.md, "Memory"): rollouts carry a state
per environment from `state0`, reset at every episode start, and trace each state as a column
`state.NAME` (kind "state", with a state machine's modes); the C back end steps the same states;
the PPO-style loss scores an episode by a scan over time; RL (both engines) updates a program with
memory; brax refuses one; `polc report` shows states as states. All on the toy point mass."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polc
from polc.runtime import acting as A
from polc.runtime.envs import toy
from polc.runtime.io.c_policy import c_compiler
from polc.runtime.io.table import read_table
from polc.runtime.trace.rollout import RolloutConfig, TraceLayout, rollout
from toy_cli import polc as run_polc, toy_env  # noqa: F401  (the toy env registered for the CLI tests)

SPEC = toy.SPEC
# A counter, a saturating integrator of the error (whose gain `ki` only the state reads) and a
# two-mode state machine; the action reads all three, so a wrong state changes what is executed.
MEMORY = toy.reach_policy(kp=0.3, kd=0.1, std=0.3).replace(
    "action push : real in [-1, 1] = kp * err - kd * vel ~ normal(std = s)",
    'weight ki : real in [0, 1] = 0.5 "integral gain"\n'
    'const NEAR = 0 "near the target"\n'
    'const FAR = 1 "far from the target"\n'
    'state n : real in [0, 1000] = 0 next n + 1 "steps since the episode began"\n'
    'state acc : real in [-2, 2] = 0 next acc + ki * err "the integrated error"\n'
    'state phase : real in [0, 1] = FAR next if far then FAR else NEAR "near or far"\n'
    'state moved : bool = false next moved or abs(vel) > 0.05 "the mass has moved (a latch)"\n'
    "action push : real in [-1, 1] = kp * err - kd * vel + 0.2 * acc + (if phase == FAR then 0.1 else 0)"
    " - 0.001 * n + (if moved then 0 else 0.05) ~ normal(std = s)")


@pytest.fixture(scope="module")
def policy():
    return polc.loads(MEMORY, "memory.pol", analyze=False).compile()


@pytest.fixture(scope="module")
def params(policy):
    return policy.init(jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def episodes(policy, params):
    """5 episodes in 2 slots (slots start new episodes mid-run), traced, on the means."""
    out = []
    rollout(policy, params, SPEC, [1, 2, 3, 4, 5], RolloutConfig(n_envs=2), out.append)
    return out


def hand_states(err: np.ndarray, far: np.ndarray, vel: np.ndarray, ki: float) -> dict[str, np.ndarray]:
    """Each state's value at the start of every step of one episode, by hand from the traced latents."""
    n, acc, phase, moved = 0.0, 0.0, 1.0, False
    out = {"n": [], "acc": [], "phase": [], "moved": []}
    for e, f, v in zip(err, far, vel):
        out["n"].append(n), out["acc"].append(acc), out["phase"].append(phase), out["moved"].append(moved)
        n, acc, phase = min(n + 1, 1000.0), float(np.clip(np.float32(acc) + np.float32(ki) * e, -2, 2)), float(f)
        moved = moved or abs(v) > 0.05
    return {k: np.asarray(v, bool if k == "moved" else np.float32) for k, v in out.items()}


def test_state_columns_are_traced_and_equal_a_hand_computation_reset_per_episode(policy, params, episodes):
    assert len(episodes) == 5
    ki = float(policy.constrain(params)["ki"])
    for ep in episodes:
        c = ep.columns
        want = hand_states(c["latent.err"], c["latent.far"], c["obs.vel"], ki)
        np.testing.assert_array_equal(c["state.n"], np.arange(ep.length))  # 0 at every episode start
        np.testing.assert_allclose(c["state.acc"], want["acc"], atol=1e-5)
        np.testing.assert_array_equal(c["state.phase"], want["phase"])
        assert c["state.moved"].dtype == bool and np.array_equal(c["state.moved"], want["moved"])
        assert not c["state.moved"][0] and c["state.moved"].any()  # false at each start, then latched
        assert c["state.acc"][0] == 0 and c["state.phase"][0] == 1  # the declared initial values
        # the action read the states: its mean is the source's formula over the traced columns
        w = policy.constrain(params)
        mean = np.clip(w["kp"] * c["latent.err"] - w["kd"] * c["obs.vel"] + 0.2 * c["state.acc"]
                       + np.where(c["state.phase"] == 1, 0.1, 0) - 0.001 * c["state.n"]
                       + np.where(c["state.moved"], 0, 0.05), -1, 1)
        np.testing.assert_allclose(c["mean.push"], mean, atol=1e-5)


def test_state_columns_are_kind_state_with_proved_ranges_and_a_state_machines_modes(policy):
    cols = {c.name: c for c in TraceLayout(policy.program, SPEC.schema).columns()}
    names = list(cols)
    assert names.index("latent.far") < names.index("state.n") < names.index("state.phase") < names.index("weight.kp")
    acc = cols["state.acc"].describe()
    assert acc["kind"] == "state" and acc["range"] == [-2.0, 2.0] and acc["proved"] == [-2.0, 2.0]
    assert acc["doc"] == "the integrated error" and "modes" not in acc
    assert cols["state.phase"].describe()["modes"] == {"NEAR": 0.0, "FAR": 1.0}
    assert "modes" not in cols["latent.err"].describe()


def test_a_memoryless_program_has_no_state_columns():
    tp = polc.loads(toy.reach_policy(), "reach.pol", analyze=False).compile().program
    assert [c.name for c in TraceLayout(tp, SPEC.schema).columns() if c.kind == "state"] == []


def test_episodes_log_prob_scans_the_state_through_time(policy, params):
    """Against step_log_prob carried by hand from state0: the log-density at step t depends on
    the states the earlier steps left (not the initial state at every step)."""
    rng = np.random.default_rng(0)
    obs = {"gap": rng.uniform(-1, 1, (2, 6, 2)).astype(np.float32),
           "vel": rng.uniform(-1, 1, (2, 6)).astype(np.float32)}
    actions = {"push": rng.uniform(-1, 1, (2, 6)).astype(np.float32)}
    got = np.asarray(jax.jit(lambda p, o, a: A.episodes_log_prob(A.acting(policy), p, o, a))(params, obs, actions))
    for e in range(2):
        state = policy.state0
        for t in range(6):
            logp, state = policy.step_log_prob(params, {k: v[e, t] for k, v in obs.items()},
                                               {"push": actions["push"][e, t]}, state)
            np.testing.assert_allclose(got[e, t], logp, rtol=1e-5, atol=1e-5)
    fresh, _ = policy.step_log_prob(params, {k: v[0, 5] for k, v in obs.items()}, {"push": actions["push"][0, 5]},
                                    policy.state0)
    assert not np.allclose(got[0, 5], fresh)  # step 5 did not start from state0


@pytest.mark.slow  # 4 s: a collection and the loss's compile
def test_the_ppo_loss_has_a_gradient_through_time_for_a_weight_only_a_state_reads(policy, params):
    from polc.runtime.rl.collect import Collector
    from polc.runtime.rl.losses import advantages, rl_loss

    with Collector(policy, SPEC, 2, asynchronous=False) as c:
        got = c.run(params, jax.random.PRNGKey(1), [1, 2, 3, 4])
        adv = advantages(got.rewards, got.mask, np.asarray([0, 0, 1, 1]), 0.98)
        batch = c.transitions(got, adv)
    # the collected log-densities are the scan's under the acting params
    logp = jax.jit(lambda p: A.episodes_log_prob(A.with_min_std(A.acting(policy), 0.0), p, batch.obs,
                                                 batch.actions))(params)
    np.testing.assert_allclose(np.asarray(logp) * got.mask, got.logp * got.mask, atol=1e-4)
    (loss, _), grad = jax.jit(jax.value_and_grad(rl_loss(policy, 0.2, 10), has_aux=True))(params, batch)
    assert np.isfinite(float(loss)) and float(jnp.abs(grad["ki"])) > 0  # ki reaches the action only via acc


def test_independent_rows_refuse_a_program_with_memory(policy):
    with pytest.raises(ValueError, match='policy "reach" has memory \\(state "n", "acc", "phase", "moved"\\), '
                                         "so its steps are not independent rows"):
        A.batched_distribution(A.acting(policy))


@pytest.mark.slow  # 8 s: a PPO update and two ES updates, with their compiles
def test_ppo_and_es_updates_run_on_a_program_with_memory(policy, params, tmp_path):
    from polc.runtime.rl.es import ESConfig, train as train_es
    from polc.runtime.rl.train import RLConfig, train

    ppo = train(policy, params, SPEC, RLConfig(resets=4, episodes_per_update=4, epochs=1), str(tmp_path / "ppo"))
    es = train_es(policy, params, SPEC, ESConfig(resets=8, population=4), str(tmp_path / "es"))
    for result in (ppo, es):
        assert any(not np.array_equal(result.params[k], params[k]) for k in params)
        assert all(np.all(np.isfinite(v)) for v in result.params.values())
    assert json.loads((tmp_path / "ppo" / "log.json").read_text())["updates"] == 1


def test_an_es_population_carries_and_resets_each_rows_state(policy, params):
    """Row i of a population acts as a rollout of row i's params does, episode after episode."""
    from polc.runtime.rl.es.population import Population, SearchSpace

    space = SearchSpace(policy, params)
    rows = np.stack([space.vector(params), space.vector(params) + 0.2]).astype(np.float32)
    with Population(policy, SPEC, size=2, space=space) as pop:
        first, again = pop.run(rows, [3, 4]), pop.run(rows, [3, 4])
    np.testing.assert_array_equal(first.returns, again.returns)  # the second run started from state0 again
    for i, seed in enumerate((3, 4)):
        alone = rollout(policy, space.params(rows[i]), SPEC, [seed], RolloutConfig(n_envs=1, trace=False))
        np.testing.assert_allclose(first.returns[i], alone.returns[0], rtol=1e-5)


@pytest.mark.skipif(c_compiler() is None, reason="no C compiler")
def test_the_c_back_end_steps_the_states_as_jax_does(policy, params, episodes):
    got = []
    rollout(policy, params, SPEC, [1, 2, 3, 4, 5], RolloutConfig(n_envs=2, backend="c"), got.append)
    for a, b in zip(episodes, got):
        assert np.array_equal(b.columns["state.moved"], a.columns["state.moved"])
        for name in ("state.n", "state.acc", "state.phase", "mean.push", "action.push"):
            np.testing.assert_allclose(b.columns[name], a.columns[name], atol=1e-5, err_msg=name)


def test_brax_refuses_a_program_with_memory_in_one_sentence(policy, params, tmp_path, capsys):
    from polc.runtime.rl.brax import BraxConfig, BraxError, train_brax

    message = ('policy "reach" has memory (state "n", "acc", "phase", "moved"), and brax\'s policy network '
               "carries no state between steps: train it with --engine polc or --engine es")
    with pytest.raises(BraxError) as err:
        train_brax(policy, params, "door_mjx", BraxConfig(num_envs=1, timesteps=1), str(tmp_path / "b"))
    assert str(err.value) == message
    pol = tmp_path / "memory.pol"
    pol.write_text(MEMORY)
    code, _, stderr = run_polc(capsys, "rl", str(pol), "--engine", "brax", "--env", "door_mjx", "--num-envs", "1",
                               "--timesteps", "1", "-o", str(tmp_path / "run"))
    assert code == 1 and stderr.strip() == "polc: " + message
    assert not (tmp_path / "run").exists()


def test_rollout_writes_state_columns_that_read_back_and_the_report_labels_as_states(tmp_path, capsys):
    from polc.runtime.report.trace import choose_columns, columns_table, latent_charts

    pol = tmp_path / "memory.pol"
    pol.write_text(MEMORY)
    out = str(tmp_path / "trace.parquet")
    code, _, _ = run_polc(capsys, "rollout", str(pol), "--env", "toy_reach", "--episodes", "2", "--n-envs", "1",
                          "-o", out, "-q")
    assert code == 0
    table = read_table(out)
    assert table.columns["state.phase"].kind == "state"
    assert table.columns["state.phase"].modes == (("NEAR", 0.0), ("FAR", 1.0))
    assert np.array_equal(table.column("state.n"), np.concatenate([np.arange(50), np.arange(50)]))
    assert {"state.n", "state.acc"} <= set(choose_columns(table))
    html = columns_table(table) + latent_charts([("trace", table)], ["state.acc"])
    assert "float32 scalar, state" in html and "near or far; modes: NEAR = 0, FAR = 1" in html
    assert "acc (state)" in html


def test_ray_workers_shares_collect_what_one_collector_does(policy, params):
    """A Ray worker (`RolloutWorker`, run here in-process) collects its share of an update's
    episodes from offset k: each share's episodes start from state0, and the shares put
    together are the whole update's episodes, draw for draw."""
    from polc.runtime.cluster.workers import RolloutWorker
    from polc.runtime.rl.collect import Collector

    key, seeds = jax.random.PRNGKey(2), [1, 2, 3, 4]
    worker = RolloutWorker(SPEC, MEMORY, "memory.pol")
    try:
        shares = [worker.collect(params, key, 0, seeds[:2], 2, 0.0, 1.0),
                  worker.collect(params, key, 2, seeds[2:], 2, 0.0, 1.0)]
        with Collector(worker.policy, SPEC, 2, asynchronous=False) as c:  # the worker's compiled step
            whole = c.run(params, key, seeds)
    finally:
        worker.close()
    np.testing.assert_allclose(np.concatenate([s.draws for s in shares]), whole.draws, atol=1e-5)
    np.testing.assert_allclose(np.concatenate([s.logp for s in shares]), whole.logp, atol=1e-4)

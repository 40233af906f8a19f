"""RL training, brax style, on the toy point mass: collection (draws, log-densities,
exact reset counts, independence from the number of envs), constraints under
large updates, resume = uninterrupted run bit for bit, and a learning threshold."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest

import polc
from polc.runtime.envs import toy
from polc.runtime.trace.evaluate import evaluate
from polc.runtime.io.params import load_params
from polc.runtime.rl import checkpoint as ckpt
from polc.runtime.rl.collect import Collector, RLError
from polc.runtime.rl.losses import batch_logp
from polc.runtime.rl.train import CURVE, LOG, PARAMS, RLConfig, train, training_seeds, validation_seeds

SPEC = toy.SPEC
# Pushes right whenever the target is right of the start, so those episodes run off the
# line early (terminated) while the others last the full 50 steps: uneven episode lengths.
RUNAWAY = toy.reach_policy(std=0.3).replace(
    "action push : real in [-1, 1] = kp * err - kd * vel",
    'obs target : real in [-1, 1] "target"\n'
    "action push : real in [-1, 1] = if target > 0 then 1 else kp * err - kd * vel")
TIMING = ("collect_s", "update_s", "elapsed_s")


def compiled(src: str):
    return polc.loads(src, "reach.pol", analyze=False).compile()


@pytest.fixture
def count_resets(monkeypatch):
    """Count every reset of a toy environment (in-process vector envs only)."""
    calls = []
    original = toy.PointMass.reset

    def reset(self, *, seed=None, options=None):
        calls.append(seed)
        return original(self, seed=seed, options=options)

    monkeypatch.setattr(toy.PointMass, "reset", reset)
    return calls


def collect(policy, seeds, n_envs, key=0):
    with Collector(policy, SPEC, n_envs, asynchronous=False) as c:
        return c.run(policy.init(jax.random.PRNGKey(0)), jax.random.PRNGKey(key), seeds)


def test_every_episode_is_exactly_one_reset_even_with_uneven_lengths(count_resets):
    policy = compiled(RUNAWAY)
    seeds = list(range(1000, 1007))
    ep = collect(policy, seeds, n_envs=3)
    assert sorted(set(ep.lengths.tolist())) != [toy.MAX_STEPS]  # some episodes ended early
    # One reset per training episode; idle slots restarted near the end are counted apart.
    assert ep.resets == len(seeds) and ep.resets + ep.idle_resets == len(count_resets)
    assert 0 < ep.idle_resets and sorted(count_resets[:3] + count_resets[3:3 + 4]) == seeds
    np.testing.assert_array_equal(ep.mask.sum(axis=1), ep.lengths)
    np.testing.assert_allclose(ep.returns, ep.rewards.sum(axis=1))


def test_episodes_depend_on_seed_and_key_not_on_the_number_of_envs():
    policy = compiled(RUNAWAY)
    seeds = [1000, 1001, 1002, 1003, 1000]
    one, three = collect(policy, seeds, 1), collect(policy, seeds, 3)
    # The same episodes up to float rounding (a batch of 3 rounds the policy's sums differently).
    np.testing.assert_array_equal(one.lengths, three.lengths)
    for a, b in zip(one[:-4], three[:-4]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    other = collect(policy, seeds, 1, key=1)
    assert not np.array_equal(one.draws, other.draws)
    # Episodes 0 and 4 share a seed (same track) but draw different noise.
    assert not np.array_equal(one.draws[0], one.draws[4])


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_logged_log_density_is_that_of_the_unclipped_draw():
    policy = compiled(toy.reach_policy(std=0.8))  # wide noise: many draws fall outside [-1, 1]
    with Collector(policy, SPEC, 1, asynchronous=False) as c:
        params = policy.init(jax.random.PRNGKey(0))
        ep = c.run(params, jax.random.PRNGKey(0), [1000, 1001])
        batch = c.transitions(ep, np.zeros(ep.mask.shape))
    assert np.abs(ep.draws).max() > 1.0
    recomputed = np.asarray(batch_logp(policy)(params, batch.obs, batch.actions))
    np.testing.assert_allclose(recomputed * ep.mask, ep.logp * ep.mask, rtol=1e-5, atol=1e-5)


def test_a_policy_without_noise_is_refused_naming_its_actions():
    src = toy.reach_policy().replace(" ~ normal(std = s)", "")
    with pytest.raises(RLError, match=r'action "push" has no noise'):
        Collector(compiled(src), SPEC)


def test_training_seeds_avoid_demo_and_eval_seeds_and_group_by_seed():
    seeds, groups = training_seeds(SPEC, RLConfig(episodes_per_update=6, seeds_per_update=3), update=2)
    assert seeds == [1006, 1006, 1007, 1007, 1008, 1008] and groups.tolist() == [0, 0, 1, 1, 2, 2]
    wrapped, _ = training_seeds(SPEC, RLConfig(), update=8000)  # the pool 1000..8999 wraps around
    assert wrapped == [1000] * 20
    # The held-out seeds of --keep best (9000..9999) are neither training nor evaluation seeds.
    held = validation_seeds(SPEC, 1000)
    assert held == list(range(9000, 10_000))
    assert not set(held) & set(range(1000, 9000)) and max(held) < SPEC.eval_seeds.start


def test_budget_counts_resets_and_stops_before_exceeding_it(tmp_path, count_resets):
    policy = compiled(toy.reach_policy(std=0.3))
    params = policy.init(jax.random.PRNGKey(0))
    config = RLConfig(resets=11, episodes_per_update=4)
    result = train(policy, params, SPEC, config, str(tmp_path / "a"))
    assert result.state.updates == 2 and result.state.resets == 8 == len(count_resets)
    assert [r["resets"] for r in result.log["log"]] == [4, 8]
    # A budget below one update trains nothing and writes nothing.
    assert train(policy, params, SPEC, RLConfig(resets=3, episodes_per_update=4), str(tmp_path / "b")).state.updates == 0
    assert not os.path.exists(tmp_path / "b" / PARAMS)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_constraints_hold_under_large_updates(tmp_path):
    # A huge learning rate without the trust region throws the unconstrained values far;
    # the constrained ones stay inside.
    src = toy.reach_policy(kp=0.5, kd=0.2, std=0.3).replace("weight kd : real >= 0", "weight kd : real in [0.1, 0.3]")
    policy = compiled(src)
    params = policy.init(jax.random.PRNGKey(0))
    result = train(policy, params, SPEC, RLConfig(resets=12, episodes_per_update=4, lr=3.0, target_kl=0.0),
                   str(tmp_path))
    moved = {k: abs(float(result.params[k]) - float(params[k])) for k in params}
    assert min(moved.values()) > 1.0  # every weight moved a lot in the unconstrained space
    w = {k: float(v) for k, v in policy.constrain(result.params).items()}
    assert w["kp"] > 0 and 0.1 <= w["kd"] <= 0.3 and 0.01 <= w["s"] <= 1.0
    # The params file holds those values and loads (load_params rejects values outside a constraint).
    loaded = load_params(str(tmp_path / PARAMS), policy)
    for k, v in policy.constrain(loaded).items():
        assert float(v) == pytest.approx(w[k], rel=1e-6)


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _untimed(log: dict) -> dict:
    return dict(log, elapsed_s=None, log=[{k: v for k, v in r.items() if k not in TIMING} for r in log["log"]])


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_resume_continues_bit_for_bit(tmp_path):
    policy = compiled(toy.reach_policy(kp=0.3, kd=0.1, std=0.3))
    params = policy.init(jax.random.PRNGKey(0))
    config = RLConfig(resets=15, episodes_per_update=5, lr=0.05, minibatches=5, seed=3)
    whole = train(policy, params, SPEC, config, str(tmp_path / "whole"))
    # The same run stopped after one update, then resumed twice with larger budgets.
    part = str(tmp_path / "part")
    train(policy, params, SPEC, RLConfig(**{**config.__dict__, "resets": 5}), part)
    with pytest.raises(RLError, match="pass --resume"):
        train(policy, params, SPEC, config, part)
    train(policy, params, SPEC, RLConfig(**{**config.__dict__, "resets": 10}), part, resume=True)
    resumed = train(policy, policy.init(jax.random.PRNGKey(0)), SPEC, config, part, resume=True)
    assert resumed.state.updates == whole.state.updates == 3
    for a, b in zip(_leaves(whole.params), _leaves(resumed.params)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_leaves(whole.state.opt_state), _leaves(resumed.state.opt_state)):
        np.testing.assert_array_equal(a, b)
    assert (tmp_path / "whole" / PARAMS).read_text() == (tmp_path / "part" / PARAMS).read_text()
    logs = [json.loads((tmp_path / d / LOG).read_text()) for d in ("whole", "part")]
    assert _untimed(logs[0]) == _untimed(logs[1])
    assert (tmp_path / "part" / CURVE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # A resumed run with other settings is refused, naming them.
    with pytest.raises(RLError, match=r"lr 0.05 -> 0.1"):
        train(policy, params, SPEC, RLConfig(**{**config.__dict__, "lr": 0.1, "resets": 20}), part, resume=True)


def test_checkpoint_holds_the_next_key_and_counters(tmp_path):
    policy = compiled(toy.reach_policy(std=0.3))
    params = policy.init(jax.random.PRNGKey(0))
    result = train(policy, params, SPEC, RLConfig(resets=8, episodes_per_update=4, seed=7), str(tmp_path))
    state, meta = ckpt.load(str(tmp_path), result.params, result.state.opt_state)
    assert (state.updates, state.resets) == (2, 8)
    assert meta["rng"] == np.asarray(jax.random.fold_in(jax.random.PRNGKey(7), 2)).tolist()
    assert len(meta["updates_log"]) == 2 and meta["config"]["seed"] == 7


LEARN = RLConfig(resets=160, lr=0.05, minibatches=4, seeds_per_update=4)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_rl_improves_the_toy_policy_past_a_threshold(tmp_path):
    """From weak gains (kp 0.2, kd 0.05, noise 0.3: return -8.3 on 20 unseen seeds, the
    expert's gains give -3.2), 160 resets of RL (8 updates) reach better than -4."""
    policy = compiled(toy.reach_policy(kp=0.2, kd=0.05, std=0.3))
    params = policy.init(jax.random.PRNGKey(0))
    seeds = list(range(10_000, 10_020))
    before = evaluate(policy, params, SPEC, seeds).mean
    result = train(policy, params, SPEC, LEARN, str(tmp_path))
    after = evaluate(policy, load_params(str(tmp_path / PARAMS), policy), SPEC, seeds).mean
    assert before < -8.0
    assert after > -4.0, (before, after, [r["return_mean"] for r in result.log["log"]])


def test_a_checkpoint_of_another_run_is_named_for_what_differs():
    from polc.runtime.rl.checkpoint import other_run

    meta = {"structure_sha256": "a", "policy": "p", "file": "p.pol", "env": "toy_reach",
            "start_params": {"file": "fit.params", "sha256": "s"}}
    same = dict(meta)
    assert other_run("run", same, meta, [], check_start=True) is None
    why = other_run("run", dict(meta, structure_sha256="b", policy="q", file="q.pol"), meta, [], True)
    assert why.startswith("the run in 'run' trained policy \"q\" (q.pol), whose structure differs from \"p\"")
    assert other_run("run", dict(meta, env="car_racing"), meta, [], True) == \
        "the run in 'run' trained on \"car_racing\", not \"toy_reach\""
    other_start = dict(meta, start_params={"file": None, "sha256": "t"})
    assert "started from other params (the declared weights) than fit.params" in other_run("run", other_start, meta,
                                                                                             [], True)
    assert other_run("run", other_start, meta, [], check_start=False) is None
    assert other_run("run", same, meta, ["lr 0.007 -> 0.01"], True).endswith("resume with the same ones "
                                                                              "(lr 0.007 -> 0.01)")


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_the_curve_is_redrawn_every_few_updates_and_after_the_last(tmp_path, monkeypatch):
    from polc.runtime.rl import curve, run as rl_run

    drawn = []
    real = curve.plot_curve
    monkeypatch.setattr(curve, "plot_curve", lambda path, records, *a, **k: (drawn.append(len(records)),
                                                                             real(path, records, *a, **k)))
    policy = compiled(toy.reach_policy(std=0.3))
    updates = rl_run.CURVE_EVERY + 2
    train(policy, policy.init(jax.random.PRNGKey(0)), SPEC,
          RLConfig(resets=2 * updates, episodes_per_update=2, seed=1), str(tmp_path / "run"))
    assert drawn == [rl_run.CURVE_EVERY, updates]  # the records each drawing had
    assert (tmp_path / "run" / CURVE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

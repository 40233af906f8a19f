"""What keeps `polc rl` from collapsing, on the toy point mass: the trust region
stops an update that would move the mean by many stds, the std floor lets a
near-deterministic fit explore, --keep best keeps the better held-out params, and
runs with the new settings resume (bit for bit, and through the CLI)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import jax
import numpy as np
import pytest

import polc
from polc.runtime.envs import toy
from polc.runtime.io.params import load_params, read_params
from polc.runtime.rl.collect import Collector
from polc.runtime.rl.train import LAST, LOG, PARAMS, RLConfig, train, validation_seeds
from polc.runtime.trace.evaluate import evaluate
from polc.runtime.trace.rollout import RolloutConfig
from toy_cli import pol, polc as run_polc, toy_env  # noqa: F401  (fixtures and the in-process runner)

SPEC = toy.SPEC
# A near-deterministic fit: std 0.002 (its constraint allows down to 0.001).
TINY = toy.reach_policy(kp=0.5, kd=0.2, std=0.002).replace("weight s  : real in [0.01, 1]", "weight s  : real in [0.001, 1]")


def compiled(src: str):
    return polc.loads(src, "reach.pol", analyze=False).compile()


def shift_in_stds(policy, before, after, seeds) -> float:
    """RMS over the states `before` visits on `seeds` of (mean_after - mean_before) / std_before."""
    with Collector(policy, SPEC, len(seeds), asynchronous=False) as c:
        ep = c.run(before, jax.random.PRNGKey(0), seeds)
        obs = c.transitions(ep, np.zeros(ep.mask.shape)).obs
    dist = jax.vmap(jax.vmap(policy.distribution, in_axes=(None, 0)), in_axes=(None, 0))
    m0, s0, _ = dist(before, obs)
    m1, _, _ = dist(after, obs)
    z = (np.asarray(m1["push"]) - np.asarray(m0["push"])) / np.asarray(s0["push"])
    return float(np.sqrt(np.sum(np.square(z) * ep.mask) / np.sum(ep.mask)))


@pytest.mark.slow  # 10+ s: RL updates from a fitted policy
def test_the_trust_region_stops_an_update_that_would_move_the_mean_by_many_stds(tmp_path):
    policy = compiled(TINY)
    params = policy.init(jax.random.PRNGKey(0))
    base = RLConfig(resets=8, episodes_per_update=8, seeds_per_update=4, lr=0.3, epochs=3, min_std=0.0)
    free = train(policy, params, SPEC, replace(base, target_kl=0.0), str(tmp_path / "free"))
    held = train(policy, params, SPEC, replace(base, target_kl=0.05), str(tmp_path / "held"))
    seeds = [1000, 1001, 1002, 1003]
    # Without it, one update moves the mean by tens of stds (approx. KL in the hundreds).
    f = free.log["log"][0]
    assert f["approx_kl"] > 50 and f["stopped_at"] is None and f["steps"] == 3
    assert shift_in_stds(policy, params, free.params, seeds) > 10
    # With it, the first Adam step is shortened back inside the target and the update stops there.
    h = held.log["log"][0]
    assert h["stopped_at"] == 1 and h["steps"] == 1 and h["of_steps"] == 3 and 0 < h["step_scale"] < 0.1
    assert 0 < h["approx_kl"] <= 0.05
    assert shift_in_stds(policy, params, held.params, seeds) < 1.0
    logged = json.loads((tmp_path / "held" / LOG).read_text())
    assert logged["log"][0]["stopped_at"] == 1 and logged["config"]["target_kl"] == 0.05


def _residual_std(policy, params, min_std: float) -> float:
    """The std of the draws around the policy's mean over 4 sampled episodes."""
    with Collector(policy, SPEC, 4, asynchronous=False, min_std=min_std) as c:
        ep = c.run(params, jax.random.PRNGKey(1), [1000, 1001, 1002, 1003])
        batch = c.transitions(ep, np.zeros(ep.mask.shape))
    mean = jax.vmap(jax.vmap(lambda o: policy.distribution(params, o)[0]["push"]))(batch.obs)
    r = (np.asarray(batch.actions["push"]) - np.asarray(mean))[ep.mask > 0]
    return float(np.std(r))


@pytest.mark.slow  # 10+ s: RL updates from a fitted policy
def test_the_std_floor_lets_a_near_deterministic_fit_explore(tmp_path):
    policy = compiled(TINY)
    params = policy.init(jax.random.PRNGKey(0))
    assert _residual_std(policy, params, 0.0) == pytest.approx(0.002, rel=0.1)   # its own std: no exploration
    assert _residual_std(policy, params, 0.1) == pytest.approx(0.1, rel=0.1)     # the floor's
    # The floor is recorded with the run, in the log and in rl.params; the params keep their own std.
    result = train(policy, params, SPEC, RLConfig(resets=4, episodes_per_update=4, min_std=0.1), str(tmp_path))
    assert json.loads((tmp_path / LOG).read_text())["config"]["min_std"] == 0.1
    assert read_params(str(tmp_path / PARAMS))["fit"]["config"]["min_std"] == 0.1
    assert float(policy.constrain(result.params)["s"]) < 0.01


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_keep_best_keeps_the_better_held_out_params(tmp_path):
    # Good gains and a learning rate so large, without the trust region, that RL wrecks them.
    policy = compiled(toy.reach_policy(std=0.3))
    params = policy.init(jax.random.PRNGKey(0))
    config = RLConfig(resets=12, episodes_per_update=4, lr=3.0, target_kl=0.0, keep="best", val_every=1,
                      val_episodes=4)
    result = train(policy, params, SPEC, config, str(tmp_path))
    log = json.loads((tmp_path / LOG).read_text())
    scores = [v["score"] for v in log["validations"]]
    assert [v["update"] for v in log["validations"]] == [0, 1, 2, 3] and len(set(scores)) > 1
    kept = log["kept"]
    assert kept["update"] == int(np.argmax(scores)) and kept["score"] == max(scores) > scores[-1]
    assert kept["seeds"] == validation_seeds(SPEC, 4) == [9000, 9001, 9002, 9003] and kept["actions"] == "mean"
    # rl.params is the kept update's params and scores what the log says on the held-out seeds;
    # last.params is where training ended.
    best, last = load_params(str(tmp_path / PARAMS), policy), load_params(str(tmp_path / LAST), policy)
    held_out = evaluate(policy, best, SPEC, kept["seeds"], RolloutConfig(n_envs=4)).mean
    assert held_out == pytest.approx(kept["score"], rel=1e-5)
    ended = policy.constrain(result.state.params)
    for k, v in policy.constrain(last).items():
        np.testing.assert_allclose(np.asarray(v), np.asarray(ended[k]), rtol=1e-5)
    assert read_params(str(tmp_path / PARAMS))["fit"]["kept"]["update"] == kept["update"]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_run_with_the_new_settings_resumes_bit_for_bit(tmp_path):
    policy = compiled(TINY)
    params = policy.init(jax.random.PRNGKey(0))
    config = RLConfig(resets=12, episodes_per_update=4, lr=0.3, target_kl=0.02, min_std=0.1, max_grad_norm=0.5,
                      keep="best", val_every=2, val_episodes=2, anneal=0.5, anneal_lr=True, minibatches=2, seed=4)
    whole = train(policy, params, SPEC, config, str(tmp_path / "whole"))
    part = str(tmp_path / "part")

    def interrupt(record):  # Ctrl-C after the first update (annealing follows the budget: keep it)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(policy, params, SPEC, config, part, on_update=interrupt)
    resumed = train(policy, params, SPEC, config, part, resume=True)
    assert resumed.state.updates == 3
    for a, b in zip(_leaves((whole.state.params, whole.state.best, whole.state.opt_state)),
                    _leaves((resumed.state.params, resumed.state.best, resumed.state.opt_state))):
        np.testing.assert_array_equal(a, b)
    logs = [json.loads((tmp_path / d / LOG).read_text()) for d in ("whole", "part")]
    timing = ("collect_s", "update_s", "elapsed_s")
    assert [{k: v for k, v in r.items() if k not in timing} for r in logs[0]["log"]] == \
        [{k: v for k, v in r.items() if k not in timing} for r in logs[1]["log"]]
    assert logs[0]["kept"] == logs[1]["kept"] and logs[0]["validations"] == logs[1]["validations"]
    # the sampling std shrinks over the last half of the 3 updates
    assert [r["std_scale"] for r in logs[0]["log"]] == [1.0, pytest.approx(0.7), pytest.approx(0.1)]
    assert [r["lr_scale"] for r in logs[0]["log"]] == [r["std_scale"] for r in logs[0]["log"]]  # --anneal-lr


def test_a_checkpoint_written_before_these_settings_resumes_as_the_paper_ran():
    old = {k: v for k, v in asdict(RLConfig()).items() if k not in RLConfig.PAPER}
    saved = RLConfig.from_saved(old)
    assert (saved.target_kl, saved.min_std, saved.max_grad_norm, saved.normalise_advantages, saved.keep) == \
        (0.0, 0.0, 0.0, False, "last")


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_cli_resume_keeps_the_new_settings_and_refuses_others(tmp_path, pol, capsys):
    out = str(tmp_path / "run")
    common = ("rl", pol, "--env", "toy_reach", "-o", out, "--n-envs", "1", "--episodes-per-update", "4", "-q")
    flags = ("--keep", "best", "--val-every", "1", "--val-episodes", "2", "--min-std", "0.1", "--target-kl", "0.02")
    code, _, err = run_polc(capsys, *common, "--resets", "4", *flags)
    assert code == 0 and "kept update" in err and "last.params" in err
    code, _, err = run_polc(capsys, *common, "--resets", "8", "--resume", "--min-std", "0.2")
    assert code == 2 and "--min-std 0.2 (the run used 0.1)" in err
    code, _, err = run_polc(capsys, *common, "--resets", "8", "--resume")
    assert code == 0 and "2 updates, 8 resets" in err
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    assert log["config"]["min_std"] == 0.1 and log["config"]["keep"] == "best"
    assert [v["update"] for v in log["validations"]] == [0, 1, 2]
    with pytest.raises(SystemExit) as exit_:  # argparse's own usage error
        run_polc(capsys, *common, "--resets", "4", "--keep", "worst")
    assert exit_.value.code == 2 and "invalid choice: 'worst'" in capsys.readouterr().err


def test_the_new_settings_are_polc_engine_flags(tmp_path, pol, capsys):
    code, _, err = run_polc(capsys, "rl", pol, "--env", "toy_reach", "-o", str(tmp_path / "r"), "--engine", "brax",
                            "--num-envs", "1", "--timesteps", "10", "--min-std", "0.1", "--keep", "best")
    assert code == 2 and "--min-std to the polc engine; --keep to the polc and es engines" in err


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_anneal_lr_scales_adams_step_by_the_std_scale():
    from polc.runtime.rl.losses import advantages
    from polc.runtime.rl.train import Updater

    policy = compiled(toy.reach_policy(kp=0.5, kd=0.2, std=0.2))
    params = policy.init(jax.random.PRNGKey(0))
    base = RLConfig(resets=8, episodes_per_update=4, seeds_per_update=2, lr=0.01, epochs=1, target_kl=0.0,
                    anneal=1.0)
    with Collector(policy, SPEC, 4, asynchronous=False) as c:
        ep = c.run(params, jax.random.PRNGKey(1), [1000, 1000, 1001, 1001], std_scale=0.5)
        batch = c.transitions(ep, advantages(ep.rewards, ep.mask, [0, 0, 1, 1], 0.98, True))
    moved = {}
    for flag in (False, True):
        config = replace(base, anneal_lr=flag)
        updater = Updater(policy, config)
        new, _, stats = updater(params, updater.optimizer.init(params), batch, np.random.default_rng(0), 0.5)
        moved[flag] = np.concatenate([np.ravel(np.asarray(a) - np.asarray(b))
                                      for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(params))])
    assert np.max(np.abs(moved[False])) > 1e-4  # Adam's first step moves every weight by about lr
    np.testing.assert_allclose(moved[True], 0.5 * moved[False], rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError, match="set anneal > 0"):
        RLConfig(anneal_lr=True).verify()

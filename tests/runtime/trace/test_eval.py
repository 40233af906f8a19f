"""Evaluation: unseen seeds disjoint from the demonstration seeds, mean ± std,
per-seed results, JSON, the share of episodes at the spec's "solved" score and
the success rate read from the env's info flags."""

from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import jax
import numpy as np
import pytest
from rich.console import Console

import polc
from polc.runtime.envs import toy
from polc.runtime.envs.metric import Metric
from polc.runtime.trace.evaluate import EvalResult, decimals, eval_seeds, evaluate, evaluate_many, render
from polc.runtime.trace.rollout import RolloutConfig, rollout


@pytest.fixture(scope="module")
def policy():
    return polc.loads(toy.reach_policy(), "reach.pol", analyze=False).compile()


def test_eval_seeds_are_unseen_and_disjoint_from_demonstration_seeds():
    seeds = eval_seeds(toy.SPEC, 10)
    assert seeds == list(range(10_000, 10_010))
    assert not set(seeds) & set(toy.SPEC.demo_seeds)
    assert eval_seeds(toy.SPEC, 2, start=20_000) == [20_000, 20_001]
    with pytest.raises(ValueError, match=r"overlap the demonstration seeds 0\.\.999"):
        eval_seeds(toy.SPEC, 3, start=998)


def test_evaluate_reports_per_seed_returns_and_their_mean_and_std(policy):
    params = policy.init(jax.random.PRNGKey(0))
    seeds = eval_seeds(toy.SPEC, 4)
    result = evaluate(policy, params, toy.SPEC, seeds)
    reference = rollout(policy, params, toy.SPEC, seeds, RolloutConfig(trace=False))
    assert np.array_equal(result.returns, reference.returns) and list(result.seeds) == seeds
    assert result.mean == pytest.approx(np.mean(reference.returns))
    assert result.std == pytest.approx(np.std(reference.returns))
    assert all(n == toy.MAX_STEPS for n in result.lengths)
    doc = json.loads(json.dumps(result.to_json(policy="reach.pol")))
    assert doc["env"] == "toy_reach" and doc["episodes"] == 4 and doc["policy"] == "reach.pol"
    assert [r["seed"] for r in doc["per_seed"]] == seeds
    assert doc["mean_return"] == round(result.mean, 2)
    d = result.decimals
    assert result.summary().startswith(f"toy_reach: return {result.mean:.{d}f} ± {result.std:.{d}f} over 4 unseen")


def test_rendered_table_has_a_row_per_seed_and_the_mean(policy):
    result = evaluate(policy, policy.init(jax.random.PRNGKey(0)), toy.SPEC, [10_000, 10_001])
    console = Console(record=True, width=100)
    console.print(render(result))
    text = console.export_text()
    assert "10000" in text and "10001" in text
    assert f"{result.mean:.{result.decimals}f} ± {result.std:.{result.decimals}f}" in text


def test_share_solved_counts_episodes_at_or_above_the_threshold():
    returns = np.array([950.0, 900.0, 899.99, 120.0])
    result = EvalResult("car_racing", np.arange(10_000, 10_004), returns, np.full(4, 1000), solved_at=900.0)
    assert result.solved.tolist() == [True, True, False, False]  # 900 itself is solved
    assert result.solved_share == 0.5
    assert result.summary().endswith("; the mean misses the solved threshold 900 (a mean at or above it); "
                                     "2/4 episodes (50%) reach it")
    doc = result.to_json()
    assert doc["solved_at"] == 900.0 and doc["solved_share"] == 0.5 and doc["mean_solved"] is False
    assert [r["solved"] for r in doc["per_seed"]] == [True, True, False, False]
    lower = EvalResult("door", np.arange(2), np.zeros(2), np.full(2, 500), scores=np.array([0.01, 0.3]),
                       metric=Metric("d", "d", False, "m", reduce="min"), solved_at=0.08)
    assert lower.solved.tolist() == [True, False]  # lower is better: at or below
    plain = EvalResult("toy", np.arange(2), returns[:2], np.full(2, 50))
    assert plain.solved is None and plain.solved_share is None and plain.success_rate is None
    assert "solved" not in plain.to_json() and "success_rate" not in plain.to_json()


def test_returns_get_the_digits_of_the_task_scale_and_the_mean_is_judged_against_the_threshold():
    """Reacher-v5: returns near -3.6 against gymnasium's reward_threshold -3.75, defined on the
    mean over 100 episodes: one decimal (-3.6) cannot tell them apart, and a share of episodes
    past the threshold is not whether the task is solved."""
    returns = np.array([-3.10, -3.52, -3.81, -4.12])  # mean -3.6375, std 0.3788
    result = EvalResult("gym:Reacher-v5", np.arange(10_000, 10_004), returns, np.full(4, 50), solved_at=-3.75)
    assert result.summary() == ("gym:Reacher-v5: return -3.64 ± 0.38 over 4 unseen seeds; the mean meets the solved "
                                "threshold -3.75 (a mean at or above it); 2/4 episodes (50%) reach it")
    console = Console(record=True, width=120)
    console.print(render(result))
    text = console.export_text()
    assert "-3.81" in text and "-3.64 ± 0.38" in text and "yes (2/4)" in text
    assert "≥ -3.75 on the mean row: the mean (the threshold is on it), then the episodes at or above it" in \
        " ".join(text.split())
    assert EvalResult("car_racing", np.arange(2), np.array([932.31, 834.26]), np.full(2, 1000), solved_at=900.0) \
        .summary().startswith("car_racing: return 883.3 ± 49.0 over 2 unseen seeds; the mean misses")
    assert decimals(np.array([0.0123, -0.0150])) == 4 and decimals(np.array([-150.2, -180.0])) == 1
    assert decimals(np.array([-150.2]), threshold=-150.125) == 3 and decimals(np.array([np.nan])) == 1


def test_evaluate_takes_the_solved_threshold_from_the_env_spec(policy):
    params = policy.init(jax.random.PRNGKey(0))
    seeds = eval_seeds(toy.SPEC, 6)
    plain = evaluate(policy, params, toy.SPEC, seeds)
    cut = float(np.median(plain.returns))
    result = evaluate(policy, params, dataclasses.replace(toy.SPEC, solved_at=cut), seeds)
    assert result.solved_at == cut and np.array_equal(result.returns, plain.returns)
    assert result.solved_share == pytest.approx(np.mean(plain.returns >= cut)) and 0 < result.solved_share < 1


class Reached(gym.Wrapper):
    """The toy env, reporting info["reached"] on steps where the mass is within 0.1 of its target."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        e = self.env.unwrapped
        return obs, reward, terminated, truncated, {**info, "reached": abs(e.target - e.pos) < 0.1}


class ReachedSpec:
    """toy.SPEC whose env reports success; evaluate reads the flag through `success`."""

    success = "reached"

    def make(self, *args, **kw):
        return Reached(toy.SPEC.make(*args, **kw))

    def __getattr__(self, name):
        return getattr(toy.SPEC, name)


def reached_by_hand(policy, params, seed: int) -> bool:
    """Whether any step of the episode with `seed` reports success, stepping the env here."""
    env = ReachedSpec().make()
    obs, _ = env.reset(seed=seed)
    act = jax.jit(lambda o: policy.distribution(params, o)[0])
    ok, done = False, False
    while not done:
        a = {k: np.asarray(v) for k, v in act({k: np.asarray(v) for k, v in obs.items()}).items()}
        obs, _, term, trunc, info = env.step(a)
        ok, done = ok or info["reached"], term or trunc
    return ok


@pytest.mark.parametrize("n_envs", [1, 3])
def test_success_rate_is_the_share_of_episodes_with_a_successful_step(policy, n_envs):
    # weak gains: the mass reaches only the nearer targets, so some episodes succeed and some do not
    weak = polc.loads(toy.reach_policy(kp=0.4, kd=1.0), "weak.pol", analyze=False).compile()
    params = weak.init(jax.random.PRNGKey(0))
    seeds = eval_seeds(toy.SPEC, 8)  # more seeds than envs: slots run several episodes and idle reruns
    result = evaluate(weak, params, ReachedSpec(), seeds, RolloutConfig(n_envs=n_envs))
    expected = [reached_by_hand(weak, params, s) for s in seeds]
    assert result.successes.tolist() == expected and 0 < sum(expected) < len(expected)
    assert result.success_rate == pytest.approx(np.mean(expected))
    doc = result.to_json()
    assert doc["success_rate"] == round(np.mean(expected), 4)
    assert [r["success"] for r in doc["per_seed"]] == expected
    assert f"success rate {np.mean(expected):.2f} ({sum(expected)}/8)" in result.summary()
    console = Console(record=True, width=120)
    console.print(render(result))
    assert "success" in console.export_text()


@pytest.mark.parametrize("n_envs", [1, 3])
def test_evaluate_many_gives_what_evaluate_gives_for_each_params_alone(n_envs):
    # one compiled step and one set of environments for both weight sets (polc fit's closed-loop
    # check): returns, lengths and success flags as separate evaluations give them
    weak = polc.loads(toy.reach_policy(kp=0.4, kd=1.0), "weak.pol", analyze=False).compile()
    strong = polc.loads(toy.reach_policy(), "strong.pol", analyze=False).compile()
    a, b = weak.init(jax.random.PRNGKey(0)), strong.init(jax.random.PRNGKey(0))
    seeds = eval_seeds(toy.SPEC, 8)
    config = RolloutConfig(n_envs=n_envs)
    together = evaluate_many(weak, [a, b, a], ReachedSpec(), seeds, config)
    alone = [evaluate(weak, p, ReachedSpec(), seeds, config) for p in (a, b, a)]
    assert len(together) == 3
    for got, want in zip(together, alone):
        assert got.returns.tolist() == want.returns.tolist() and got.lengths.tolist() == want.lengths.tolist()
        assert got.successes.tolist() == want.successes.tolist()
    assert together[0].returns.tolist() != together[1].returns.tolist()  # the params did change the episodes

"""Evaluation: unseen seeds disjoint from the demonstration seeds, mean ± std,
per-seed results, JSON."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from rich.console import Console

import polc
from polc.runtime.envs import toy
from polc.runtime.trace.evaluate import eval_seeds, evaluate, render
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
    assert result.summary().startswith(f"toy_reach: return {result.mean:.1f} ± {result.std:.1f} over 4 unseen")


def test_rendered_table_has_a_row_per_seed_and_the_mean(policy):
    result = evaluate(policy, policy.init(jax.random.PRNGKey(0)), toy.SPEC, [10_000, 10_001])
    console = Console(record=True, width=100)
    console.print(render(result))
    text = console.export_text()
    assert "10000" in text and "10001" in text
    assert f"{result.mean:.1f} ± {result.std:.1f}" in text

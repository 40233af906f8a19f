"""`polc rl --engine es`: evolution strategies on the mean actions (polc.runtime.rl.es),
on the toy point mass: a population plays row i in environment i, the antithetic
estimate follows the fitness, training improves the held-out mean-action score of a
structure (one whose action declares no noise too), a run resumes bit for bit, and
the CLI refuses what does not apply to the engine."""

from __future__ import annotations

import json
from dataclasses import replace

import jax
import numpy as np
import pytest

import polc
from polc.runtime.envs import toy
from polc.runtime.io.params import load_params
from polc.runtime.rl.es import ESConfig, train
from polc.runtime.rl.es.population import Population, SearchSpace
from polc.runtime.rl.es.train import centred_ranks, gradient, perturbations
from polc.runtime.rl.heldout import validation_seeds
from polc.runtime.trace.evaluate import evaluate
from polc.runtime.trace.rollout import RolloutConfig
from toy_cli import pol, polc as run_polc, toy_env  # noqa: F401  (fixtures and the in-process runner)

SPEC = toy.SPEC
# The expert's structure from weak gains; the action without noise (the polc engine refuses it).
WEAK = toy.reach_policy(kp=0.3, kd=0.1, std=0.3)
NO_NOISE = WEAK.replace(" ~ normal(std = s)", "").replace('weight s  : real in [0.01, 1] = 0.3 "noise std"\n', "")


def compiled(src: str):
    return polc.loads(src, "reach.pol", analyze=False).compile()


def test_a_population_plays_row_i_on_seed_i():
    policy = compiled(WEAK)
    params = policy.init(jax.random.PRNGKey(0))
    space = SearchSpace(policy, params)
    flat = space.vector(params)
    rows = np.stack([flat * f for f in (0.5, 1.0, 2.0, 4.0)]).astype(np.float32)
    seeds = [1000, 1001, 1000, 1002]
    with Population(policy, SPEC, 4, space) as pop:
        got = pop.run(rows, seeds)
    for i, (row, seed) in enumerate(zip(rows, seeds)):
        alone = evaluate(policy, space.params(row), SPEC, [seed], RolloutConfig(trace=False))
        assert got.returns[i] == pytest.approx(alone.returns[0], rel=1e-6, abs=1e-6), i
    assert len(set(np.round(got.returns, 6))) > 1  # the rows really differ


def test_a_population_needs_one_row_and_one_seed_per_environment():
    policy = compiled(WEAK)
    space = SearchSpace(policy, policy.init(jax.random.PRNGKey(0)))
    with Population(policy, SPEC, 4, space) as pop, pytest.raises(ValueError, match="a population of 4"):
        pop.run(np.stack([space.vector(policy.init(jax.random.PRNGKey(0)))] * 3), [1000] * 3)


def test_the_search_space_leaves_out_the_weights_only_a_noise_std_reads():
    policy = compiled(WEAK)
    params = policy.init(jax.random.PRNGKey(0))
    space = SearchSpace(policy, params)
    assert space.searched == ("kp", "kd") and set(space.fixed) == {"s"} and space.size == 2
    back = space.params(space.vector(params) + 1.0)
    assert float(back["s"]) == float(params["s"]) and float(back["kp"]) == float(params["kp"]) + 1.0


def test_centred_ranks_span_minus_half_to_half_and_tie_equal_returns():
    assert centred_ranks(np.array([3.0, -1.0, 10.0])).tolist() == [0.0, -0.5, 0.5]
    tied = centred_ranks(np.array([5.0, 5.0, 1.0, 9.0]))
    assert tied[0] == tied[1] and tied[2] == -0.5 and tied[3] == 0.5


def test_the_antithetic_estimate_follows_the_fitness():
    """On a linear fitness w . theta the estimate points along w (ranks keep the direction)."""
    config = ESConfig(population=400, sigma=0.1)
    w = np.array([3.0, -1.0, 0.5, 0.0])
    noise = perturbations(config, 0, w.size)
    theta = np.zeros(w.size)
    scores = np.concatenate([(theta + 0.1 * noise) @ w, (theta - 0.1 * noise) @ w])
    g = gradient(noise, scores, config.sigma)
    assert g @ w / (np.linalg.norm(g) * np.linalg.norm(w)) > 0.95


def test_perturbations_depend_on_the_seed_and_the_update_only():
    c = ESConfig(population=6, seed=3)
    assert np.array_equal(perturbations(c, 4, 5), perturbations(c, 4, 5))
    assert not np.array_equal(perturbations(c, 4, 5), perturbations(c, 5, 5))
    assert not np.array_equal(perturbations(c, 4, 5), perturbations(replace(c, seed=4), 4, 5))


@pytest.mark.parametrize("bad, message", [
    ({"population": 3}, "population must be an even number"), ({"population": 0}, "population must be an even"),
    ({"sigma": 0.0}, "sigma must be positive"), ({"lr": float("nan")}, "lr must be positive"),
    ({"keep": "worst"}, 'keep must be "best" or "last"'), ({"val_every": 0}, "val_every must be at least 1"),
])
def test_bad_settings_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        replace(ESConfig(), **bad).verify()


@pytest.mark.slow  # 10 updates of 20 toy episodes, held-out evaluations: about 5 s
def test_es_improves_the_held_out_mean_action_score_even_without_noise(tmp_path):
    policy = compiled(NO_NOISE)  # the polc engine refuses it: its action has no noise
    params = policy.init(jax.random.PRNGKey(0))
    config = ESConfig(resets=200, sigma=0.1, lr=0.05, keep="best", val_every=5, val_episodes=10)
    result = train(policy, params, SPEC, config, str(tmp_path / "run"))
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    assert log["engine"] == "es" and log["updates"] == 10 and log["resets"] == 200
    start, kept = log["validations"][0]["score"], log["kept"]["score"]
    assert kept > start + 1.0, log["validations"]  # the toy's return is minus the summed distance
    # The kept params are what rl.params holds, and they beat the start on the evaluation seeds too.
    saved = load_params(str(tmp_path / "run" / "rl.params"), policy)
    seeds = list(range(10_000, 10_020))
    before = evaluate(policy, params, SPEC, seeds, RolloutConfig(n_envs=20, trace=False)).mean
    after = evaluate(policy, saved, SPEC, seeds, RolloutConfig(n_envs=20, trace=False)).mean
    assert after > before
    # The weights moved toward the expert's gains (kp 1.5, kd 0.5 in `toy`), inside their constraints.
    w = policy.constrain(result.params)
    assert float(w["kp"]) > 0.3 and float(w["kd"]) >= 0
    assert validation_seeds(SPEC, 10) == log["kept"]["seeds"]


@pytest.mark.slow  # four short runs: about 4 s
def test_a_resumed_run_reaches_the_same_params_bit_for_bit(tmp_path):
    policy = compiled(WEAK)
    params = policy.init(jax.random.PRNGKey(0))
    config = ESConfig(resets=80, population=8, keep="best", val_every=5, val_episodes=2)  # split at update 5
    whole = train(policy, params, SPEC, config, str(tmp_path / "whole"))
    train(policy, params, SPEC, replace(config, resets=40), str(tmp_path / "split"))
    with pytest.raises(Exception, match="pass --resume"):
        train(policy, params, SPEC, config, str(tmp_path / "split"))
    split = train(policy, params, SPEC, config, str(tmp_path / "split"), resume=True)
    for a, b in zip(jax.tree.leaves(whole.params), jax.tree.leaves(split.params)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    drop = lambda log: [{k: v for k, v in r.items() if not k.endswith("_s")} for r in log["log"]]  # noqa: E731
    assert drop(whole.log) == drop(split.log) and whole.log["kept"] == split.log["kept"]


@pytest.mark.slow  # runs a short es run first: about 3 s
def test_the_cli_runs_es_and_refuses_to_resume_it_with_another_engine(tmp_path, pol, capsys):
    out = str(tmp_path / "run")
    code, _, err = run_polc(capsys, "rl", pol, "--env", "toy_reach", "--engine", "es", "--resets", "40",
                            "--population", "10", "-o", out)
    assert code == 0 and "wrote" in err and "4 updates, 40 resets" in err
    code, _, err = run_polc(capsys, "rl", pol, "--env", "toy_reach", "--resets", "60", "--resume", "-o", out)
    assert code == 2 and "trained by --engine es" in err
    code, _, err = run_polc(capsys, "rl", pol, "--env", "toy_reach", "--engine", "es", "--resets", "60",
                            "--resume", "--sigma", "0.2", "-o", out)
    assert code == 2 and "--sigma 0.2 (the run used 0.05)" in err


@pytest.mark.parametrize("argv, message", [
    (["--engine", "es", "--resets", "20", "--min-std", "0.1"], "--min-std belongs to the polc engine, not --engine es"),
    (["--resets", "20", "--population", "4"], "--population belongs to the es engine, not --engine polc"),
    (["--engine", "es"], "the es engine needs --resets N"),
    (["--engine", "es", "--resets", "20", "--population", "5"], "population must be an even number"),
    (["--engine", "es", "--resets", "20", "--ray", "auto"], "--ray is not supported by --engine es"),
])
def test_es_flags_are_usage_errors_where_they_do_not_apply(argv, message, tmp_path, pol, capsys):
    code, _, err = run_polc(capsys, "rl", pol, "--env", "toy_reach", "-o", str(tmp_path / "r"), *argv)
    assert code == 2 and message in err


def test_the_curve_shows_each_updates_population_mean_its_spread_a_running_mean_and_a_legend_off_the_data():
    """Each ES update plays one training seed, so its population mean swings with the seed
    (Reacher: -1.7 to -6.3): the curve draws it with its spread over the members, the running
    mean over SMOOTH updates as the trend, and the legend outside the axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from polc.runtime.rl.curve import SMOOTH, curve_figure, running_mean

    assert running_mean([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    means = [-6.3, -1.7, -5.0, -2.0] * 5
    records = [{"resets": 20 * (i + 1), "return_mean": m, "return_std": 0.5} for i, m in enumerate(means)]
    fig = curve_figure(records, "ES: reach.pol on toy_reach", solved=-3.75, label="population mean return")
    FigureCanvasAgg(fig).draw()
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["population mean return, per update"].get_ydata()) == means
    smooth = lines[f"running mean over {SMOOTH} updates"].get_ydata()
    assert smooth[-1] == pytest.approx(np.mean(means[-SMOOTH:])) and np.ptp(smooth[SMOOTH:]) < 0.5
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(-6.8) and band.max() == pytest.approx(-1.2)
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts == ["± std over the update's episodes", "population mean return, per update",
                     f"running mean over {SMOOTH} updates", "solved (-3.75)"]
    renderer = fig.canvas.get_renderer()
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))

"""`polc experiment`: the paper's Table 1 from one command (`--quick` end to end),
its accounting of LLM calls and resets, caching and resuming, and its refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from polc.cli import main as polc
from polc.runtime.envs.metric import RETURN, Metric
from polc.runtime.experiment import QUICK, TASKS, Experiment, ExperimentError, Row
from polc.runtime.experiment.report import curve, markdown, plot_curves
from polc.runtime.experiment.run import digest_refinement, first_reached, pooled, reached
from quick_budget import MAX_STEPS, quick_budget
from test_report import browser, report  # noqa: F401  (the headless Chromium fixture)

ROOT = Path(__file__).resolve().parents[3]
METHODS = ["Expert demonstration"] + [
    f"{s} + {m}" for s in ("MLP", "Initial structure", "Refined structure")
    for m in ("IL", "RL, low (8 resets)", "RL, high (16 resets)", "ES, low (8 resets)", "ES, high (16 resets)")]
PNG = b"\x89PNG\r\n\x1a\n"

# On the Ray modules' xdist worker: conftest's quick experiment then runs once for both.
pytestmark = pytest.mark.xdist_group("ray")


def polc_in_repo(*argv: str) -> int:
    """`polc ARGV` run from the checkout (the experiments read examples/ from there)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        return polc(list(argv))


@pytest.fixture(scope="module")
def quick_run(quick_car_racing):
    return quick_car_racing  # conftest's: one quick experiment serves this module and the Ray one


@pytest.mark.slow
def test_quick_car_racing_writes_every_row_of_table_1(quick_run):
    results = json.loads((quick_run / "results.json").read_text())
    rows = results["rows"]
    assert [r["method"] for r in rows] == METHODS
    for r in rows:
        assert len(r["per_seed"]) == QUICK.seeds
        assert r["mean"] == pytest.approx(sum(r["per_seed"]) / QUICK.seeds, abs=1e-3)
        if r["stage"] != "demo":  # every policy row is scored with sampled actions too (all declare noise)
            assert r["sampled_mean"] is not None
    table = (quick_run / "table.md").read_text()
    for m in METHODS:
        assert f"| {m} |" in table
    assert "SCRIPTED" in table and "--quick" in table
    assert results["quick"] and results["solved_at"] == 900.0
    for r in rows:  # Car Racing defines "solved" (900): every row carries the share of its tracks there
        assert r["solved_share"] == pytest.approx(sum(v >= 900 for v in r["per_seed"]) / QUICK.seeds)
        assert r["success_rate"] is None and r["training_seeds"] == 1
    assert (quick_run / "rounds.png").read_bytes().startswith(PNG)
    assert (quick_run / "rl_curves.png").read_bytes().startswith(PNG)


@pytest.mark.slow
def test_quick_tables_and_plots_say_they_are_quick(quick_run):
    table = (quick_run / "table.md").read_text()
    title, _, notice = table.splitlines()[:3]
    assert title.endswith("(QUICK RUN: not results)")
    # the budget it ran (the tests' quick budget cuts QUICK's 300-step episodes to MAX_STEPS)
    assert notice.startswith(
        f"**QUICK RUN (episodes cut at {MAX_STEPS} steps, 3 seeds, RL 8/16 resets, 1 training seed)")
    assert "| ≥ 900, mean |" in table
    # two RL updates of the low budget: the note says so instead of "over 5 updates"
    assert "mean training return over 2 updates" in table and "over 5 updates" not in table


@pytest.mark.slow
def test_quick_car_racing_counts_llm_calls_and_resets_as_the_paper(quick_run):
    results = json.loads((quick_run / "results.json").read_text())
    summary = json.loads((quick_run / "refine" / "summary.json").read_text())
    ref = results["refinement"]
    assert ref["scripted"] and ref["llm_calls"] == summary["totals"]["llm_calls"] > 0
    assert ref["resets"] == summary["totals"]["resets"] > 0
    by = {r["method"]: r for r in results["rows"]}
    assert by["MLP + IL"]["resets"] == 0 and by["MLP + IL"]["llm_calls"] == 0
    assert by["MLP + RL, high (16 resets)"]["resets"] == 16
    assert by["Refined structure + IL"]["resets"] == ref["resets"]
    assert by["Refined structure + RL, low (8 resets)"]["resets"] == ref["resets"] + 8
    assert by["Refined structure + RL, high (16 resets)"]["llm_calls"] == ref["llm_calls"]
    # the refined structure is the refinement's last round, fitted by the loop itself
    last = ref["rounds"][-1]
    assert ref["final_round"] == last["round"]
    assert (quick_run / "structures" / "refined.pol").read_text() == Path(ref["final_policy"]).read_text()
    # the high budget continued the low budget's run: one log, 16 resets of 4 episodes
    log = json.loads((quick_run / "rl" / "initial" / "seed0" / "log.json").read_text())
    assert [u["resets"] for u in log["log"]] == [4, 8, 12, 16]


@pytest.mark.slow
def test_rerunning_a_finished_experiment_reuses_every_step(quick_run, capsys):
    steps = sorted((quick_run / "steps").iterdir())
    before = {p.name: p.stat().st_mtime_ns for p in steps}
    with quick_budget():  # the budget it ran with: another one in the same directory is refused
        assert polc_in_repo("experiment", "car_racing", "--quick", "-q", "-o", str(quick_run)) == 0
    err = capsys.readouterr().err
    assert "continuing the experiment" in err and "] done in" not in err
    assert {p.name: p.stat().st_mtime_ns for p in sorted((quick_run / "steps").iterdir())} == before


def test_a_directory_holding_another_experiment_is_refused(tmp_path, capsys):
    (tmp_path / "experiment.json").write_text(json.dumps({"task": "door", "budget": {"quick": False}}))
    assert polc_in_repo("experiment", "car_racing", "--quick", "-q", "-o", str(tmp_path)) == 1
    assert "holds another experiment (door, budget full" in capsys.readouterr().err


def test_an_unknown_experiment_is_a_usage_error(capsys):
    assert polc(["experiment", "lunar_lander", "-o", "/nonexistent"]) == 2
    assert "no experiment 'lunar_lander'; choose one of: car_racing, door" in capsys.readouterr().err


def test_a_finished_step_is_kept_when_a_later_one_fails(tmp_path):
    exp = Experiment(TASKS["car_racing"], QUICK, str(tmp_path), say=lambda s: None)
    calls = []
    first = exp._step("one", "first", lambda: calls.append(1) or {"value": 1})

    def broken():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        exp._step("two", "second", broken)
    again = Experiment(TASKS["car_racing"], QUICK, str(tmp_path), say=lambda s: None)
    assert again._step("one", "first", lambda: calls.append(2) or {"value": 2}) == first
    assert calls == [1] and not (tmp_path / "steps" / "two.json").exists()


def test_a_refinement_run_without_an_evaluated_round_is_a_clear_error(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"rounds": [{"round": 0}], "totals": {}}))
    with pytest.raises(ExperimentError, match="evaluated no round"):
        digest_refinement(tmp_path, RETURN)


def test_resets_to_a_threshold_count_from_the_first_window_of_updates_reaching_it():
    returns = [850, 905, 880, 920, 930, 940, 910, 890]  # one lucky update (905) is not reaching 900
    log = [{"resets": 20 * (i + 1), "return_mean": float(r)} for i, r in enumerate(returns)]
    assert first_reached(log, 900.0, smooth=1) == 40
    assert first_reached(log, 900.0, smooth=5) == 120  # updates 2..6 average 915; 1..5 only 897
    assert first_reached(log, 950.0) is None and first_reached(log, None) is None
    assert reached(log, 900.0, before=8).endswith("first reached 900 after 128 resets (120 of RL + 8 of refinement)")
    assert reached(log, 900.0, before=8, learner="ES").endswith("(120 of ES + 8 of refinement)")
    assert "never reached 950 (last 918.0)" in reached(log, 950.0)
    # a run shorter than the window (a quick run) is averaged over what it has, and says so
    assert first_reached(log[:2], 870.0) == 40 and first_reached(log[:2], 900.0) is None
    assert reached(log[:1], 900.0) == "mean training return over 1 update never reached 900 (last 850.0)"


def test_a_distance_metric_is_printed_with_its_unit_direction_and_four_decimals():
    door = Metric("min handle-to-target distance", "min_handle_to_target", False, "metres", unit="m", reduce="min")
    rows = [Row("Expert demonstration", "expert", "demo", 0, 0, 0, 0.0223, 0.0),
            Row("Initial structure + IL", "initial", "IL", 1, 0, 0, 0.54137, 0.00571)]
    text = markdown(TASKS["door"], QUICK, rows, {}, door, [10000, 10001, 10002], 75.0, "polc experiment door")
    assert "| Min handle-to-target distance (m), mean actions |\n" in text  # no sampled column: none was sampled
    assert "| Initial structure + IL | 1 | 0 | 0 | 0.5414 ± 0.0057 |\n" in text
    assert "| Expert demonstration | - | - | - | 0.0223 ± 0.0000 |\n" in text
    assert "declares no noise" in text
    assert "lower is better" in text and "Compute time 0:01:15" in text


def test_an_rl_row_pools_its_training_seeds_mean_of_means_and_their_spread():
    runs = [{"seeds": [1, 2], "values": [v, w], "mean": (v + w) / 2, "std": abs(v - w) / 2,
             "solved": [v >= 900, w >= 900]} for v, w in ((910.0, 850.0), (930.0, 910.0), (700.0, 890.0))]
    row = pooled(runs)
    assert row["seed_means"] == [880.0, 920.0, 795.0]
    assert row["mean"] == pytest.approx(865.0) and row["std"] == pytest.approx(52.122, abs=1e-3)
    assert row["values"] == [pytest.approx(846.6667, abs=1e-4), pytest.approx(883.3333, abs=1e-4)]
    assert row["solved_share"] == pytest.approx(3 / 6)  # every run's episodes: 910, 930, 910 of six
    assert "success_rate" not in row
    assert pooled([runs[0]])["mean"] == runs[0]["mean"] and pooled([runs[0], None]) is None


def test_the_table_shows_the_share_solved_the_success_rate_and_the_seeds_of_an_rl_row():
    rows = [Row("Expert demonstration", "expert", "demo", 0, 0, 0, 0.0223, 0.0001, success_rate=1.0),
            Row("Refined structure + RL, low (400 resets)", "refined", "RL", 1, 2, 440, 0.05, 0.01,
                success_rate=0.95, training_seeds=3, seed_means=[0.04, 0.05, 0.06])]
    door = Metric("min handle-to-target distance", "min_handle_to_target", False, "metres", unit="m", reduce="min")
    full = type(QUICK)()
    text = markdown(TASKS["door"], full, rows, {}, door, list(range(10000, 10100)), 60.0, "polc experiment door")
    assert "QUICK" not in text and "100 unseen evaluation seeds" in text
    assert "| Min handle-to-target distance (m), mean actions | Success rate, mean |\n" in text
    assert "| Expert demonstration | - | - | - | 0.0223 ± 0.0001 | 1.00 |\n" in text
    assert "| 0.0500 ± 0.0100 (3 seeds) | 0.95 |\n" in text
    assert "spread (std) of those means across seeds" in text and "Meta-World's `success`" in text
    assert full.seeds == 100 and full.rl_seeds == 3


@pytest.mark.parametrize("budget, updates", [(QUICK, 1), (type(QUICK)(), 3)])
def test_rl_curves_plot_one_update_as_a_point_and_several_seeds_as_a_band(tmp_path, budget, updates):
    for s in TASKS["car_racing"].structures:
        for k in range(budget.rl_seeds):
            log = [{"resets": 20 * (u + 1), "return_mean": 500.0 + 10 * u + k, "return_std": 30.0}
                   for u in range(updates)]
            (tmp_path / "rl" / s.key / f"seed{k}").mkdir(parents=True)
            (tmp_path / "rl" / s.key / f"seed{k}" / "log.json").write_text(json.dumps({"log": log}))
    path = plot_curves(tmp_path / "c.png", TASKS["car_racing"], budget, tmp_path, {"resets": 2})
    assert Path(path).read_bytes().startswith(PNG)
    resets, mean, lo, hi, band = curve([json.loads((tmp_path / "rl" / "mlp" / f"seed{k}" / "log.json").read_text())
                                        ["log"] for k in range(budget.rl_seeds)])
    assert resets == [20 * (u + 1) for u in range(updates)]
    if budget.rl_seeds == 1:
        assert (lo[0], hi[0]) == (470.0, 530.0) and band == "± std of the update's episodes"
    else:
        assert mean[0] == 501.0 and (lo[0], hi[0]) == (500.0, 502.0) and band == "range over 3 seeds"


def test_skip_rl_keeps_the_expert_and_il_rows_and_says_so(tmp_path):
    exp = Experiment(TASKS["car_racing"], QUICK, str(tmp_path), say=lambda s: None, skip_rl=True)
    assert exp.rl is False and Experiment(TASKS["car_racing"], QUICK, str(tmp_path), say=lambda s: None).rl
    rows = [Row("Expert demonstration", "expert", "demo", 0, 0, 0, 918.8, 2.0, solved_share=1.0)]
    text = markdown(TASKS["car_racing"], QUICK, rows, {}, RETURN, [10000], 1.0, "c", 900.0, rl_skipped=True)
    assert "RL rows skipped (`--skip-rl`)" in text and "| 918.8 ± 2.0 | 1.00 |" in text


@pytest.mark.slow
def test_the_quick_experiment_has_a_page(quick_run, browser, tmp_path):
    """`polc report` on the quick experiment (issue 16): offline, no console error, Table 1
    as measured and marked quick, its figures rendered."""
    out = tmp_path / "quick.html"
    assert report(quick_run, "-o", out) == 0
    browser.open(out)
    assert browser.problems() == ([], [])
    text = browser.js("document.body.innerText")
    assert "QUICK" in text.upper()
    results = json.loads((quick_run / "results.json").read_text())
    for r in results["rows"]:
        assert r["method"] in text and f"{r['mean']:.1f}" in text
    assert browser.js("document.querySelectorAll('img.figure').length") >= 1


def test_the_il_rows_keep_the_better_weights_as_polc_fit_does():
    """`Experiment._keep_better`: polc fit's closed-loop check on training seeds outside the
    demonstration's (seed 0 here), and its choice."""
    import types

    import jax

    import polc
    from polc.runtime.envs import toy
    from polc.runtime.experiment.plan import QUICK
    from polc.runtime.experiment.run import Experiment

    runner = types.SimpleNamespace(budget=QUICK, spec=toy.SPEC)
    policy = polc.loads(toy.reach_policy(), "reach.pol", analyze=False).compile()
    declared = policy.init(jax.random.PRNGKey(0))
    demos = types.SimpleNamespace(metadata={"seeds": [0]})
    check, choice = Experiment._keep_better(runner, policy, {**declared, "kp": declared["kp"] * 0 - 5.0}, demos)
    assert check.seeds == (1, 2) and check.worse and choice.kept == "declared"
    assert choice.reason.startswith("fitting made the policy worse in closed loop (return ")
    assert Experiment._keep_better(runner, policy, declared, demos)[1].kept == "fitted"
    off = types.SimpleNamespace(budget=dataclasses.replace(QUICK, il_check=0), spec=toy.SPEC)
    assert Experiment._keep_better(off, policy, declared, demos) == (None, ("fitted", "no closed-loop check ran, so the fit is kept"))


def test_an_il_row_says_which_weights_were_kept_and_why():
    from polc.runtime.experiment.run import _kept

    fit = {"fit": {"keep": {"kept": "declared", "reason": "fitting made the policy worse in closed loop (...)"}}}
    assert _kept(fit, {}, False) == "the declared weights: fitting made the policy worse in closed loop (...)"
    refinement = {"rounds": [{"keep": None}, {"keep": {"kept": "fitted", "reason": "the fit is no worse"}}]}
    assert _kept({"params": "x"}, refinement, True) == "the fitted weights: the fit is no worse"
    assert _kept({"params": "x"}, {}, False) == "" and _kept({}, {"rounds": [{}]}, True) == ""
    rows = [Row("Initial structure + IL", "initial", "IL", 1, 0, 0, 873.8, 116.2, note="the fitted weights: ok")]
    text = markdown(TASKS["car_racing"], QUICK, rows, {}, RETURN, [10000], 1.0, "c", 900.0, rl_skipped=True)
    assert "IL (the weights kept: `polc fit`'s choice between declared and fitted on training seeds):\n" \
           "- Initial structure + IL: the fitted weights: ok" in text

"""--recovery in the refinement loop: DART recovery laps recorded once into the run directory,
each round fitted with and without them, the better on the training seeds kept and recorded
(the toy point-mass task, whose PD expert records them in milliseconds)."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from refine_helpers import fits_once, task  # noqa: F401  (module fixtures)
from refine_helpers import ANALYSIS, FAST, STOP, run_loop

from polc.runtime.cli import UsageError
from polc.runtime.io.table import read_table
from polc.runtime.refine.work import Settings

ONE = replace(FAST, rounds=1)


@pytest.fixture(scope="module")
def recovered(task, tmp_path_factory):
    """One round of the toy task with --recovery push=0.5 and rollouts cut at 30 steps (as
    --quick cuts them): (loop, model, run directory)."""
    run = tmp_path_factory.mktemp("recovery") / "run"
    loop, model = run_loop(task, run, [ANALYSIS, STOP], settings=replace(ONE, recovery="push=0.5", max_steps=30))
    return loop, model, run


@pytest.mark.slow  # a loop round with two fits: left to the full suite
def test_the_recovery_laps_are_recorded_in_the_run_and_both_fits_scored(recovered, task):
    loop, model, run = recovered
    laps = read_table(str(run / "recovery.parquet"))
    demo = read_table(str(task / "demo.parquet"))
    assert laps.metadata["seeds"] == demo.metadata["seeds"]  # the clean lap's own tracks: no new seeds used
    assert laps.metadata["perturb"] == {"sigma": {"push": 0.5}, "noise_seed": 0}
    assert "executed.push" in laps.names()
    # whole episodes, as the demonstration: the rollouts' shorter limit does not cut the laps
    assert laps.metadata["env"]["max_steps"] == demo.metadata["env"]["max_steps"] == 50
    (m0,) = loop.history
    rec = m0.recovery
    assert rec["demos"] == ["recovery.parquet"] and rec["perturb"] == "push=0.5" and rec["seeds"] == m0.rollout_seeds
    assert rec["kept"] in ("clean", "with_recovery") and rec["episodes"] == 2 * len(m0.rollout_seeds)
    better = max if loop.metric.higher_is_better else min
    assert rec[rec["kept"]] == better(rec["clean"], rec["with_recovery"])
    # the two fits' episodes are resets too (keep-better's declared weights: 2 per seed)
    assert m0.resets == 2 * len(m0.rollout_seeds) + rec["episodes"]
    saved = json.loads((run / "round_00" / "metrics.json").read_text())
    assert saved["recovery"] == rec
    params = json.loads((run / "round_00" / "params.json").read_text())
    assert params["fit"]["recovery"] == rec
    # the model is told what the weights were fitted to, and how the other fit scored
    prompt = model.prompts[0][-1].text
    assert "recovery laps (the expert's actions perturbed, `polc demos --perturb push=0.5`)" in prompt
    assert f"{rec['with_recovery']:.4g}" in prompt and f"{rec['clean']:.4g}" in prompt


@pytest.mark.slow
def test_a_resumed_run_reuses_the_recording(recovered, task):
    from polc.runtime.envs import get
    from polc.runtime.il.recovery import Recovery, record_recovery

    loop, _, run = recovered
    path = run / "recovery.parquet"
    before = os.stat(path).st_mtime_ns
    seeds = read_table(str(path)).metadata["seeds"]
    assert record_recovery(get("toy_reach"), Recovery("push=0.5"), seeds, str(path)) == str(path)
    assert os.stat(path).st_mtime_ns == before
    # another noise is another recording
    record_recovery(get("toy_reach"), Recovery("push=0.2"), seeds, str(path))
    assert read_table(str(path)).metadata["perturb"]["sigma"] == {"push": 0.2}


def test_without_recovery_the_prompt_and_run_json_are_as_before(task, tmp_path):
    loop, model = run_loop(task, tmp_path / "run", [ANALYSIS, STOP], settings=ONE)
    assert loop.history[0].recovery is None and not (tmp_path / "run" / "recovery.parquet").exists()
    assert "Fitted to the demonstration (" in model.prompts[0][-1].text
    assert "recovery" not in model.prompts[0][-1].text
    assert "recovery" not in Settings().to_json() and "expert" not in Settings().to_json()
    assert Settings.from_json(Settings(recovery="push=0.3").to_json()).recovery == "push=0.3"


def test_a_recovery_naming_no_action_is_refused_before_the_run_starts(task, tmp_path):
    from polc.runtime.refine.entry import Request, start

    with pytest.raises(UsageError, match=r"--recovery steer=0.3: --perturb takes SIGMA or NAME=SIGMA,...; 'steer' "
                                         r"is not an action of the environment \(its actions: push\)"):
        start(Request(str(task), replace(ONE, recovery="steer=0.3"), output=str(tmp_path / "run")))
    assert not (tmp_path / "run").exists()
    with pytest.raises(UsageError, match="--expert records recovery laps: give --recovery too"):
        start(Request(str(task), replace(ONE, expert="x.py:f"), output=str(tmp_path / "run")))

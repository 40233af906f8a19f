"""The refinement loop on bad news: a revision whose actions are NaN in the rollout, a
demonstration outside the structure's declared ranges (or partial, or damaged), and runs
that end because the model's replies could not be used (exit 4, not 0)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refine_helpers import fits_once, task  # noqa: F401  (module fixtures)
from refine_helpers import ANALYSIS, FAST, GOOD, STOP, FakeUI, pol, revise, run_loop

from polc.runtime.envs import toy
from polc.runtime.io.table import TableWriter, read_table
from polc.runtime.refine.rundir import RunDir


def nan_near(target: float, demo_targets: np.ndarray) -> str:
    """A structure that checks (with warnings) and fits, whose action is NaN exactly for
    targets in a small interval around `target` that holds no demonstration target."""
    eps = 0.5 * float(np.min(np.abs(demo_targets - target)))
    a, b = target - eps, target + eps
    return GOOD.replace('policy reach2 "', 'policy nanny "').replace(
        'obs vel : real in [-3, 3]   "velocity"\n',
        'obs vel : real in [-3, 3]   "velocity"\nobs target : real in [-1, 1] "target position"\n').replace(
        'latent far', f'latent odd = sqrt((target - {a:.6f}) * (target - {b:.6f})) "NaN near one target"\n'
                      'latent far').replace("- kd * vel", "- kd * vel + 0 * odd")


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_revision_whose_action_is_nan_is_sent_back_and_nothing_is_lost(task, tmp_path):
    from polc.runtime.refine.work import rollout_seeds

    demo = read_table(str(task / "demo.parquet"))
    [seed] = rollout_seeds(toy.SPEC, demo.metadata["seeds"], 1)
    env = toy.PointMass()
    env.reset(seed=seed)
    nanny = nan_near(env.target, np.unique(demo.column("obs.target")))
    loop, model = run_loop(task, tmp_path / "run", [ANALYSIS, revise(nanny), pol(GOOD), ANALYSIS, STOP])
    m1 = loop.history[1]
    assert m1.regenerations == 1 and m1.policy_name == "reach2" and m1.move["kind"] == "STOP"
    prompt = model.prompts[2][-1].text
    assert "# The fitted structure acts with a non-finite value" in prompt
    assert 'the policy\'s action "push" is NaN at step 0' in prompt and "policy nanny" in prompt
    d = RunDir(tmp_path / "run").round_dir(1)
    assert (d / "nonfinite-1.pol").read_text() == nanny
    assert 'action "push" is NaN' in (d / "nonfinite-1.txt").read_text()
    assert (d / "nonfinite-1.params.json").is_file() and (d / "policy.pol").read_text() == GOOD
    assert (d / "trace.parquet").is_file() and m1.eval is not None


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_nan_actions_that_never_go_away_end_the_run_as_unusable(task, tmp_path):
    from dataclasses import replace

    from polc.runtime.refine.work import rollout_seeds

    demo = read_table(str(task / "demo.parquet"))
    [seed] = rollout_seeds(toy.SPEC, demo.metadata["seeds"], 1)
    env = toy.PointMass()
    env.reset(seed=seed)
    nanny = nan_near(env.target, np.unique(demo.column("obs.target")))
    loop, _ = run_loop(task, tmp_path / "run", [ANALYSIS, revise(nanny), pol(nanny)],
                       settings=replace(FAST, max_regenerations=1))
    last = loop.history[-1]
    assert "could not be rolled out with finite actions after 1 regenerations" in last.end
    assert last.unusable_replies and last.eval is None


def partial_copy(demo_path, into):
    """`demo_path` rewritten as the .partial.parquet an interrupted run leaves (its first 2 episodes)."""
    table = read_table(str(demo_path))
    w = TableWriter(str(into / "demo.parquet"), list(table.columns.values()), table.metadata)
    episode = table.column("episode")
    for e in np.unique(episode)[:2]:
        rows = episode == e
        w.write_episode({name: table.column(name)[rows] for name in table.columns})
    return w.abort()


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_the_model_is_shown_where_the_demonstration_leaves_the_declared_ranges(task, tmp_path):
    from dataclasses import replace

    narrow = tmp_path / "narrow"
    narrow.mkdir()
    partial = partial_copy(task / "demo.parquet", narrow)
    (narrow / "task.md").write_text("---\nenv: toy_reach\ndemo: demo.partial.parquet\n---\nReach the target.\n")
    (narrow / "initial.pol").write_text(toy.reach_policy(kp=0.3, kd=0.1, std=0.3).replace(
        'obs vel : real in [-3, 3]', 'obs vel : real in [-0.1, 0.1]'))
    ui = FakeUI()
    loop, model = run_loop(narrow, tmp_path / "run", [ANALYSIS, STOP], settings=replace(FAST, rounds=1), ui=ui)
    first = model.prompts[0][1].text
    assert "The demonstration leaves the ranges the program declares in 1 column(s)" in first
    assert "  - obs.vel: " in first and "outside [-0.1, 0.1], by up to" in first
    assert any(n.startswith(f"'{partial}' is a partial table") for n in ui.notices), ui.notices
    [outside] = loop.history[0].demo_outside_ranges
    assert outside["column"] == "obs.vel" and outside["rows"] > 0 and outside["by"] > 0
    plain = render_first_prompt(task, tmp_path / "plain")
    assert "leaves the ranges" not in plain  # the demonstration within the declared ranges: nothing said


def render_first_prompt(task_dir, run_path) -> str:
    from dataclasses import replace

    _, model = run_loop(task_dir, run_path, [ANALYSIS, STOP], settings=replace(FAST, rounds=1))
    return model.prompts[0][1].text


def test_a_damaged_demonstration_is_a_task_error(task, tmp_path):
    from test_table import flip_inside_a_data_page

    from polc.runtime.refine.loop import Loop
    from polc.runtime.task import TaskError, load_task
    from polc.runtime.refine.scripted import Choice

    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in ("task.md", "initial.pol", "demo.parquet"):
        (damaged / name).write_bytes((task / name).read_bytes())
    flip_inside_a_data_page(damaged / "demo.parquet", "obs.gap.list.element")
    run = RunDir.create(tmp_path / "run", {})
    with pytest.raises(TaskError, match=r"the task's demonstration cannot be used: .*demo.parquet' is damaged"):
        Loop(run, load_task(str(damaged)), FAST, Choice("fake:model", "fake"), FakeUI(), backend=object())


# ---- exit codes ----


def manual(tmp_path, *replies):
    d = tmp_path / "manual"
    (d / "replies").mkdir(parents=True)
    for i, text in enumerate(replies):
        (d / "replies" / f"{i:03d}.md").write_text(text)
    return d


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_refine_ending_on_unusable_replies_exits_4(task, tmp_path, capsys):
    from polc.cli import main

    session = manual(tmp_path, *["I would rather not."] * 4)  # the request and its 3 retries
    run = tmp_path / "run"
    code = main(["refine", str(task), "-o", str(run), "--llm", f"manual:{session}", "--quick", "-q"])
    out, err = capsys.readouterr()
    assert code == 4, err
    assert "no usable reply for analysis code in 4 tries" in err and "exit 4" in err
    assert "run ended: the model gave no usable reply" in out and (run / "summary.json").is_file()
    assert main(["refine", "--resume", str(run), "-q"]) == 4  # a finished run says the same again
    capsys.readouterr()


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_refine_ending_normally_exits_0(task, tmp_path, capsys):
    from polc.cli import main

    session = manual(tmp_path, ANALYSIS, STOP)
    code = main(["refine", str(task), "-o", str(tmp_path / "run"), "--llm", f"manual:{session}", "--quick", "-q"])
    out, err = capsys.readouterr()
    assert code == 0 and "run ended: the model chose STOP" in out, err
    final = tmp_path / "run" / "round_00"  # STOP in round 0: its structure is the run's result
    which = json.loads((final / "metrics.json").read_text())["keep"]["kept"]  # keep=best's choice
    assert f"final policy: {final / 'policy.pol'} with its {which} weights {final / 'params.json'}" in out, out
    prompt = (final / "conversation.md").read_text()  # what the model was told of the weights it saw run
    if which == "declared":  # never "Fitted weights ... (unmoved)" for weights the fit did not give
        assert "This round runs the declared weights, not the fitted ones: " in prompt and "Fitted weights, each" not in prompt
    else:
        assert "Fitted weights, each with its declared value where the fit moved it" in prompt


@pytest.mark.slow  # two short refine runs (the pause, then --resume)
def test_a_manual_pause_is_reported_as_a_pause_not_an_unfinished_attempt(task, tmp_path, capsys):
    from polc.cli import main
    from polc.runtime.report.run import run_page

    session = manual(tmp_path, ANALYSIS)  # request 2 (the move) has no reply yet: the run pauses
    run = tmp_path / "run"
    assert main(["refine", str(task), "-o", str(run), "--llm", f"manual:{session}", "--quick", "-q"]) != 0
    assert "Request 2 is waiting for a reply" in (run / "round_00" / "waiting").read_text()
    (session / "replies" / "001.md").write_text(STOP)
    assert main(["refine", "--resume", str(run), "-q"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    (run / "round_07.interrupted-1").mkdir()  # as a crash leaves one (no `waiting` file)
    page = run_page(run)
    assert ("Pauses for a hand-written reply (a <code>manual:</code> session; each round ran again on "
            "<code>--resume</code>): round_00.interrupted-1.") in page
    assert "Unfinished attempts kept aside (a round stopped by an error or an interruption; it ran again " \
           "on <code>--resume</code>): round_07.interrupted-1." in page


def test_generate_ending_on_unusable_replies_exits_4(task, tmp_path, capsys):
    from polc.cli import main

    session = manual(tmp_path, *["Here is no program."] * 4)
    out_file = tmp_path / "gen.pol"
    code = main(["generate", str(task / "task.md"), "-o", str(out_file), "--llm", f"manual:{session}"])
    err = capsys.readouterr().err
    assert code == 4 and "no usable reply for generate in 4 tries" in err, err
    assert not out_file.exists()
    assert main(["generate", str(task / "task.md"), "-o", str(out_file), "--llm-timeout", "0",
                 "--llm", f"manual:{session}"]) == 2
    assert "must be a positive number of seconds" in capsys.readouterr().err


def test_a_demonstration_with_non_finite_values_is_a_task_error(task, tmp_path):
    from polc.runtime.refine.loop import Loop
    from polc.runtime.task import TaskError, load_task
    from polc.runtime.refine.scripted import Choice

    table = read_table(str(task / "demo.parquet"))
    bad = tmp_path / "nan"
    bad.mkdir()
    for name in ("task.md", "initial.pol"):
        (bad / name).write_bytes((task / name).read_bytes())
    w = TableWriter(str(bad / "demo.parquet"), list(table.columns.values()), table.metadata)
    episode = table.column("episode")
    for e in np.unique(episode):
        data = {name: table.column(name)[episode == e].copy() for name in table.columns}
        data["obs.vel"][3] = np.nan
        w.write_episode(data)
    w.close()
    with pytest.raises(TaskError, match=r"holds non-finite values: obs.vel in 3 of 150 rows; record it again"):
        Loop(RunDir.create(tmp_path / "run", {}), load_task(str(bad)), FAST, Choice("fake:model", "fake"), FakeUI(),
             backend=object())

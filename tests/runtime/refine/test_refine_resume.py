"""Resuming a run: a crash in any phase of a round loses that round only, and a run killed
with SIGKILL in a real process continues from its last complete round."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from refine_helpers import fits_once, task  # noqa: F401  (module fixtures)
from refine_helpers import (ANALYSIS, BROKEN, GOOD, STOP, Crash, FakeUI, pol, revise,
                            run_loop)

from polc.runtime.llm import read_exchanges
from polc.runtime.refine.rundir import RunDir
from polc.runtime.io.table import read_table

# Round 0 revises with a repair, round 1 stops: every phase of a round appears in round 0.
ANSWERS = [ANALYSIS, revise(BROKEN), pol(GOOD), ANALYSIS, STOP]
PHASES = ["fitting", "rollout", "evaluating", "built-in diagnostics", "LLM: writing analysis code",
          "sandbox", "LLM: choosing a move", "checking the revision"]


@pytest.fixture(scope="module")
def reference(task, tmp_path_factory):
    loop, _ = run_loop(task, tmp_path_factory.mktemp("ref") / "run", ANSWERS)
    return loop.history


def essentials(history):
    return [(m.round, m.policy_name, m.move_kind, m.llm["calls"], m.llm["repairs"], m.resets,
             (m.eval or {}).get("returns")) for m in history]


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_crash_in_any_phase_loses_only_that_round(task, reference, tmp_path, phase):
    run_path = tmp_path / "run"
    with pytest.raises(Crash):
        run_loop(task, run_path, ANSWERS, ui=FakeUI(crash_at=phase, crash_round=0))
    run = RunDir.open(run_path)
    assert run.complete_rounds() == []
    # Resume: the fake model answers from the first request of the lost round again.
    loop, _ = run_loop(task, run_path, ANSWERS, resume=True)
    assert essentials(loop.history) == essentials(reference)
    assert (run_path / "round_00.interrupted-1").is_dir()
    records = [r for k in run.complete_rounds() for r in read_exchanges(run.round_dir(k))]
    assert [r["index"] for r in records] == list(range(len(ANSWERS)))
    assert not list(run_path.glob("round_0?/**/.*.tmp"))


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_crash_in_a_later_round_keeps_the_earlier_ones(task, reference, tmp_path):
    run_path = tmp_path / "run"
    with pytest.raises(Crash):
        run_loop(task, run_path, ANSWERS, ui=FakeUI(crash_at="sandbox", crash_round=1))
    run = RunDir.open(run_path)
    assert run.complete_rounds() == [0]
    before = (run.round_dir(0) / "metrics.json").read_text()
    loop, model = run_loop(task, run_path, ANSWERS[3:], resume=True)
    assert essentials(loop.history) == essentials(reference)
    assert (run.round_dir(0) / "metrics.json").read_text() == before  # never redone
    assert len(model.prompts) == 2


KILLED_RUN = textwrap.dedent("""
    import sys
    from polc.runtime.envs import toy
    from polc.runtime.refine.loop import Loop
    from polc.runtime.task import load_task
    from polc.runtime.refine.rundir import RunDir
    from polc.runtime.refine.scripted import Choice
    sys.path.insert(0, sys.argv[3])
    from refine_helpers import FAST, FakeUI

    toy.register()
    task, run_path, replies = sys.argv[1], sys.argv[2], sys.argv[4]
    run = RunDir.open(run_path) if (RunDir(run_path).path / "run.json").exists() else RunDir.create(run_path, {})
    Loop(run, load_task(task), FAST, Choice("manual:" + replies, "manual", replies), FakeUI()).run()
""")


@pytest.mark.slow
def test_kill_9_mid_round_then_resume(task, reference, tmp_path):
    replies = tmp_path / "session" / "replies"
    replies.mkdir(parents=True)
    for i, text in enumerate(ANSWERS):
        (replies / f"{i:03d}.md").write_text(text)
    run_path = tmp_path / "run"
    args = [sys.executable, "-c", KILLED_RUN, str(task), str(run_path), str(Path(__file__).resolve().parents[2]),
            str(tmp_path / "session")]
    # stderr to a file, not a pipe: nobody reads a pipe while the run goes on, and a child that
    # writes more than the pipe holds (JAX's warnings, a long traceback) would block on it.
    err = tmp_path / "stderr.log"
    with err.open("wb") as stderr:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr)
    marker = run_path / "round_01" / "params.json"  # round 1 has begun: round 0 is complete
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, err.read_text(errors="replace")[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    run = RunDir.open(run_path)
    assert run.complete_rounds() == [0]
    for path in run.round_dir(0).iterdir():  # everything of the complete round is whole
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".parquet":
            assert read_table(str(path)).complete
    loop, _ = run_loop(task, run_path, ANSWERS[3:], resume=True)
    assert essentials(loop.history) == essentials(reference)
    assert (run_path / "round_01.interrupted-1").is_dir()

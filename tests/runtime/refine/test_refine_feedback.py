"""The feedback modes of the paper's ablation: what each shows the model, and the token
accounting that makes them comparable (a fake model that counts characters / 4)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from refine_helpers import fits_once, task  # noqa: F401  (module fixtures)
from refine_helpers import ANALYSIS, FAST, STOP, revise, run_loop, tokens

from polc.runtime.llm import render
from polc.runtime.refine.context import table_csv
from polc.runtime.refine.rundir import RunDir
from polc.runtime.io.table import read_table


@pytest.fixture(scope="module")
def runs(task, tmp_path_factory):
    """One two-round run per mode: REVISE, then STOP."""
    out = {}
    for mode, answers in (("analysis", [ANALYSIS, revise(), ANALYSIS, STOP]), ("table", [revise(), STOP]),
                          ("none", [revise(), STOP])):
        path = tmp_path_factory.mktemp(mode) / "run"
        loop, model = run_loop(task, path, answers, settings=replace(FAST, feedback=mode))
        out[mode] = (loop, model, path)
    return out


@pytest.mark.parametrize("mode", ["analysis", "table", "none"])
@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_every_token_the_model_was_sent_is_counted(runs, mode):
    loop, model, _ = runs[mode]
    assert sum(m.llm["input_tokens"] for m in loop.history) == sum(tokens(render(p)) for p in model.prompts)
    assert sum(m.llm["calls"] for m in loop.history) == len(model.prompts)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_table_mode_sends_the_whole_trace_as_csv(runs):
    loop, model, path = runs["table"]
    prompt = model.prompts[0][-1].text
    csv = table_csv(read_table(str(RunDir(path).round_dir(0) / "trace.parquet")))
    assert f"```csv\n{csv}\n```" in prompt
    assert csv.splitlines()[0].startswith("episode,step,seed,obs.pos,obs.vel,obs.target,obs.gap[0],obs.gap[1],"
                                          "obs.grid[0,0],obs.grid[0,1]")
    assert len(csv.splitlines()) == 51  # header + 50 steps
    assert "Built-in diagnostics" in prompt and "MOVE: TEST" not in prompt
    assert len(model.prompts) == 2  # one call per round: the move


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_analysis_mode_never_sends_the_table(runs):
    loop, model, path = runs["analysis"]
    csv = table_csv(read_table(str(RunDir(path).round_dir(0) / "trace.parquet")))
    sent = "".join(render(p) for p in model.prompts)
    assert "```csv" not in sent and csv.splitlines()[5] not in sent
    assert "- obs.grid : real[2, 2]" in sent  # the schema instead


def test_none_mode_gives_no_execution_feedback(runs):
    loop, model, _ = runs["none"]
    sent = "".join(render(p) for p in model.prompts)
    assert "# Rollout" not in sent and "Built-in diagnostics" not in sent and "return" not in sent.lower()
    assert "Earlier rounds of this run:\n- Round 0: structure \"reach\"; your move: REVISE" in sent
    # No trace reaches the model (above); the episodes counted are keep=best's closed-loop choice
    # between the fitted and the declared weights, one of each per training seed.
    assert [m.resets for m in loop.history] == [2, 2]
    assert all(m.keep["kept"] in ("fitted", "declared") for m in loop.history)


def test_the_table_costs_what_it_weighs(runs):
    (table, _, path), (none, _, _) = runs["table"], runs["none"]
    csv = table_csv(read_table(str(RunDir(path).round_dir(0) / "trace.parquet")))
    first = lambda loop: loop.history[0].llm["input_tokens"]  # noqa: E731
    assert first(table) - first(none) >= tokens(csv)
    assert [m.resets for m in table.history] == [2, 2]  # the traced seed, and it with the declared weights


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_task_without_an_instance_header_names_its_episodes_seeds(runs):
    """The toy task's task.md has no `instance:` line: no Car Racing word ("track") in its prompts."""
    loop, model, _ = runs["analysis"]
    sent = "".join(render(p) for p in model.prompts)
    assert "episode(s) on training seed(s) " in sent and "on the training seed(s)" in sent
    assert "track" not in sent.lower()

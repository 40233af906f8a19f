"""The run directory: atomic files, done markers, unfinished rounds moved aside, and the
templates and table that a run writes."""

from __future__ import annotations

import json
import os

import pytest

from polc.runtime.refine import templates
from polc.runtime.refine.report import table_text
from polc.runtime.refine.rundir import RunDir, RunDirError, write_atomic


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "metrics.json"
    write_atomic(target, "old")

    def crash(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["metrics.json"]


def test_rounds_count_only_with_their_done_marker(tmp_path):
    run = RunDir.create(tmp_path / "run", {"task": "t"})
    assert json.loads((tmp_path / "run" / "run.json").read_text())["format"] == "polc-refine-run/1"
    for k in range(2):
        run.begin_round(k)
        run.finish_round(k, {"round": k})
    run.begin_round(2)
    (run.round_dir(2) / "policy.pol").write_text("half a round")
    assert run.complete_rounds() == [0, 1]
    run.begin_round(2)  # a second attempt moves the first aside
    assert (tmp_path / "run" / "round_02.interrupted-1" / "policy.pol").is_file()
    assert list(run.round_dir(2).iterdir()) == []
    with pytest.raises(RunDirError, match="round 1 of .* is already complete"):
        run.begin_round(1)


def test_a_run_directory_is_never_reused_by_accident(tmp_path):
    RunDir.create(tmp_path / "run", {})
    with pytest.raises(RunDirError, match="already holds a run; continue it with --resume"):
        RunDir.create(tmp_path / "run", {})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("")
    with pytest.raises(RunDirError, match="exists and is not empty"):
        RunDir.create(tmp_path / "other", {})
    with pytest.raises(RunDirError, match="has no run.json"):
        RunDir.open(tmp_path / "other")


def test_every_template_renders_with_exactly_its_values():
    assert templates.placeholders("repair") == {"attempt", "max_repairs", "diagnostics"}
    text = templates.render("repair", attempt=1, max_repairs=5, diagnostics="E0101 {not a placeholder}")
    assert "repair 1 of at most 5" in text and "{not a placeholder}" in text
    with pytest.raises(templates.TemplateError, match=r"missing values \['diagnostics'\]"):
        templates.render("repair", attempt=1, max_repairs=5)
    with pytest.raises(templates.TemplateError, match=r"unused values \['extra'\]"):
        templates.render("repair", attempt=1, max_repairs=5, diagnostics="", extra=1)


def test_the_table_has_a_row_per_round_and_totals():
    def m(k, calls, ret):
        return {"round": k, "policy_name": "p", "structure_sha256": "abcdef123", "seconds": 61.0, "resets": 2,
                "llm": {"calls": calls, "input_tokens": 1000 * calls, "output_tokens": 100}, "move": {"kind": "REVISE"},
                "eval": {"mean": ret, "std": 1.5, "seeds": [1, 2], "returns": [ret - 1.5, ret + 1.5]}}

    lines = table_text([m(0, 2, 200.0), m(1, 4, 900.25)]).splitlines()
    assert lines[0].split()[:3] == ["round", "structure", "return"]
    assert "p abcdef" in lines[2] and "200.0 ± 1.5" in lines[2] and "4,000" in lines[3]
    assert lines[-1].split() == ["total", "6", "6,000", "200", "4", "2:02"]


def test_a_damaged_run_directory_is_a_clear_error_on_resume(tmp_path, capsys):
    import re

    from polc.cli import main
    from polc.runtime.refine.rundir import RunDir, RunDirError
    from polc.runtime.refine.work import Settings

    run = tmp_path / "run"
    RunDir.create(run, {"task": "t", "env": "toy_reach", "llm": "manual:x", "llm_kind": "manual",
                        "settings": Settings().to_json()})
    good = (run / "run.json").read_text()
    cases = [("{not json", r"run.json is damaged \(not valid JSON\)"),
             ("[" * 100_000 + "]" * 100_000, r"run.json is damaged \(nested too deeply\)"),
             (json.dumps({**json.loads(good), "settings": "fast"}), "lacks a usable settings"),
             (json.dumps({**json.loads(good), "settings": {"rounds": "6"}}),
              'the settings in .* cannot be used \\(setting rounds is "6", not an integer\\)')]
    for text, message in cases:
        (run / "run.json").write_text(text)
        assert main(["refine", "--resume", str(run)]) == 2
        err = capsys.readouterr().err
        assert re.search(message, err) and "Traceback" not in err, err
    (run / "run.json").write_text(good)
    d = run / "round_00"
    d.mkdir()
    (d / "metrics.json").write_text('{"round": 0}')
    (d / "done").write_text("x")
    with pytest.raises(RunDirError, match=r"metrics.json is not the metrics of a complete round .*remove"):
        RunDir.open(run).metrics(0)


def _runs(root, *names):
    for n in names:
        (root / n).mkdir(parents=True)
        (root / n / "run.json").write_text("{}")


def test_a_missing_run_directory_lists_the_nearest_existing_ones(tmp_path, monkeypatch, capsys):
    """Run directories carry their start time: `polc report runs/car_racing` names the runs there."""
    from polc.cli import main

    _runs(tmp_path / "runs", "car_racing-2026-12-06T10-00-00", "car_racing-2026-12-06T11-30-00", "door-2026-12-05T09-00-00")
    (tmp_path / "runs" / "notes").mkdir()  # not a run
    monkeypatch.chdir(tmp_path)
    assert main(["report", "runs/car_racing", "-o", "out.html"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("polc: cannot read 'runs/car_racing': no such file or directory; the nearest run "
                           "directories: runs/car_racing-2026-12-06T11-30-00, runs/car_racing-2026-12-06T10-00-00.")
    assert main(["refine", "--resume", "runs/dor"]) == 2
    assert "polc: cannot read 'runs/dor': no such run directory; the nearest run directories: " \
           "runs/door-2026-12-05T09-00-00." in capsys.readouterr().err
    (tmp_path / "results" / "car_racing-quick").mkdir(parents=True)
    (tmp_path / "results" / "car_racing-quick" / "experiment.json").write_text("{}")
    assert main(["experiment", "car_racing", "--quick", "--resume", "-o", "results/car_racing"]) == 2
    assert capsys.readouterr().err.strip().endswith("to start one there (the nearest run directories: "
                                                    "results/car_racing-quick).")
    # nothing alike: the newest runs there; no runs at all: just the error
    assert main(["report", "runs/zzz", "-o", "out.html"]) == 2
    assert "the nearest run directories: runs/door-2026-12-05T09-00-00, runs/car_racing-2026-12-06T11-30-00" in \
        capsys.readouterr().err
    assert main(["report", "elsewhere/car_racing", "-o", "out.html"]) == 2
    assert capsys.readouterr().err.strip() == "polc: cannot read 'elsewhere/car_racing': no such file or directory."


def test_a_finished_run_ends_with_the_next_commands_and_its_real_directory(tmp_path, monkeypatch):
    from polc.runtime.cli import polc_command
    from polc.runtime.refine.entry import next_steps

    run = tmp_path / "runs" / "reacher-2026-12-06T23-15-00"
    text = next_steps(run, [run / "returns.png", run / "latents.png"], run / "round_02", "gym:Reacher-v5")
    polc = polc_command()
    assert text.splitlines() == [
        "next:",
        f"  {polc} report {run} -o {run}/report.html   # one offline page: every round's source, diff, weights, "
        "analysis and plots",
        f"  the plots: {run}/returns.png, {run}/latents.png",
        f"  {polc} eval {run}/round_02/policy.pol --params {run}/round_02/params.json --env gym:Reacher-v5 "
        "--seeds 100   # the final structure on 100 unseen seeds"]
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "polc").write_text("#!/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", [str(venv / "polc"), "refine"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert polc_command() == ".venv/bin/polc"  # after `make demo`, polc is not on PATH

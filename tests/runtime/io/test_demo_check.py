"""Demonstrations vetted before a fit: partial tables, and data outside the program's declarations
(which rows, which columns, by how much), as warnings or, under strict, a refusal."""

from __future__ import annotations

import math

import numpy as np
import pytest

import polc
from polc.runtime.envs import toy
from polc.runtime.io.demo_check import DemoRejected, out_of_range, partial_note, range_report, vet_demo
from polc.runtime.io.table import ColumnSpec, TableError, TableWriter, read_table, step_columns

COLUMNS = step_columns((ColumnSpec("obs.gap", (2,)), ColumnSpec("obs.vel"), ColumnSpec("action.push")))
PROGRAM = polc.loads(toy.reach_policy(), "reach.pol", analyze=False).typed
N = 50


def episode(index: int, gap=None, vel=None, push=None) -> dict:
    rng = np.random.default_rng(index)
    return {"episode": np.full(N, index, np.int32), "step": np.arange(N, dtype=np.int32),
            "seed": np.full(N, index, np.int64),
            "obs.gap": gap if gap is not None else rng.uniform(-3, 3, (N, 2)).astype(np.float32),
            "obs.vel": vel if vel is not None else rng.uniform(-3, 3, N).astype(np.float32),
            "action.push": push if push is not None else rng.uniform(-1, 1, N).astype(np.float32),
            "reward": np.zeros(N, np.float32), "terminated": np.zeros(N, bool), "truncated": np.zeros(N, bool)}


def table_of(tmp_path, *episodes, name="demo.parquet", interrupt=False):
    path = tmp_path / name
    w = TableWriter(str(path), COLUMNS, {"kind": "demos"})
    for e in episodes:
        w.write_episode(e)
    return read_table(w.abort() if interrupt else w.close())


def test_a_demonstration_inside_its_declarations_gives_no_warning(tmp_path):
    bounds = episode(0, gap=np.full((N, 2), 3.0, np.float32), vel=np.full(N, -3.0, np.float32),
                     push=np.ones(N, np.float32))  # exactly on the bounds is inside
    assert vet_demo(table_of(tmp_path, episode(1), bounds), PROGRAM, strict=True) == []


def test_rows_outside_the_declared_ranges_are_counted_by_column_and_distance(tmp_path):
    vel = np.zeros(N, np.float32)
    vel[:7] = 3.5
    gap = np.zeros((N, 2), np.float32)
    gap[3, 1] = -4.25
    gap[4] = [5.0, 3.0]
    push = np.zeros(N, np.float32)
    push[10] = 1.5
    table = table_of(tmp_path, episode(0, gap=gap, vel=vel, push=push), episode(1))
    found = {f.column: f for f in out_of_range(table, PROGRAM)}
    assert list(found) == ["obs.gap", "obs.vel", "action.push"]
    assert found["obs.vel"][:4] == ("obs.vel", -3.0, 3.0, 7) and found["obs.vel"].by == pytest.approx(0.5)
    assert (found["obs.gap"].rows, found["obs.gap"].values, found["obs.gap"].by) == (2, 2, 2.0)
    assert (found["obs.gap"].low, found["action.push"].rows, found["action.push"].high) == (-4.25, 1, 1.5)
    text = range_report(list(found.values()), table.num_rows, "the demonstration")
    assert "obs.vel: 7 of 100 rows (7.0%) outside [-3, 3], by up to 0.5; values from" in text
    assert "obs.gap: 2 of 100 rows (2.0%) outside [-3, 3], by up to 2" in text
    assert "action.push: 1 of 100 rows (1.0%) outside [-1, 1], by up to 0.5" in text


def test_values_reaching_1e30_are_reported_even_in_an_open_range(tmp_path):
    src = toy.reach_policy().replace("obs vel : real in [-3, 3]", "obs vel : real")
    program = polc.loads(src, "reach.pol", analyze=False).typed
    vel = np.zeros(N, np.float32)
    vel[[2, 9]] = [1e30, -3e38]
    [f] = out_of_range(table_of(tmp_path, episode(0, vel=vel)), program)
    assert (f.column, f.rows, f.huge, f.by, f.lo, f.hi) == ("obs.vel", 2, 2, math.inf, -math.inf, math.inf)
    assert "obs.vel: 2 of 50 rows (4.0%) reach 1e30 in magnitude (2 value(s)); values from -3e+38 to 1e+30, " \
           "declared [-inf, inf]" in range_report([f], 50)


def test_non_finite_values_and_missing_columns_are_left_to_load_demos(tmp_path):
    vel = np.zeros(N, np.float32)
    vel[0] = np.nan
    assert out_of_range(table_of(tmp_path, episode(0, vel=vel)), PROGRAM) == []
    other = polc.loads(toy.reach_policy().replace("obs vel", "obs speed").replace("kd * vel", "kd * speed"),
                       "r.pol", analyze=False).typed
    assert out_of_range(table_of(tmp_path, episode(0), name="b.parquet"), other) == []


def test_partial_table_is_a_warning_and_refused_under_strict(tmp_path):
    table = table_of(tmp_path, episode(0), episode(1), interrupt=True)
    assert table.path.endswith("demo.partial.parquet")
    assert partial_note(table) == (f"'{table.path}' is a partial table: the run writing it was interrupted, and "
                                   f"it holds only the 2 episode(s) that finished (100 rows)")
    assert vet_demo(table, PROGRAM) == [partial_note(table)]
    with pytest.raises(DemoRejected, match=r"refused under --strict:\n.* is a partial table") as e:
        vet_demo(table, PROGRAM, strict=True)
    assert isinstance(e.value, TableError)


def test_strict_refuses_out_of_range_data_with_the_report(tmp_path):
    push = np.full(N, 2.0, np.float32)
    table = table_of(tmp_path, episode(0, push=push))
    [warning] = vet_demo(table, PROGRAM)
    assert warning.startswith(f"'{table.path}' leaves the ranges the program declares in 1 column(s)")
    with pytest.raises(DemoRejected, match=r"action.push: 50 of 50 rows \(100.0%\) outside \[-1, 1\], by up to 1"):
        vet_demo(table, PROGRAM, strict=True)


def test_non_finite_values_are_listed_by_column(tmp_path):
    from polc.runtime.io.demo_check import non_finite_columns

    vel = np.zeros(N, np.float32)
    vel[[1, 4]] = [np.nan, np.inf]
    gap = np.zeros((N, 2), np.float32)
    gap[7, 1] = -np.inf
    table = table_of(tmp_path, episode(0, vel=vel, gap=gap), episode(1))
    assert non_finite_columns(table) == [("obs.gap", 1), ("obs.vel", 2)]
    assert non_finite_columns(table_of(tmp_path, episode(2), name="ok.parquet")) == []


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_polc_fit_warns_about_a_partial_out_of_range_demo_and_refuses_it_under_strict(tmp_path, capsys):
    from polc.cli import main

    table = table_of(tmp_path, episode(0, push=np.full(N, 2.0, np.float32)), episode(1), interrupt=True)
    pol = tmp_path / "reach.pol"
    pol.write_text(toy.reach_policy())
    argv = ["fit", str(pol), "--demos", table.path, "--check-episodes", "0", "--epochs", "5", "-q"]
    assert main(argv + ["-o", str(tmp_path / "p.params")]) == 0
    err = capsys.readouterr().err
    assert "polc: warning: " in err and "is a partial table" in err and "action.push: 50 of 100 rows" in err
    assert main(argv + ["--strict", "-o", str(tmp_path / "strict.params")]) == 1
    err = capsys.readouterr().err
    assert "refused under --strict" in err and not (tmp_path / "strict.params").exists()

"""`polc plot`: lines against the step, scatters, stacked lines; column names,
element indices and helpful errors."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.image import imread

from polc.runtime.plot.figures import default_output, plot, resolve
from polc.runtime.io.table import ColumnSpec, TableError, TableWriter, read_table, step_columns

BODY = (ColumnSpec("obs.speed", (), "float32", "forward speed / 100", 0.0, 1.5),
        ColumnSpec("obs.wheel_speed", (4,), "float32", "wheel speeds", 0.0, 3.0),
        ColumnSpec("obs.tiles", (12, 4), "float32", "tiles ahead"),
        ColumnSpec("latent.slip", (), "float32", "rear-wheel slip"),
        ColumnSpec("mean.speed", (), "float32", "a column sharing a bare name with obs.speed"),
        ColumnSpec("action.gas", (), "float32", "throttle", 0.0, 1.0))


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("plot") / "trace.parquet")
    rng = np.random.default_rng(0)
    with TableWriter(path, step_columns(BODY), {}) as w:
        for e, n in enumerate((30, 20)):
            w.write_episode({"episode": np.full(n, e, np.int32), "step": np.arange(n, dtype=np.int32),
                             "seed": np.full(n, e, np.int64), "obs.speed": rng.uniform(0, 1, n).astype(np.float32),
                             "obs.wheel_speed": rng.uniform(0, 1, (n, 4)).astype(np.float32),
                             "obs.tiles": rng.normal(size=(n, 12, 4)).astype(np.float32),
                             "latent.slip": rng.uniform(0, 0.2, n).astype(np.float32),
                             "mean.speed": rng.uniform(0, 1, n).astype(np.float32),
                             "action.gas": rng.uniform(0, 1, n).astype(np.float32),
                             "reward": np.zeros(n, np.float32), "terminated": np.zeros(n, bool),
                             "truncated": np.arange(n) == n - 1})
    return read_table(path)


def png(path) -> np.ndarray:
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    return imread(path)


@pytest.mark.parametrize("columns, lines", [(["latent.slip"], False), (["slip", "action.gas"], False),
                                            (["obs.speed", "obs.wheel_speed", "obs.tiles[3, 0]"], False),
                                            (["slip", "action.gas"], True)])
def test_plots_are_written_as_png(table, tmp_path, columns, lines):
    out = tmp_path / "p.png"
    assert plot(table, columns, str(out), lines=lines) == str(out)
    image = png(out)
    assert image.shape[0] > 200 and image.shape[1] > 200
    assert [p.name for p in tmp_path.iterdir()] == ["p.png"]  # no temporary file left


def test_stacked_plot_grows_with_the_number_of_columns(table, tmp_path):
    plot(table, ["slip"], str(tmp_path / "one.png"))
    plot(table, ["slip", "action.gas", "obs.speed"], str(tmp_path / "three.png"))
    assert png(tmp_path / "three.png").shape[0] > png(tmp_path / "one.png").shape[0]


def test_column_references(table):
    assert resolve(table, "slip").label == "latent.slip"
    s = resolve(table, "obs.wheel_speed[2]")
    assert s.label == "obs.wheel_speed[2]" and np.array_equal(s.values, table.column("obs.wheel_speed")[:, 2])
    assert resolve(table, "obs.tiles[1, 3]").values.shape == (50,)
    assert resolve(table, "obs.wheel_speed").values.shape == (50, 4)
    assert (resolve(table, "obs.speed").lo, resolve(table, "obs.speed").hi) == (0.0, 1.5)


@pytest.mark.parametrize("ref, message", [
    ("speed", r'"speed" is ambiguous: obs.speed, mean.speed'),
    ("latent.slp", r'has no column "latent.slp". Did you mean latent.slip\?'),
    ("obs.tiles", r"has 48 elements .* pick one, e.g. obs.tiles\[0, 0\]"),
    ("obs.tiles[12, 0]", r"has shape \[12, 4\]; index it with 2 numbers below \[12, 4\]"),
    ("obs.wheel_speed[1, 1]", r"index it with 1 numbers"),
])
def test_bad_column_references_are_explained(table, ref, message):
    with pytest.raises(TableError, match=message):
        resolve(table, ref)


def test_scatter_of_an_array_column_asks_for_an_index(table, tmp_path):
    with pytest.raises(TableError, match=r'index "obs.wheel_speed", e.g. obs.wheel_speed\[0\]'):
        plot(table, ["obs.wheel_speed", "slip"], str(tmp_path / "x.png"))


def test_episode_selection(table, tmp_path):
    plot(table, ["slip"], str(tmp_path / "e.png"), episodes=[1])
    with pytest.raises(TableError, match="has no episode 7; it has episodes 0, 1"):
        plot(table, ["slip"], str(tmp_path / "e.png"), episodes=[7])


def test_default_output_sits_beside_the_table():
    assert default_output("runs/trace.parquet", ["latent.slip", "obs.tiles[0, 1]"]) == \
        "runs/trace.latent.slip-obs.tiles_0_1.png"

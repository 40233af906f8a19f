"""The trace format (docs/traces.md) as other tools read it (issue 12, item 3): the
column table is one JSON document in the file-level metadata, which pyarrow,
polars and DuckDB all expose; arrays keep their shape (nested fixed-size lists),
which polars reads as arrays of that shape, DuckDB as nested lists and pandas as
nested arrays;
latents carry the range `polc check` proved, not -inf..inf."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

from polc.runtime.io.table import COLUMNS_KEY, read_table
from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)


@pytest.fixture
def trace(pol, tmp_path, capsys) -> str:
    out = str(tmp_path / "trace.parquet")
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "2", "-o", out, "-q")
    assert code == 0, err
    return out


def _table(trace: str) -> dict[str, dict]:
    raw = pq.read_metadata(trace).metadata[COLUMNS_KEY.encode()]
    return {c["name"]: c for c in json.loads(raw)}


def test_the_column_table_describes_every_column(trace):
    columns = _table(trace)
    assert list(columns) == pq.read_schema(trace).names
    assert columns["obs.grid"] == {"name": "obs.grid", "kind": "obs", "dtype": "float32", "shape": [2, 2],
                                   "doc": "[[pos, vel], [target, target - pos]] (a matrix, for layout tests)",
                                   "range": [-3.0, 3.0], "proved": None, "units": None}
    assert columns["weight.kp"]["range"] == [0.0, None]  # `real >= 0`: open above
    assert {c["kind"] for c in columns.values()} == {"index", "obs", "latent", "weight", "mean", "action",
                                                     "reward", "end"}


def test_latents_carry_the_range_the_analysis_proved(trace):
    columns = _table(trace)
    assert columns["latent.err"]["proved"] == [-3.0, 3.0]  # err = gap[0], gap in [-3, 3]
    assert columns["latent.err"]["range"] == [None, None]  # a latent declares no range
    assert columns["latent.far"]["dtype"] == "bool"
    assert columns["mean.push"]["proved"] == [-1.0, 1.0]  # clipped to the action's range
    values = read_table(trace).column("latent.err")
    assert -3.0 <= values.min() and values.max() <= 3.0
    assert read_table(trace).columns["latent.err"].proved == (-3.0, 3.0)


def test_polars_reads_arrays_with_their_shape_and_the_column_table(trace):
    grid = read_table(trace).column("obs.grid")
    df = pl.read_parquet(trace)
    assert df.schema["obs.grid"] == pl.Array(pl.Float32, (2, 2))
    assert np.array_equal(df["obs.grid"].to_numpy(), grid)
    meta = pl.read_parquet_metadata(trace)
    assert json.loads(meta[COLUMNS_KEY]) == list(_table(trace).values())


def test_duckdb_reads_arrays_with_their_shape_and_the_column_table(trace):
    grid = read_table(trace).column("obs.grid")
    rows = duckdb.sql(f"""select "obs.grid"[2][1] as target, typeof("obs.grid") as t
                          from read_parquet('{trace}') order by episode, step""").fetchall()
    assert rows[0][1] == "FLOAT[][]"  # DuckDB reads nested fixed-size lists as nested lists
    assert np.allclose([r[0] for r in rows], grid[:, 1, 0])  # DuckDB indexes from 1
    ((value,),) = duckdb.sql(f"""select decode(value) from parquet_kv_metadata('{trace}')
                                 where decode(key) = '{COLUMNS_KEY}'""").fetchall()
    assert json.loads(value) == list(_table(trace).values())


def test_pandas_reads_arrays_as_nested_arrays(trace):
    table = read_table(trace)
    df = pd.read_parquet(trace)
    assert np.array_equal(np.stack(df["obs.gap"].to_numpy()), table.column("obs.gap"))
    # A 2-D cell is an array of rows: docs/traces.md gives this recipe.
    assert np.array_equal(np.stack([np.stack(cell) for cell in df["obs.grid"]]), table.column("obs.grid"))


def test_analysis_code_gets_each_array_cell_with_its_shape(trace, tmp_path, capsys):
    """In the sandbox the DataFrame's 2-D cells are arrays of their shape, so the prompt's
    `np.stack(df[col].to_numpy()).reshape(-1, *shape)` holds for every array column."""
    code = tmp_path / "shapes.py"
    code.write_text("import numpy as np\n\n"
                    "def analyze(df):\n"
                    "    grid = np.stack(df['obs.grid'].to_numpy())\n"
                    "    gap = np.stack(df['obs.gap'].to_numpy()).reshape(-1, 2)\n"
                    "    print('grid', grid.shape, grid.dtype, 'gap', gap.shape, float(grid[3, 1, 0]))\n")
    status, out, err = polc(capsys, "analyze", trace, "--code", str(code))
    assert status == 0, err
    rows = len(read_table(trace).column("step"))
    target = float(read_table(trace).column("obs.grid")[3, 1, 0])
    assert f"grid ({rows}, 2, 2) float32 gap ({rows}, 2) {target}" in out

"""`polc demos ENV --from-parquet FILE`: a table the user already has, with columns
named as the schema says, becomes a demonstration that `polc fit` reads."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from polc.runtime.io.table import read_table
from toy_cli import polc, toy_env  # noqa: F401  (toy_reach registered for the test)

ENV = "gym:gym_test_envs:DictReach-v0"


def _user_table(path, n=30, **override):
    rng = np.random.default_rng(0)
    pos, vel, target = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    cols = {"pos": pos, "obs.vel": vel, "target": target, "push": np.clip(1.5 * (target - pos) - vel, -1, 1),
            "episode": np.repeat([7, 3], [n // 2, n - n // 2]), "reward": -np.abs(target - pos)}
    cols.update(override)
    pq.write_table(pa.table({k: v for k, v in cols.items() if v is not None}), path)


def test_a_users_table_becomes_a_demonstration(tmp_path, capsys):
    src, out = str(tmp_path / "mine.parquet"), str(tmp_path / "demo.parquet")
    _user_table(src)
    code, _, err = polc(capsys, "demos", ENV, "--from-parquet", src, "-o", out)
    assert code == 0 and "2 episode(s), 30 steps" in err
    t = read_table(out)
    assert t.metadata["source"] == {"parquet": src} and t.metadata["env"]["name"] == ENV
    assert list(np.unique(t.column("episode"))) == [0, 1]  # renumbered in file order (7, then 3)
    assert t.column("truncated").sum() == 2 and not t.column("terminated").any()
    np.testing.assert_allclose(t.column("action.push"), np.asarray(pq.read_table(src)["push"]), rtol=1e-6)


def test_an_array_field_is_a_list_column(tmp_path, capsys):
    src, out = str(tmp_path / "mine.parquet"), str(tmp_path / "demo.parquet")
    n = 6
    pq.write_table(pa.table({"obs.gap": pa.array([[0.1 * i, -0.1 * i] for i in range(n)], pa.list_(pa.float32())),
                             **{k: np.zeros(n) for k in ("pos", "vel", "target", "grid_unused", "push")}}), src)
    # toy_reach also has a (2, 2) grid observation: without its column the import names it
    code, _, err = polc(capsys, "demos", "toy_reach", "--from-parquet", src, "-o", out)
    assert code == 2 and "no column 'obs.grid' or 'grid'" in err


@pytest.mark.parametrize("override, message", [
    ({"push": None}, "no column 'action.push' or 'push'"),
    ({"pos": np.full(30, np.nan)}, "column 'pos' of"),
    ({"target": pa.array([[0.0, 1.0]] * 30)}, "holds lists of length [2]; the field needs 1 values per row"),
])
def test_bad_user_tables_are_usage_errors(tmp_path, capsys, override, message):
    src, out = str(tmp_path / "mine.parquet"), tmp_path / "demo.parquet"
    _user_table(src, **override)
    code, _, err = polc(capsys, "demos", ENV, "--from-parquet", src, "-o", str(out))
    assert code == 2 and message in err and not out.exists()


def test_from_parquet_takes_no_expert(tmp_path, capsys):
    src = str(tmp_path / "mine.parquet")
    _user_table(src)
    code, _, err = polc(capsys, "demos", ENV, "--from-parquet", src, "--expert", "gym_test_envs:expert",
                        "-o", str(tmp_path / "d.parquet"))
    assert code == 2 and "give no --expert or --perturb" in err

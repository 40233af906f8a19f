"""Step tables: the Parquet layout, metadata, writer settings, atomic and
interrupted writes, and clear errors for files that are not readable tables."""

from __future__ import annotations

import math
import os
import stat

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from polc.runtime.io.table import ColumnSpec, TableError, TableWriter, read_table, step_columns

BODY = (ColumnSpec("obs.speed", (), "float32", "forward speed", 0.0, 1.5),
        ColumnSpec("obs.tiles", (3, 2), "float32", "tiles ahead", -10.0, 10.0),
        ColumnSpec("latent.fast", (), "bool", "over the limit"),
        ColumnSpec("weight.gains", (2,), "float32", None, 0.0, math.inf),
        ColumnSpec("action.steer", (), "float32", "steer", -1.0, 1.0))
COLUMNS = step_columns(BODY)
META = {"kind": "test", "seeds": [7, 8]}


def episode(index: int, n: int, seed: int) -> dict:
    rng = np.random.default_rng(index)
    return {"episode": np.full(n, index, np.int32), "step": np.arange(n, dtype=np.int32),
            "seed": np.full(n, seed, np.int64),
            "obs.speed": rng.uniform(0, 1.5, n).astype(np.float32),
            "obs.tiles": rng.normal(size=(n, 3, 2)).astype(np.float32),
            "latent.fast": rng.uniform(size=n) > 0.5,
            "weight.gains": np.tile(np.float32([0.5, 2.0]), (n, 1)),
            "action.steer": rng.uniform(-1, 1, n).astype(np.float32),
            "reward": rng.normal(size=n).astype(np.float32),
            "terminated": np.arange(n) == n - 1, "truncated": np.zeros(n, bool)}


def write(path, episodes) -> None:
    with TableWriter(str(path), COLUMNS, META) as w:
        for e in episodes:
            w.write_episode(e)


def test_round_trip_keeps_values_shapes_and_order(tmp_path):
    path = tmp_path / "t.parquet"
    eps = [episode(0, 5, 7), episode(1, 3, 8)]
    write(path, eps)
    t = read_table(str(path))
    assert list(t.columns) == [c.name for c in COLUMNS]
    assert t.num_rows == 8 and list(t.episodes) == [0, 1]
    for name in eps[0]:
        expected = np.concatenate([e[name] for e in eps])
        got = t.column(name)
        assert got.shape == expected.shape and got.dtype == expected.dtype, name
        assert np.array_equal(got, expected), name
    assert t.names("obs") == ["speed", "tiles"]


def test_arrays_keep_their_shape_as_nested_fixed_size_lists(tmp_path):
    path = tmp_path / "t.parquet"
    e = episode(0, 2, 7)
    write(path, [e])
    raw = pq.read_table(str(path)).column("obs.tiles").combine_chunks()
    assert raw.type == pa.list_(pa.list_(pa.float32(), 2), 3)  # real[3, 2]
    assert np.array_equal(np.asarray(raw[1].values.flatten()), e["obs.tiles"][1].reshape(-1))
    assert raw[1].as_py() == e["obs.tiles"][1].tolist()


def test_an_older_table_with_flattened_arrays_still_reads(tmp_path):
    """Before the column table, an array was one flat fixed-size list, its shape in field metadata."""
    path = str(tmp_path / "old.parquet")
    tiles = np.arange(2 * 6, dtype=np.float32).reshape(2, 3, 2)
    field = pa.field("obs.tiles", pa.list_(pa.float32(), 6), nullable=False,
                     metadata={b"shape": b"[3, 2]", b"doc": b"null", b"lo": b'"-inf"', b"hi": b'"inf"'})
    column = pa.FixedSizeListArray.from_arrays(pa.array(tiles.reshape(-1)), 6)
    pq.write_table(pa.Table.from_arrays([column], schema=pa.schema([field])), path)
    t = read_table(path)
    assert t.columns["obs.tiles"].shape == (3, 2)
    assert np.array_equal(t.column("obs.tiles"), tiles)


def test_metadata_carries_run_description_docs_and_ranges(tmp_path):
    path = tmp_path / "t.parquet"
    write(path, [episode(0, 2, 7)])
    t = read_table(str(path))
    assert t.metadata == META and t.complete is True
    assert t.columns["obs.tiles"] == BODY[1]
    assert t.columns["weight.gains"].hi == math.inf and t.columns["weight.gains"].lo == 0.0
    assert t.columns["latent.fast"].doc == "over the limit"


def test_one_row_group_per_episode_without_dictionaries_and_byte_stream_split_floats(tmp_path):
    path = tmp_path / "t.parquet"
    write(path, [episode(0, 5, 7), episode(1, 4, 8), episode(2, 6, 9)])
    meta = pq.ParquetFile(str(path)).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [5, 4, 6]
    encodings = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).encodings
                 for i in range(meta.num_columns)}
    assert "BYTE_STREAM_SPLIT" in encodings["obs.tiles.list.element.list.element"]
    assert "BYTE_STREAM_SPLIT" in encodings["reward"]
    assert "BYTE_STREAM_SPLIT" not in encodings["terminated"]
    assert not any(meta.row_group(0).column(i).has_dictionary_page for i in range(meta.num_columns))


def test_nothing_appears_under_the_final_name_until_close(tmp_path):
    path = tmp_path / "t.parquet"
    w = TableWriter(str(path), COLUMNS, META)
    w.write_episode(episode(0, 3, 7))
    assert not path.exists()
    w.close()
    assert path.exists() and os.listdir(tmp_path) == ["t.parquet"]
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask  # like any new file, not mkstemp's 0600


def test_interrupted_run_keeps_finished_episodes_in_a_partial_file(tmp_path):
    path = tmp_path / "t.parquet"
    write(path, [episode(0, 2, 1)])  # an earlier complete run
    before = path.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        with TableWriter(str(path), COLUMNS, META) as w:
            w.write_episode(episode(0, 5, 7))
            w.write_episode(episode(1, 4, 8))
            raise KeyboardInterrupt
    assert path.read_bytes() == before
    partial = read_table(str(tmp_path / "t.partial.parquet"))
    assert partial.complete is False and partial.num_rows == 9 and list(partial.episodes) == [0, 1]
    assert sorted(os.listdir(tmp_path)) == ["t.parquet", "t.partial.parquet"]


def test_interruption_before_any_episode_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with TableWriter(str(tmp_path / "t.parquet"), COLUMNS, META):
            raise RuntimeError("env crashed")
    assert os.listdir(tmp_path) == []


def test_truncated_file_is_a_clear_error(tmp_path):
    path = tmp_path / "t.parquet"
    write(path, [episode(0, 50, 7)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TableError, match=r"is not a readable Parquet table: .*\.partial\.parquet"):
        read_table(str(path))


@pytest.mark.parametrize("content", [b"", b"not parquet at all", b"PAR1" + b"\0" * 10])
def test_garbage_is_a_clear_error(tmp_path, content):
    path = tmp_path / "x.parquet"
    path.write_bytes(content)
    with pytest.raises(TableError, match="is not a readable Parquet table"):
        read_table(str(path))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TableError, match="no such file"):
        read_table(str(tmp_path / "nope.parquet"))


def test_episode_with_wrong_shape_or_columns_is_refused(tmp_path):
    with TableWriter(str(tmp_path / "t.parquet"), COLUMNS, META) as w:
        bad = episode(0, 3, 7)
        bad["obs.tiles"] = np.zeros((3, 6), np.float32)
        with pytest.raises(TableError, match=r'column "obs.tiles" has shape \(3, 6\), expected \(3, 3, 2\)'):
            w.write_episode(bad)
        missing = episode(0, 3, 7)
        del missing["reward"]
        with pytest.raises(TableError, match=r"missing \['reward'\]"):
            w.write_episode(missing)
        w.write_episode(episode(0, 3, 7))


def test_duplicate_columns_are_refused(tmp_path):
    with pytest.raises(TableError, match="duplicate column names: obs.speed"):
        TableWriter(str(tmp_path / "t.parquet"), step_columns(BODY + BODY[:1]), META)


# ---- damaged and malformed tables ------------------------------------------------------


def flip_inside_a_data_page(path, column: str) -> None:
    """Invert one byte in the middle of `column`'s first data page (past its page header):
    the file still parses, and without checksums its values would silently change."""
    meta = pq.ParquetFile(str(path)).metadata
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    chunk = meta.row_group(0).column(names.index(column))
    at = chunk.data_page_offset + chunk.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_every_data_page_carries_a_checksum_and_a_damaged_page_is_refused(tmp_path):
    path = tmp_path / "t.parquet"
    write(path, [episode(0, 400, 7)])
    flip_inside_a_data_page(path, "obs.tiles.list.element.list.element")
    unchecked = pq.ParquetFile(str(path)).read()  # what reading without verification gives: no error
    assert unchecked.num_rows == 400
    with pytest.raises(TableError, match=rf"^'{path}' is damaged: a data page fails its checksum"):
        read_table(str(path))


def test_tables_written_before_checksums_still_read(tmp_path):
    path = tmp_path / "old.parquet"
    with TableWriter(str(path), COLUMNS, META) as w:
        w.write_episode(episode(0, 20, 7))
    table = pq.read_table(str(path))
    pq.write_table(table, str(path), write_page_checksum=False)
    assert read_table(str(path)).num_rows == 20


def write_arrow(path, fields_and_arrays, polc_meta=b'{"kind": "test"}', extra=None):
    fields = [f for f, _ in fields_and_arrays]
    meta = {b"polc": polc_meta} if polc_meta is not None else {}
    meta.update(extra or {})
    schema = pa.schema(fields, metadata=meta)
    pq.write_table(pa.Table.from_arrays([a for _, a in fields_and_arrays], schema=schema), str(path))


def tiles(width: int, shape) -> tuple:
    values = pa.array(np.zeros(4 * width, np.float32))
    field = pa.field("obs.tiles", pa.list_(pa.float32(), width), metadata={b"shape": str(list(shape)).encode()})
    return field, pa.FixedSizeListArray.from_arrays(values, width)


def speed(name="obs.speed", meta=None, values=None) -> tuple:
    return (pa.field(name, pa.float32(), metadata=meta),
            pa.array(values if values is not None else np.zeros(4, np.float32), pa.float32()))


@pytest.mark.parametrize("columns, kw, message", [
    ([tiles(47, [6, 8])], {}, r'column "obs.tiles" cannot be read: it holds 47 values per step but its '
                              r'metadata says shape \[6, 8\] \(48 values\)'),
    ([tiles(4, "x")], {}, r'column "obs.tiles" cannot be read: its \'shape\' metadata is not valid JSON'),
    ([tiles(4, [-2, -2])], {}, r'its shape metadata \[-2, -2\] is not a list of positive sizes'),
    ([speed(), speed()], {}, r"has more than one column named 'obs.speed'; a step table names each column once"),
    ([speed(meta={b"lo": b'"low"'})], {}, r'column "obs.speed" cannot be read: its lo is "low", not a number'),
    ([speed(meta={b"shape": b"[3]"})], {}, r"holds one value per step but its metadata says shape \[3\]"),
    ([speed(values=[1.0, None, 2.0, None])], {}, r'column "obs.speed" has 2 missing \(null\) value'),
    ([speed()], dict(polc_meta=b"{not json"), r"its polc metadata is not valid JSON"),
    ([speed()], dict(polc_meta=b"[" * 100_000 + b"]" * 100_000), r"its polc metadata is nested too deeply"),
    ([speed()], dict(polc_meta=b"[" * 100 + b"]" * 100), r"its polc metadata is nested more than 64 levels deep"),
    ([speed()], dict(polc_meta=b"[1, 2]"), r"its polc metadata is not a JSON object"),
    ([speed()], dict(polc_meta=b'{"seeds": "abc"}'), r"\"seeds\" is not a list of integers"),
    ([speed()], dict(extra={b"polc.complete": b"maybe"}), r"its polc.complete metadata is not valid JSON"),
    ([(pa.field("obs.v", pa.list_(pa.float32())), pa.array([[1.0], [1.0, 2.0], [], [3.0]]))], {},
     r'column "obs.v" cannot be read: it is a variable-length list'),
])
def test_malformed_tables_are_clear_errors_naming_the_file(tmp_path, columns, kw, message):
    path = tmp_path / "bad.parquet"
    write_arrow(path, columns, **kw)
    with pytest.raises(TableError, match=message) as e:
        read_table(str(path))
    assert str(e.value).startswith(f"'{path}'")


# ---- the commands that read tables, on damaged ones ----


@pytest.fixture(scope="module")
def toy_demo(tmp_path_factory):
    from polc.cli import main
    from polc.runtime.envs import toy

    toy.register()
    d = tmp_path_factory.mktemp("toy")
    (d / "reach.pol").write_text(toy.reach_policy())
    assert main(["demos", "toy_reach", "--episodes", "2", "-o", str(d / "demo.parquet"), "-q"]) == 0
    return d


def test_fit_and_analyze_refuse_a_damaged_demonstration(toy_demo, tmp_path, capsys):
    from polc.cli import main

    damaged = tmp_path / "demo.parquet"
    damaged.write_bytes((toy_demo / "demo.parquet").read_bytes())
    flip_inside_a_data_page(damaged, "obs.gap.list.element")
    capsys.readouterr()
    code = main(["fit", str(toy_demo / "reach.pol"), "--demos", str(damaged), "-o", str(tmp_path / "p.json"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and f"'{damaged}' is damaged: a data page fails its checksum" in err, err
    assert not (tmp_path / "p.json").exists() and "Traceback" not in err
    code = main(["analyze", str(damaged), "--policy", str(toy_demo / "reach.pol")])
    err = capsys.readouterr().err
    assert code == 1 and f"'{damaged}' is damaged: a data page fails its checksum" in err, err


def test_fit_refuses_a_table_whose_array_column_does_not_match_its_shape(toy_demo, tmp_path, capsys):
    from polc.cli import main

    table = pq.read_table(str(toy_demo / "demo.parquet"))
    i = table.schema.get_field_index("obs.gap")
    field = table.schema.field(i).with_metadata({**table.schema.field(i).metadata, b"shape": b"[3]"})
    bad = tmp_path / "bad.parquet"
    pq.write_table(table.cast(table.schema.set(i, field)), str(bad))
    capsys.readouterr()
    code = main(["fit", str(toy_demo / "reach.pol"), "--demos", str(bad), "-o", str(tmp_path / "p.json"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and 'column "obs.gap" cannot be read: it holds 2 values per step but its metadata says ' \
                         'shape [3]' in err, err


def test_analyze_code_refuses_a_damaged_trace_before_the_sandbox(toy_demo, tmp_path, capsys):
    from polc.cli import main

    damaged = tmp_path / "trace.parquet"
    damaged.write_bytes((toy_demo / "demo.parquet").read_bytes())
    flip_inside_a_data_page(damaged, "obs.gap.list.element")
    code_file = tmp_path / "a.py"
    code_file.write_text("def analyze(df):\n    print(len(df))\n")
    capsys.readouterr()
    code = main(["analyze", str(damaged), "--code", str(code_file)])
    out, err = capsys.readouterr()
    assert code == 1 and f"'{damaged}' is damaged: a data page fails its checksum" in err and out == "", err


def test_random_damage_anywhere_is_a_table_error_or_a_readable_table(toy_demo, tmp_path):
    """300 seeded mutations of 1-3 bytes each, anywhere in the file (pages, footer, metadata):
    every one reads, or is refused with a TableError; nothing else escapes."""
    from polc.runtime.io.demo_check import vet_demo

    tp = polc_program(toy_demo)
    data = (toy_demo / "demo.parquet").read_bytes()
    rng = np.random.default_rng(19)
    path = tmp_path / "fuzzed.parquet"
    refused = 0
    for _ in range(300):
        damaged = bytearray(data)
        for at in rng.integers(0, len(data), rng.integers(1, 4)):
            damaged[at] = int(rng.integers(0, 256))
        path.write_bytes(bytes(damaged))
        try:
            table = read_table(str(path))
            for name in table.columns:
                table.column(name)
            vet_demo(table, tp)
        except TableError as e:
            refused += 1
            assert str(e).startswith(f"'{path}'"), str(e)
    assert refused > 250  # most bytes of a small table are checked data, footer or metadata


def polc_program(d):
    import polc

    return polc.loads((d / "reach.pol").read_text(), "reach.pol", analyze=False).typed


@pytest.mark.parametrize("values, type_", [
    ([1, -2, 3, 4], pa.int8()), ([1, -2, 3, 4], pa.int16()), ([1, -2, 3, 4], pa.int32()), ([1, -2, 3, 4], pa.int64()),
    ([1, 2, 3, 250], pa.uint8()), ([1, 2, 3, 4], pa.uint64()), ([0.5, -1.5, 2.0, 1e-3], pa.float16()),
    ([0.5, -1.5, 2.0, 1e-3], pa.float32()), ([0.5, -1.5, float("nan"), 1e300], pa.float64()),
    ([True, False, True, True, False, False, True, False, True], pa.bool_()), ([1.0, None, 2.0], pa.float64()),
    ([], pa.float32()), ([], pa.bool_())])
def test_columns_read_as_pyarrow_reads_them_slices_included(values, type_):
    """`table._numpy` reads buffers itself (pyarrow's to_numpy imports pandas): every slice of
    every type gives what to_numpy gives, dtype, values and read-only views alike."""
    from polc.runtime.io.table import _numpy

    arr = pa.array(values, type_)
    for start in range(len(values) + 1):
        for stop in range(start, len(values) + 1):
            part = arr.slice(start, stop - start)
            got, want = _numpy(part), part.to_numpy(zero_copy_only=False)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            assert got.flags.writeable == want.flags.writeable


def test_reading_a_table_does_not_import_pandas(tmp_path):
    """Reading a demonstration is on `polc fit`'s path; pandas costs it about 0.3 s of CPU."""
    import subprocess
    import sys

    path = tmp_path / "t.parquet"
    write(path, [episode(0, 5, 7), episode(1, 4, 8)])
    code = ("import sys\nfrom polc.runtime.io.table import read_table\nt = read_table(sys.argv[1])\n"
            "[t.column(n) for n in t.columns]\nprint('pandas' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"

"""Step tables: the Parquet files that hold demonstrations and rollout traces.

One row per environment step. Columns, in this order:

    episode   int32      index of the episode in the run (0, 1, ...)
    step      int32      step within the episode (0, 1, ...)
    seed      int64      the environment seed of the episode
    obs.<name>           every observation the environment gives
    latent.<name>        traces only: every latent named in the policy source
    weight.<name>        traces only: every weight's (constrained) value
    mean.<name>          traces only: each action's mean (clipped to its range)
    action.<name>        the action executed (sampled, or the mean); in a `--perturb`
                         demonstration, the expert's (what `polc fit` imitates)
    executed.<name>      `--perturb` demonstrations only: the perturbed action stepped
    reward    float32
    terminated, truncated  bool

Real values are float32 (bool latents stay bool); an array value keeps its
shape as nested fixed-size lists (`real[12, 4]` is
`fixed_size_list<fixed_size_list<float32>[4]>[12]`), which polars reads as an
`Array(Float32, shape=(12, 4))`, DuckDB as a nested list `FLOAT[][]` and pandas
as nested arrays. The file-level
metadata holds two JSON documents (docs/traces.md is their reference): `polc`,
the run (policy source and sha256, params hash, environment id and version,
seeds, polc version, ...), and `polc.columns`, the column table: for every
column its name, kind, dtype, shape, doc string, declared range, the range
`polc check` proved for it (latents and action means) and units. File-level
metadata is what pyarrow, polars (`read_parquet_metadata`) and DuckDB
(`parquet_kv_metadata`) all expose; each field's own Arrow metadata repeats
shape, doc and range for older readers. Tables written before the column table
existed (arrays as one flat fixed-size list, shape in the field metadata)
still read.

Writing (`TableWriter`) goes episode by episode, one Parquet row group per
episode, into a hidden temporary file beside the target that is renamed to
the target only when the run finishes. If the run is interrupted (an exception,
Ctrl-C, or SIGTERM turned into KeyboardInterrupt by the CLI), the finished
episodes are finalised into `<stem>.partial.parquet` instead: the target name
never holds a half-written file, and an earlier complete file under it is left
alone. (A SIGKILL leaves only the footer-less temporary file; nothing in-process
can finalise that.)

Every data page carries a CRC-32 checksum (`write_page_checksum`), verified on
read: a table whose bytes changed after it was written is refused with a
`TableError` naming the file, never read with altered values. Files written
without checksums (before polc wrote them) still read.

Float columns are written without dictionary encoding and with BYTE_STREAM_SPLIT
(see `benchmarks/bench_rollout.py` for the measurement against the defaults):
traces are nearly all distinct floats, which dictionaries cannot compress.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import os
import signal
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import lazy_loader as lazy
import numpy as np

from polc.util.files import WriteFailed, naming, temporary_beside  # noqa: F401  (temporary_beside re-exported)

# Column kinds by prefix, in table order.
PREFIXES = ("obs", "latent", "state", "weight", "mean", "action")
# pyarrow (0.2 s to import) is loaded when a table is first written or read: `polc eval`,
# which builds the trace layout (`step_columns`) but writes no table, never imports it.
pa = lazy.load("pyarrow")
# Every data page carries a CRC-32 that `read_table` verifies: a damaged byte is refused, never fitted.
WRITE_OPTIONS = dict(use_dictionary=False, compression="snappy", write_statistics=True, write_page_checksum=True)
MAX_META_DEPTH = 64  # nesting of the polc metadata JSON; what polc writes nests a few levels
COLUMNS_KEY = "polc.columns"  # the file-level column table (docs/traces.md)
# Column kinds: a body column's prefix, or what a head/tail column is.
KINDS = {"episode": "index", "step": "index", "seed": "index", "reward": "reward", "terminated": "end",
         "truncated": "end"}


class TableError(Exception):
    """A table that cannot be read or written as asked; the message says why."""


@dataclass(frozen=True)
class ColumnSpec:
    """One column: `shape` is the per-step shape (() for a scalar)."""

    name: str
    shape: tuple[int, ...] = ()
    dtype: str = "float32"  # a key of _dtypes()
    doc: Optional[str] = None
    lo: float = -math.inf  # the declared range (the program's, else the environment's)
    hi: float = math.inf
    proved: Optional[tuple[float, float]] = None  # the range the analysis proved (hull over elements)
    units: Optional[str] = None
    # a state machine's named modes, (name, value) in value order (`polc.check.typed.state_modes`)
    modes: tuple[tuple[str, float], ...] = ()

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def kind(self) -> str:
        """obs, latent, state, weight, mean, action, executed (a column's prefix); index, reward, end."""
        prefix, dot, _ = self.name.partition(".")
        return prefix if dot else KINDS.get(self.name, "other")

    @property
    def arrow_type(self) -> pa.DataType:
        t = _dtypes()[self.dtype]
        for n in reversed(self.shape):  # real[12, 4]: a list of 12 lists of 4
            t = pa.list_(t, n)
        return t

    def field(self) -> pa.Field:
        meta = {"shape": list(self.shape), "doc": self.doc, "lo": _num(self.lo), "hi": _num(self.hi)}
        return pa.field(self.name, self.arrow_type, nullable=False,
                        metadata={k.encode(): json.dumps(v).encode() for k, v in meta.items()})

    def leaf_path(self) -> str:
        """The Parquet leaf column of this field (what writer options name)."""
        return self.name + ".list.element" * len(self.shape)

    def describe(self) -> dict:
        """This column's entry in the column table (`polc.columns`, docs/traces.md); a state
        machine's state adds "modes", {name: value} (absent elsewhere)."""
        out = {"name": self.name, "kind": self.kind, "dtype": self.dtype, "shape": list(self.shape),
               "doc": self.doc, "range": [_bound_json(self.lo), _bound_json(self.hi)],
               "proved": None if self.proved is None else [_bound_json(x) for x in self.proved],
               "units": self.units}
        if self.modes:
            out["modes"] = {name: value for name, value in self.modes}
        return out


def _num(x: float) -> Any:
    """A float for JSON: infinities as strings (JSON has none)."""
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _bound_json(x: float) -> Optional[float]:
    """A range end for the column table: a number, or null where the range is open."""
    return float(x) if math.isfinite(x) else None


def _float(x: Any) -> float:
    return float(x) if x is not None else math.nan


HEAD = (ColumnSpec("episode", (), "int32", "episode index in this run"),
        ColumnSpec("step", (), "int32", "step within the episode"),
        ColumnSpec("seed", (), "int64", "environment seed of the episode"))
TAIL = (ColumnSpec("reward", (), "float32", "reward of this step"),
        ColumnSpec("terminated", (), "bool", "the episode ended in a terminal state at this step"),
        ColumnSpec("truncated", (), "bool", "the episode was cut at this step (time limit)"))


def step_columns(body: Sequence[ColumnSpec]) -> tuple[ColumnSpec, ...]:
    """The full column list: episode, step, seed, `body`, reward, terminated, truncated."""
    return HEAD + tuple(body) + TAIL


def schema_of(columns: Sequence[ColumnSpec], metadata: Mapping[str, Any]) -> pa.Schema:
    names = [c.name for c in columns]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TableError(f"duplicate column names: {', '.join(dup)}")
    return pa.schema([c.field() for c in columns],
                     metadata={b"polc": json.dumps(metadata).encode(),
                               COLUMNS_KEY.encode(): json.dumps([c.describe() for c in columns]).encode()})


def episode_table(columns: Sequence[ColumnSpec], schema: pa.Schema, data: Mapping[str, np.ndarray]) -> pa.Table:
    """Arrow table of one episode. `data[name]` has shape (T, *column.shape)."""
    missing = [c.name for c in columns if c.name not in data]
    extra = sorted(set(data) - {c.name for c in columns})
    if missing or extra:
        raise TableError(f"episode columns do not match the table: missing {missing}, unexpected {extra}")
    n = len(data[columns[0].name])
    arrays = []
    for c in columns:
        a = np.asarray(data[c.name], dtype=np.dtype(c.dtype if c.dtype != "bool" else np.bool_))
        if a.shape != (n,) + c.shape:
            raise TableError(f'column "{c.name}" has shape {a.shape}, expected {(n,) + c.shape}')
        arr = pa.array(a.reshape(-1))
        for size in reversed(c.shape):
            arr = pa.FixedSizeListArray.from_arrays(arr, size)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)


@contextlib.contextmanager
def _interruptions_held():
    """SIGINT and SIGTERM held back while the block runs (in the main thread, where Python's
    handlers run), and delivered when it ends. An episode is appended by a C call (pyarrow's),
    after which a pending signal is raised at the next bytecode: before the episode was counted,
    so the file held one more row group than the counts, and the finished episodes could not be
    kept (their file did not read back as `rows` rows). Held, the interruption lands between
    episodes."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class TableWriter:
    """Writes a step table episode by episode; see the module docstring.

        with TableWriter(path, columns, metadata) as w:
            w.write_episode({"episode": ..., "step": ..., ...})   # arrays of T rows
        # on success `path` exists; on an exception the finished episodes are in w.partial_path
    """

    def __init__(self, path: str, columns: Sequence[ColumnSpec], metadata: Mapping[str, Any]):
        self.path = path
        self.columns = tuple(columns)
        self.schema = schema_of(self.columns, metadata)
        self.episodes = 0
        self.rows = 0
        self.final_path: Optional[str] = None
        self._failed = False  # a write failed (a full disk): the file cannot be finished
        self._tmp = temporary_beside(path)
        split = [c.leaf_path() for c in self.columns if c.dtype == "float32"]
        try:
            with naming(path):
                self._writer: Optional[Any] = _pq().ParquetWriter(  # a pyarrow.parquet.ParquetWriter
                    self._tmp, self.schema, use_byte_stream_split=split, **WRITE_OPTIONS)
        except BaseException:
            os.unlink(self._tmp)
            raise

    @property
    def partial_path(self) -> str:
        stem = self.path[:-len(".parquet")] if self.path.endswith(".parquet") else self.path
        return stem + ".partial.parquet"

    def write_episode(self, data: Mapping[str, np.ndarray]) -> None:
        """Append one finished episode as one row group."""
        if self._writer is None:
            raise TableError("the table is already closed")
        table = episode_table(self.columns, self.schema, data)
        with _interruptions_held():  # the row group and the counts go together, or neither
            try:
                with naming(self.path):
                    self._writer.write_table(table, row_group_size=max(1, table.num_rows))
            except OSError:
                self._failed = True
                raise
            self.episodes += 1
            self.rows += table.num_rows

    def _finish(self, target: str, complete: bool) -> None:
        """Close the file, check it reads back whole, and only then rename it to `target`;
        `WriteFailed` naming `target` otherwise (the temporary file removed either way)."""
        assert self._writer is not None
        writer, self._writer = self._writer, None
        try:
            with naming(target):
                writer.add_key_value_metadata({"polc.complete": json.dumps(complete),
                                               "polc.episodes": str(self.episodes)})
                writer.close()
                self._verify_readable(target)
                os.replace(self._tmp, target)
        finally:
            if os.path.exists(self._tmp):
                os.unlink(self._tmp)
        self.final_path = target

    def _verify_readable(self, target: str) -> None:
        # pyarrow may report a failed footer write nowhere (seen on a full tmpfs): read it back
        try:
            rows = _pq().read_metadata(self._tmp).num_rows
        except (OSError, pa.ArrowException) as e:
            rows = f"unreadable: {e}"
        if rows != self.rows:
            raise WriteFailed(errno.EIO, f"the file does not read back whole ({rows} of {self.rows} rows; is the "
                                         "disk full?)", target)

    def close(self) -> str:
        """Finish the file and move it to `path`. Returns the path written."""
        if self._writer is not None:
            if self._failed:
                self.abort()
                raise WriteFailed(errno.EIO, "an earlier write to it failed", self.path)
            self._finish(self.path, complete=True)
        return self.path

    def abort(self) -> Optional[str]:
        """Stop after an interruption: keep the finished episodes in `partial_path`
        (returned, only once it reads back whole), or remove everything when no episode
        finished, a write failed (a full disk) or the partial file cannot be finished
        (returns None)."""
        if self._writer is None:
            return self.final_path
        if self.episodes and not self._failed:
            try:
                self._finish(self.partial_path, complete=False)
                return self.partial_path
            except OSError:
                return None  # the partial file could not be written either; the caller's error says why
        writer, self._writer = self._writer, None
        try:
            writer.close()
        except (OSError, pa.ArrowException):
            pass  # a writer that already failed: its file is discarded below
        finally:
            if os.path.exists(self._tmp):
                os.unlink(self._tmp)
        return None

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# ---- reading ------------------------------------------------------------------------


def _json(raw: bytes, what: str) -> Any:
    """One JSON value of the file's metadata; ValueError saying what is wrong with it."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{what} is not valid JSON") from None
    if _depth(value) > MAX_META_DEPTH:
        raise ValueError(f"{what} is nested more than {MAX_META_DEPTH} levels deep")
    return value


def _depth(value: Any) -> int:
    """How deeply `value` nests lists and objects, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _bound(value: Any, what: str) -> float:
    if value is None or value in ("inf", "-inf"):
        return _float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"its {what} is {json.dumps(value)[:40]}, not a number")
    return float(value)


def _spec_of(field: pa.Field) -> ColumnSpec:
    """The column spec of a field; ValueError saying what is wrong with its type or metadata."""
    meta = {k.decode(): _json(v, f"its {k.decode()!r} metadata") for k, v in (field.metadata or {}).items()
            if k.decode() in ("shape", "doc", "lo", "hi")}
    t, dims = field.type, []
    while pa.types.is_fixed_size_list(t):  # nested: the shape itself; one level: maybe flattened
        dims.append(t.list_size)
        t = t.value_type
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        raise ValueError(f"it is a variable-length list ({field.type}); a step table's arrays have one size "
                         f"per column")
    base = t
    if dims:
        shape = meta.get("shape") or dims
        if not (isinstance(shape, list) and all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                                 for n in shape)):
            raise ValueError(f"its shape metadata {json.dumps(shape)[:60]} is not a list of positive sizes")
        flattened = len(dims) == 1 and len(shape) > 1  # an older table: the array flattened row-major
        if flattened and math.prod(shape) != dims[0]:
            raise ValueError(f"it holds {dims[0]} values per step but its metadata says shape {shape} "
                             f"({math.prod(shape)} values)")
        if not flattened and list(shape) != dims:
            if math.prod(shape) != math.prod(dims):
                raise ValueError(f"it holds {math.prod(dims)} values per step but its metadata says shape {shape} "
                                 f"({math.prod(shape)} values)")
            raise ValueError(f"its values have shape {dims} per step but its metadata says shape {shape}")
        shape = tuple(shape)
    else:
        shape = ()
        if meta.get("shape") not in (None, []):
            raise ValueError(f"it holds one value per step but its metadata says shape {meta['shape']}")
    dtype = next((k for k, v in _dtypes().items() if v == base), None)
    if dtype is None:
        if pa.types.is_floating(base):
            dtype = "float32"
        elif pa.types.is_integer(base):
            dtype = "int64"
        else:
            raise ValueError(f"it has type {t}, which is not a step-table column type")
    doc = meta.get("doc")
    if doc is not None and not isinstance(doc, str):
        raise ValueError("its doc metadata is not a string")
    return ColumnSpec(field.name, shape, dtype, doc, _bound(meta.get("lo", "-inf"), "lo"),
                      _bound(meta.get("hi", "inf"), "hi"))


def _specs(path: str, arrow: pa.Table) -> dict[str, ColumnSpec]:
    """Every column's spec, checked: names unique, types and metadata consistent, no nulls."""
    names = arrow.schema.names
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TableError(f"'{path}' has more than one column named {', '.join(repr(n) for n in dup)}; "
                         f"a step table names each column once")
    specs = {}
    for i, field in enumerate(arrow.schema):
        try:
            specs[field.name] = _spec_of(field)
        except ValueError as e:
            raise TableError(f"'{path}': column \"{field.name}\" cannot be read: {e}") from None
        col = arrow.column(i)
        nulls = col.null_count + sum(_leaves(c).null_count for c in col.chunks if specs[field.name].shape)
        if nulls:
            raise TableError(f"'{path}': column \"{field.name}\" has {nulls} missing (null) value(s); "
                             f"a step table has a value in every cell")
    return specs


def _pq():
    import pyarrow.parquet as pq

    return pq


@functools.lru_cache(maxsize=1)
def _dtypes() -> dict:
    """ColumnSpec.dtype -> its Arrow type."""
    return {"float32": pa.float32(), "bool": pa.bool_(), "int32": pa.int32(), "int64": pa.int64()}


@functools.lru_cache(maxsize=1)
def _numeric() -> dict:
    """Arrow's fixed-width numeric types (by name) and their NumPy dtypes (Arrow and NumPy lay them out alike)."""
    return {str(t): np.dtype(d) for t, d in (
        (pa.int8(), np.int8), (pa.int16(), np.int16), (pa.int32(), np.int32), (pa.int64(), np.int64),
        (pa.uint8(), np.uint8), (pa.uint16(), np.uint16), (pa.uint32(), np.uint32), (pa.uint64(), np.uint64),
        (pa.float16(), np.float16), (pa.float32(), np.float32), (pa.float64(), np.float64))}


def _numpy(arr: pa.Array) -> np.ndarray:
    """`arr.to_numpy(zero_copy_only=False)`, without importing pandas where it can: pyarrow's
    `to_numpy` imports pandas (about 0.3 s of CPU, a twentieth of a warm `polc fit`) to look
    for pandas extension types even on a plain float array. A numeric array without nulls is
    read as a (read-only) view of its data buffer, as `to_numpy` returns it; anything else
    (nulls, strings) goes through `to_numpy`; booleans, which Arrow packs in bits, are
    unpacked (a new array, as `to_numpy` makes for them)."""
    if arr.null_count or not len(arr):
        return arr.to_numpy(zero_copy_only=False)
    if pa.types.is_boolean(arr.type):  # one bit per value, least significant first
        bits = np.unpackbits(np.frombuffer(arr.buffers()[1], np.uint8), bitorder="little")
        return bits[arr.offset: arr.offset + len(arr)].astype(bool)
    dtype = _numeric().get(str(arr.type))
    if dtype is None:
        return arr.to_numpy(zero_copy_only=False)
    out = np.frombuffer(arr.buffers()[1], dtype, count=len(arr), offset=arr.offset * dtype.itemsize)
    out.flags.writeable = False
    return out


def _leaves(arr: pa.Array) -> pa.Array:
    """The values of a (nested) fixed-size list array, row-major, respecting slices."""
    while pa.types.is_fixed_size_list(arr.type):
        arr = arr.flatten()
    return arr


def _with_column_table(path: str, specs: dict[str, ColumnSpec], raw: Optional[bytes]) -> dict[str, ColumnSpec]:
    """Take doc, ranges, proved ranges, units and a state's modes from the file's column table when it has one."""
    if raw is None:
        return specs
    try:
        rows = _json(raw, f"its {COLUMNS_KEY} metadata")
        if not (isinstance(rows, list) and all(isinstance(r, dict) and isinstance(r.get("name"), str)
                                               for r in rows)):
            raise ValueError(f"its {COLUMNS_KEY} metadata is not a list of columns with names")
        out = dict(specs)
        for r in rows:
            spec = specs.get(r["name"])
            if spec is None:
                continue  # a column not read (read_table(columns=...)) or dropped
            lo, hi = _pair(r.get("range"), f'{r["name"]}\'s range', (-math.inf, math.inf))
            proved = None if r.get("proved") is None else _pair(r["proved"], f'{r["name"]}\'s proved range',
                                                                   (-math.inf, math.inf))
            doc, units = r.get("doc"), r.get("units")
            if not all(x is None or isinstance(x, str) for x in (doc, units)):
                raise ValueError(f'the doc or units of {r["name"]} in its {COLUMNS_KEY} metadata is not a string')
            out[r["name"]] = ColumnSpec(spec.name, spec.shape, spec.dtype, doc, lo, hi, proved, units,
                                        _modes(r.get("modes"), r["name"]))
        return out
    except ValueError as e:
        raise TableError(f"'{path}': {e}") from None


def _modes(value: Any, name: str) -> tuple[tuple[str, float], ...]:
    """A state column's modes, {name: value} in the column table -> ((name, value), ...) in value order."""
    if value is None:
        return ()
    if not (isinstance(value, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                            for v in value.values())):
        raise ValueError(f"the modes of {name} in its {COLUMNS_KEY} metadata are not names with numbers")
    return tuple(sorted(((k, float(v)) for k, v in value.items()), key=lambda kv: kv[1]))


def _pair(value: Any, what: str, open_ends: tuple[float, float]) -> tuple[float, float]:
    if value is None:
        return open_ends
    if not (isinstance(value, list) and len(value) == 2):
        raise ValueError(f"{what} in its {COLUMNS_KEY} metadata is not [lo, hi]")
    return tuple(end if x is None else _bound(x, what) for x, end in zip(value, open_ends))  # type: ignore


class Table:
    """A step table read back: column specs, run metadata, and values as NumPy."""

    def __init__(self, path: str, arrow: pa.Table, metadata: dict, complete: Optional[bool],
                 column_table: Optional[bytes] = None):
        self.path = path
        self.arrow = arrow
        self.metadata = metadata
        self.complete = complete
        self.columns = _with_column_table(path, _specs(path, arrow), column_table)

    @property
    def num_rows(self) -> int:
        return self.arrow.num_rows

    def names(self, prefix: Optional[str] = None) -> list[str]:
        """Column names, or the names after `prefix.` (e.g. names("obs") -> ["speed", ...])."""
        if prefix is None:
            return list(self.columns)
        return [n[len(prefix) + 1:] for n in self.columns if n.startswith(prefix + ".")]

    def column(self, name: str) -> np.ndarray:
        """Values of one column, shape (rows, *shape)."""
        if name not in self.columns:
            raise TableError(f'{self.path} has no column "{name}"; it has: {", ".join(self.columns)}')
        spec = self.columns[name]
        chunks = self.arrow.column(name).chunks
        if not chunks:
            return np.zeros((0,) + spec.shape, np.dtype(spec.dtype))
        arr = pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0]
        if spec.shape:
            return _numpy(_leaves(arr)).reshape((len(arr),) + spec.shape)
        return _numpy(arr)

    @property
    def episodes(self) -> np.ndarray:
        """The distinct episode indices, in order."""
        return np.unique(self.column("episode")) if "episode" in self.columns else np.zeros(0, np.int32)


def read_table(path: str, columns: Optional[Sequence[str]] = None) -> Table:
    """Read a step table (all columns, or only `columns`). Raises `TableError`
    with a readable message naming the file for a missing, truncated, damaged
    (a data page failing its checksum) or non-Parquet file, and for a table that
    is Parquet but not a step table (duplicate columns, a column whose values do
    not match its shape, malformed polc metadata)."""
    if not os.path.exists(path):
        raise TableError(f"cannot read '{path}': no such file")
    try:
        f = _pq().ParquetFile(path, page_checksum_verification=True)
        kv = f.metadata.metadata or {}
        arrow = f.read(columns=list(columns) if columns is not None else None)
    except (pa.ArrowException, OSError, ValueError) as e:  # ValueError: a damaged footer's non-UTF-8 names
        if "checksum" in str(e).lower() or "page integrity" in str(e).lower():
            raise TableError(f"'{path}' is damaged: a data page fails its checksum ({_reason(e)}); the file "
                             f"changed after it was written, so none of it is used") from None
        raise TableError(f"'{path}' is not a readable Parquet table: {_reason(e)}. If a run writing it was "
                         f"killed, its finished episodes are in a .partial.parquet file beside it "
                         f"(none survives a SIGKILL).") from None
    try:
        metadata = _json(kv[b"polc"], "its polc metadata") if kv.get(b"polc") else {}
        if not isinstance(metadata, dict):
            raise ValueError("its polc metadata is not a JSON object")
        seeds = metadata.get("seeds", [])
        if not (isinstance(seeds, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in seeds)):
            raise ValueError("its polc metadata's \"seeds\" is not a list of integers")
        complete = _json(kv[b"polc.complete"], "its polc.complete metadata") if b"polc.complete" in kv else None
        if complete not in (None, True, False):
            raise ValueError("its polc.complete metadata is neither true nor false")
    except ValueError as e:
        raise TableError(f"'{path}': {e}") from None
    return Table(path, arrow, metadata, complete, kv.get(COLUMNS_KEY.encode()))


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text.rstrip(".")

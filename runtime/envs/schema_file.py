"""Schema files: the TOML that names the components of a Gymnasium environment's
observation and action spaces for Pol (`--schema FILE.toml`, or a task folder's
`env.toml`). The contract is in docs/environments.md:

    env = "gym:LunarLanderContinuous-v3"   # optional (a task folder's env.toml names its env)
    [kwargs]                               # optional: keyword arguments of gymnasium.make
    [obs.x]                                # one table per field; the name is the .pol name
    index = 0                              # flat Box: an int, or [start, stop] (a vector slice)
    range = [-1.5, 1.5]                    # optional; default: the Box bounds
    doc = "horizontal position"
    unit = "m"                             # optional, appended to the doc
    # echoes = "main"                      # optional, [obs] only: the action(s) it echoes (W0509)
    # hidden = true                        # optional, [obs] only: privileged, for the expert and the trace
    [actions.main]
    index = 0

For a `Dict` space each table's name is a key of the space (no `index`). Every
mistake is a `SchemaFileError` naming the file and the line.

This module only reads TOML into plain data (`SchemaFile`); `gym_env.py` matches it
against the spaces (`layout_of`).
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Optional

from polc.text import interval

from .errors import SchemaFileError

FIELD_KEYS = ("index", "range", "doc", "unit", "echoes", "hidden")
TOP_KEYS = ("env", "kwargs", "max_steps", "solved_at", "metric", "obs", "actions")
MAX_STEPS = 1_000_000  # an episode's step limit: past this one episode would run for hours
METRIC_KEYS = ("function", "name", "reduce", "higher_is_better", "doc", "unit")


@dataclass(frozen=True)
class FieldEntry:
    """One `[obs.NAME]` or `[actions.NAME]` table as written."""

    name: str
    index: Optional[tuple[int, int]]  # [start, stop) in the flat Box; None for a Dict key
    scalar: bool  # `index = 3` (shape ()) rather than `index = [3, 4]` (shape (1,))
    lo: Optional[float]
    hi: Optional[float]
    doc: str
    line: int  # of the table header
    key_lines: tuple[tuple[str, int], ...] = ()  # (key, line) of each key written
    echoes: tuple[str, ...] = ()  # `echoes = "steer"` or ["gas", "brake"]: the actions it echoes
    hidden: bool = False  # `hidden = true`: privileged (the expert and the trace read it, a policy may not)

    def line_of(self, key: str) -> int:
        """The line of `key` in this table (the header's when it is not written)."""
        return dict(self.key_lines).get(key, self.line)


@dataclass(frozen=True)
class SchemaFile:
    path: str
    env: Optional[str]
    kwargs: dict = field(default_factory=dict)
    max_steps: Optional[int] = None
    obs: tuple[FieldEntry, ...] = ()
    actions: tuple[FieldEntry, ...] = ()
    text: str = ""
    metric: Optional[dict] = None  # the [metric] table, checked: function, name, reduce, higher_is_better, ...
    solved_at: Optional[float] = None


def _pol_name_pattern() -> re.Pattern:
    """The Pol grammar's NAME terminal (identifiers minus its keywords), read from the grammar."""
    text = resources.files("polc.grammar").joinpath("pol.lark").read_text(encoding="utf-8")
    m = re.search(r"^NAME:\s*/(.*)/\s*$", text, re.MULTILINE)
    return re.compile(m.group(1) if m else r"[A-Za-z_][A-Za-z_0-9]*")


_NAME = _pol_name_pattern()


def is_pol_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name))


class _Lines:
    """Where tables and keys are in the TOML text (tomllib keeps no positions)."""

    _HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"'.]+)\s*=")

    def __init__(self, text: str):
        self.tables: dict[str, int] = {}
        self.keys: dict[tuple[str, str], int] = {}
        current = ""
        for i, line in enumerate(text.splitlines(), 1):
            m = self._HEADER.match(line)
            if m:
                current = re.sub(r"\s*\.\s*", ".", m.group(1)).replace('"', "").replace("'", "")
                self.tables.setdefault(current, i)
                continue
            m = self._KEY.match(line)
            if m:
                key = m.group(1).replace('"', "").replace("'", "")
                self.keys.setdefault((current, key), i)

    def of(self, table: str, key: Optional[str] = None) -> Optional[int]:
        if key is not None and (table, key) in self.keys:
            return self.keys[(table, key)]
        return self.tables.get(table)


def _number(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _entry(path: str, lines: _Lines, kind: str, name: str, value: Any) -> FieldEntry:
    table = f"{kind}.{name}"
    line = lines.of(table) or lines.of(kind, name)

    def err(key: Optional[str], msg: str) -> SchemaFileError:
        return SchemaFileError(path, lines.of(table, key) if key else line, msg)

    if not is_pol_name(name):
        raise err(None, f'"{name}" is not a valid Pol name (letters, digits and _, not starting with a digit, '
                        f"not a keyword); rename the table [{table}]")
    if not isinstance(value, dict):
        raise err(None, f"{table} must be a table ([{table}] with index, range, doc), not a {type(value).__name__}")
    for key in value:
        if key not in FIELD_KEYS:
            raise err(key, f'unknown key "{key}" in [{table}]; the keys are {", ".join(FIELD_KEYS)}')
    index, scalar = None, False
    if "index" in value:
        raw = value["index"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            index, scalar = (raw, raw + 1), True
        elif (isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                               for x in raw)):
            index = (raw[0], raw[1])
        else:
            raise err("index", f"index of [{table}] must be an int or [start, stop], not {raw!r}")
        if index[0] < 0 or index[1] <= index[0]:
            raise err("index", f"index of [{table}] must be >= 0 with stop > start, not {raw!r}")
    lo = hi = None
    if "range" in value:
        raw = value["range"]
        nums = [_number(x) for x in raw] if isinstance(raw, list) and len(raw) == 2 else [None]
        if any(x is None for x in nums) or any(math.isnan(x) for x in nums) or nums[0] >= nums[1]:
            raise err("range", f"range of [{table}] must be [lo, hi] with lo < hi, not {raw!r}")
        lo, hi = nums
    doc = value.get("doc", "")
    unit = value.get("unit", "")
    if not isinstance(doc, str) or not isinstance(unit, str):
        raise err("doc" if not isinstance(doc, str) else "unit", f"doc and unit of [{table}] must be strings")
    if unit:
        doc = f"{doc} [{unit}]" if doc else f"[{unit}]"
    echoes = _echoes(value.get("echoes", ()), kind, table, err)
    hidden = value.get("hidden", False)
    if not isinstance(hidden, bool):
        raise err("hidden", f"hidden of [{table}] must be true or false, not {hidden!r:.40}")
    if hidden and kind != "obs":
        raise err("hidden", f"hidden belongs in an [obs] table (an observation only the expert and the trace "
                            f"see), not [{table}]: every action is the policy's")
    if hidden and echoes:
        raise err("hidden", f"[{table}] is both hidden and echoes an action; a policy never reads a hidden "
                            "field, so drop echoes")
    key_lines = tuple((k, lines.of(table, k) or line or 0) for k in value)
    return FieldEntry(name, index, scalar, lo, hi, doc, line or 0, key_lines, echoes, hidden)


def _echoes(raw: Any, kind: str, table: str, err) -> tuple[str, ...]:
    """`echoes = "steer"` or `["gas", "brake"]` of an [obs] table: the action names
    (checked against the [actions] tables by `read_schema_file`)."""
    if raw == ():
        return ()
    if kind != "obs":
        raise err("echoes", f"echoes belongs in an [obs] table (the observation that echoes an action), not [{table}]")
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise err("echoes", f'echoes of [{table}] must name an action, "steer", or a list of them, not {raw!r}')
    return tuple(names)


def read_schema_file(path: str) -> SchemaFile:
    """Parse and check a schema file on its own (keys, types, names, ranges); the
    match against an environment's spaces is `gym.layout_of`."""
    try:
        with open(path, "rb") as f:
            raw_bytes = f.read()
    except OSError as e:
        raise SchemaFileError(path, None, f"cannot read it: {e.strerror or e}") from None
    text = raw_bytes.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise SchemaFileError(path, int(m.group(1)) if m else None, f"not valid TOML: {e}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise SchemaFileError(path, None, "not a schema file: its arrays or inline tables nest too deeply "
                                          "for tomllib to read (a schema file nests at most two levels)") from None
    lines = _Lines(text)
    for key in data:
        if key not in TOP_KEYS:
            raise SchemaFileError(path, lines.of(key) or lines.of("", key),
                                  f'unknown key "{key}"; a schema file has {", ".join(TOP_KEYS)}')
    env = data.get("env")
    if env is not None and not isinstance(env, str):
        raise SchemaFileError(path, lines.of("", "env"), 'env must be a string such as "gym:Pendulum-v1"')
    kwargs = data.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise SchemaFileError(path, lines.of("", "kwargs"), "kwargs must be a table of gymnasium.make arguments")
    max_steps = data.get("max_steps")
    if max_steps is not None and (not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1
                                  or max_steps > MAX_STEPS):
        raise SchemaFileError(path, lines.of("", "max_steps"), f"max_steps must be a positive int of at most "
                                                               f"{MAX_STEPS:,}, not {max_steps!r:.40}")
    metric = _metric(path, lines, data.get("metric"))
    solved_at = data.get("solved_at")
    if solved_at is not None and _number(solved_at) is None:
        raise SchemaFileError(path, lines.of("", "solved_at"), "solved_at must be a number (the score at or above "
                                                               "which an episode counts as solved)")
    out = {}
    for kind in ("obs", "actions"):
        tables = data.get(kind, {})
        if not isinstance(tables, dict):
            raise SchemaFileError(path, lines.of("", kind), f"{kind} must hold one table per field, [{kind}.NAME]")
        out[kind] = tuple(_entry(path, lines, kind, n, v) for n, v in tables.items())
    if not out["actions"]:
        raise SchemaFileError(path, None, "it declares no actions; add one [actions.NAME] table per action "
                                          "component (index = ...)")
    if not out["obs"]:
        raise SchemaFileError(path, None, "it declares no observations; add [obs.NAME] tables (index = ...)")
    if all(e.hidden for e in out["obs"]):
        raise SchemaFileError(path, out["obs"][0].line_of("hidden"), "every observation is hidden, so a policy "
                                                                     "would see nothing; leave at least one "
                                                                     "[obs] table without hidden = true")
    actions = [e.name for e in out["actions"]]
    for e in out["obs"]:
        for a in e.echoes:
            if a not in actions:
                raise SchemaFileError(path, e.line_of("echoes"), f'[obs.{e.name}] echoes "{a}", which is not an action '
                                                                 "of this file; its actions are " + ", ".join(actions))
    return SchemaFile(path, env, kwargs, max_steps, out["obs"], out["actions"], text, metric,
                      None if solved_at is None else float(solved_at))


def line_of_key(file: SchemaFile, table: str, key: str) -> Optional[int]:
    """The line of `key` in `[table]` of the file (None when it is not found)."""
    return _Lines(file.text).of(table, key)


def _metric(path: str, lines: _Lines, value: Any) -> Optional[dict]:
    """The [metric] table: `function = "module:fn"` (columns -> one value per step;
    default: the reward), `reduce` (sum, min, max, mean), `higher_is_better`, `name`."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SchemaFileError(path, lines.of("", "metric"), "metric must be a table ([metric] with function, reduce, "
                                                            "higher_is_better, name)")
    for key in value:
        if key not in METRIC_KEYS:
            raise SchemaFileError(path, lines.of("metric", key), f'unknown key "{key}" in [metric]; the keys are '
                                                                 + ", ".join(METRIC_KEYS))
    if "function" in value and (not isinstance(value["function"], str) or ":" not in value["function"]):
        raise SchemaFileError(path, lines.of("metric", "function"), 'function of [metric] must be "module:function"')
    if value.get("reduce", "sum") not in ("sum", "min", "max", "mean"):
        raise SchemaFileError(path, lines.of("metric", "reduce"), "reduce of [metric] must be sum, min, max or mean")
    if not isinstance(value.get("higher_is_better", True), bool):
        raise SchemaFileError(path, lines.of("metric", "higher_is_better"), "higher_is_better must be true or false")
    return dict(value)


def starter_toml(env: str, obs: list[tuple[str, Any, float, float, str]],
                 actions: list[tuple[str, Any, float, float, str]]) -> str:
    """A schema file to start from: one table per (name, index, lo, hi, doc)."""
    def table(kind: str, rows) -> list[str]:
        out = []
        for name, index, lo, hi, doc in rows:
            out += [f"[{kind}.{name}]", f"index = {index}"]
            if math.isfinite(lo) and math.isfinite(hi):
                out.append(f"range = {interval(lo, hi)}")
            else:
                out.append(f"# range = [lo, hi]   (the space gives {interval(lo, hi)})")
            out += [f'doc = "{doc}"', ""]
        return out

    head = [f'env = "{env}"', "# Rename each table to what the component means (the name is the .pol name),",
            "# give its range and a doc, and merge components into vectors with index = [start, stop].", ""]
    return "\n".join(head + table("obs", obs) + table("actions", actions)).rstrip() + "\n"


__all__ = ["FieldEntry", "MAX_STEPS", "SchemaFile", "SchemaFileError", "is_pol_name", "line_of_key",
           "read_schema_file", "starter_toml"]

"""Demonstrations a user already has: `polc demos ENV --from-parquet FILE -o OUT`
turns any Parquet table whose columns are named as the environment's schema says
into a polc demonstration table, and `polc demos ENV --from-minari DATASET -o OUT`
a locally installed Minari dataset (Farama's offline-RL format) of that environment.

Columns read: every observation and action, as `obs.<name>` / `action.<name>` or
plain `<name>` (a scalar column, or a list column of the field's size for an
array field, row-major); optionally `episode` (default: one episode), `reward`
(default 0), `terminated` and `truncated` (default: the last row of an episode
is truncated). Rows stay in file order within an episode. A missing column, a
wrong size or a non-finite value is a `TableImportError` naming the column.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np


class TableImportError(Exception):
    """The user's table cannot be read as a demonstration; the message says why."""


def _values(table: Any, names: list[str], size: int, rows: int, path: str) -> np.ndarray:
    import pyarrow as pa

    name = next((n for n in names if n in table.column_names), None)
    if name is None:
        raise TableImportError(f"{path} has no column {' or '.join(map(repr, names))} (it has: "
                               f"{', '.join(table.column_names)})")
    col = table.column(name).combine_chunks()
    if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type) or pa.types.is_large_list(col.type):
        lengths = np.asarray(col.value_lengths().to_numpy(zero_copy_only=False)) if not \
            pa.types.is_fixed_size_list(col.type) else np.full(rows, col.type.list_size)
        if np.any(lengths != size):
            raise TableImportError(f"column {name!r} of {path} holds lists of length {sorted(set(lengths.tolist()))}; "
                                   f"the field needs {size} values per row")
        flat = np.asarray(col.flatten().to_numpy(zero_copy_only=False), np.float64)
        out = flat.reshape(rows, size)
    else:
        if size != 1:
            raise TableImportError(f"column {name!r} of {path} is a scalar; the field needs {size} values per row "
                                   "(a list column)")
        try:
            out = np.asarray(col.to_numpy(zero_copy_only=False), np.float64).reshape(rows, 1)
        except (TypeError, ValueError) as e:
            raise TableImportError(f"column {name!r} of {path} is not numeric ({col.type}): {e}") from None
    if not np.all(np.isfinite(out)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(out), axis=1))[0])
        raise TableImportError(f"column {name!r} of {path} has a non-finite value at row {bad}")
    return out


def read_user_table(schema: Any, path: str) -> Iterator[dict[str, np.ndarray]]:
    """The episodes of `path` as step-table columns (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise TableImportError(f"cannot read '{path}' as Parquet: {e}") from None
    rows = table.num_rows
    if rows == 0:
        raise TableImportError(f"{path} has no rows")
    fields = {}
    for prefix, group in (("obs", schema.obs), ("action", schema.actions)):
        for f in group:
            v = _values(table, [f"{prefix}.{f.name}", f.name], f.size, rows, path)
            fields[f"{prefix}.{f.name}"] = v.reshape((rows,) + tuple(f.shape)).astype(np.float32)
    episode = (_values(table, ["episode"], 1, rows, path)[:, 0].astype(np.int64)
               if "episode" in table.column_names else np.zeros(rows, np.int64))
    reward = (_values(table, ["reward"], 1, rows, path)[:, 0].astype(np.float32)
              if "reward" in table.column_names else np.zeros(rows, np.float32))
    flags = {k: _values(table, [k], 1, rows, path)[:, 0].astype(bool) for k in ("terminated", "truncated")
             if k in table.column_names}
    for index, ep in enumerate(dict.fromkeys(episode.tolist())):
        idx = np.flatnonzero(episode == ep)
        n = len(idx)
        term = flags["terminated"][idx] if "terminated" in flags else np.zeros(n, bool)
        trunc = flags["truncated"][idx] if "truncated" in flags else np.arange(n) == n - 1
        cols = {k: v[idx] for k, v in fields.items()}
        cols.update(episode=np.full(n, index, np.int32), step=np.arange(n, dtype=np.int32),
                    seed=np.full(n, -1, np.int64), reward=reward[idx], terminated=term, truncated=trunc & ~term)
        yield cols


def _schema_env(env: Any):
    """`env`'s `SchemaEnv` (which names a gym env's raw observations and actions), or None
    for an environment whose observations and actions are already dicts in its names."""
    from ..envs.gym_env import SchemaEnv

    while env is not None:
        if isinstance(env, SchemaEnv):
            return env
        env = getattr(env, "env", None)
    return None


def _named(raw: Any, fields: Any, convert, n: int) -> dict[str, np.ndarray]:
    """Per-step raw values (an array of n rows, or a dict of them) -> {field name: (n, *shape)}."""
    if isinstance(raw, dict):
        return {f.name: np.asarray(raw[f.name], np.float32).reshape((n,) + tuple(f.shape)) for f in fields}
    rows = [convert(np.asarray(raw)[i]) for i in range(n)]
    return {f.name: np.stack([np.asarray(r[f.name], np.float32).reshape(f.shape) for r in rows]) for f in fields}


def read_minari(spec: Any, dataset_id: str) -> Iterator[dict[str, np.ndarray]]:
    """The episodes of the local Minari dataset `dataset_id` as step-table columns: each
    step's observation (before its action), the action, reward and end flags; the dataset's
    observations and actions are named by the environment's schema (a flat Box through the
    schema file, a Dict by its keys)."""
    try:
        import minari
    except ImportError:
        raise TableImportError("--from-minari needs the minari package (pip install minari)") from None
    try:
        dataset = minari.load_dataset(dataset_id, download=False)
    except Exception as e:  # noqa: BLE001 - minari raises several kinds; all mean "not usable here"
        local = ", ".join(sorted(minari.list_local_datasets())) or "none"
        raise TableImportError(f"no local Minari dataset {dataset_id!r} ({type(e).__name__}: {e}); polc never "
                               f"downloads one. Local datasets: {local}") from None
    env = spec.make()
    try:
        yield from _minari_episodes(dataset, dataset_id, spec, _schema_env(env))
    finally:
        env.close()


def _minari_episodes(dataset: Any, dataset_id: str, spec: Any, wrapper: Any) -> Iterator[dict[str, np.ndarray]]:
    obs_of = (lambda raw: wrapper.observation(raw)) if wrapper is not None else None
    act_of = (lambda raw: wrapper.named_action(raw)) if wrapper is not None else None
    index = 0
    for ep in dataset.iterate_episodes():
        n = len(ep.actions) if not isinstance(ep.actions, dict) else len(next(iter(ep.actions.values())))
        if n == 0:
            continue
        raw_obs = ep.observations
        raw_obs = {k: np.asarray(v)[:n] for k, v in raw_obs.items()} if isinstance(raw_obs, dict) \
            else np.asarray(raw_obs)[:n]  # n + 1 observations: the last follows the last action
        try:
            obs = _named(raw_obs, spec.schema.obs, obs_of, n)
            act = _named(ep.actions, spec.schema.actions, act_of, n)
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise TableImportError(f"episode {ep.id} of Minari dataset {dataset_id!r} does not fit the "
                                   f"environment's schema ({type(e).__name__}: {e}); is it a dataset of "
                                   f"{spec.schema.name}?") from None
        cols = {**{"obs." + k: v for k, v in obs.items()}, **{"action." + k: v for k, v in act.items()}}
        for k, v in cols.items():
            if not np.all(np.isfinite(v)):
                raise TableImportError(f"episode {ep.id} of Minari dataset {dataset_id!r} has a non-finite {k}")
        term = np.asarray(ep.terminations, bool).reshape(n)
        trunc = np.asarray(ep.truncations, bool).reshape(n)
        cols.update(episode=np.full(n, index, np.int32), step=np.arange(n, dtype=np.int32),
                    seed=np.full(n, -1, np.int64), reward=np.asarray(ep.rewards, np.float32).reshape(n),
                    terminated=term, truncated=trunc & ~term)
        index += 1
        yield cols
    if index == 0:
        raise TableImportError(f"Minari dataset {dataset_id!r} holds no episode with a step")


__all__ = ["TableImportError", "read_minari", "read_user_table"]

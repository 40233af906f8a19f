"""Expert demonstrations: run an environment's privileged expert and write the
step table (`polc demos ENV --episodes N --seed S -o FILE`).

Episode k uses environment seed S + k; demonstration seeds must lie in the
environment's `demo_seeds` (0..999), which evaluation seeds never overlap.
Row t holds the observation the expert saw, the action it took, and the
reward / terminated / truncated that action produced (the final observation,
after which nothing acts, is not a row). Deterministic by seed.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np

from ..io.table import ColumnSpec, TableWriter, step_columns


class DemoEpisode(NamedTuple):
    seed: int
    ret: float
    length: int


def demo_columns(schema: Any) -> tuple[ColumnSpec, ...]:
    body = [ColumnSpec("obs." + f.name, tuple(f.shape), "float32", f.doc, f.lo, f.hi) for f in schema.obs]
    body += [ColumnSpec("action." + f.name, tuple(f.shape), "float32", f.doc, f.lo, f.hi) for f in schema.actions]
    return step_columns(body)


def run_expert(spec: Any, seed: int, index: int = 0) -> tuple[DemoEpisode, dict[str, np.ndarray]]:
    """One expert episode: its summary and its step-table columns."""
    env = spec.make()
    try:
        expert = spec.expert(env)
        expert.reset()
        obs, _ = env.reset(seed=seed)
        rows: dict[str, list] = {f"obs.{f.name}": [] for f in spec.schema.obs}
        rows.update({f"action.{f.name}": [] for f in spec.schema.actions})
        rewards, ends = [], []
        done = False
        while not done:
            action = expert.act(env)
            for f in spec.schema.obs:
                rows[f"obs.{f.name}"].append(obs[f.name])
            for f in spec.schema.actions:
                rows[f"action.{f.name}"].append(np.asarray(action[f.name], np.float32).reshape(f.shape))
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(reward)
            ends.append((terminated, truncated))
            done = terminated or truncated
    finally:
        env.close()
    n = len(rewards)
    e = np.asarray(ends, bool).reshape(n, 2)
    columns = {k: np.asarray(v, np.float32) for k, v in rows.items()}
    columns.update(episode=np.full(n, index, np.int32), step=np.arange(n, dtype=np.int32),
                   seed=np.full(n, seed, np.int64), reward=np.asarray(rewards, np.float32),
                   terminated=e[:, 0], truncated=e[:, 1])
    return DemoEpisode(seed, float(np.sum(np.asarray(rewards, np.float64))), n), columns


def write_demos(spec: Any, seeds: Sequence[int], writer: TableWriter,
                on_episode: Optional[Callable[[DemoEpisode], None]] = None) -> list[DemoEpisode]:
    """Run the expert once per seed, writing each episode to `writer` (made with
    `demo_columns(spec.schema)`); the caller closes it."""
    out = []
    for k, seed in enumerate(seeds):
        ep, columns = run_expert(spec, int(seed), k)
        writer.write_episode(columns)
        out.append(ep)
        if on_episode is not None:
            on_episode(ep)
    return out

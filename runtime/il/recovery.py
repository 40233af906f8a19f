"""Several demonstrations fitted as one: the clean lap and DART-style recovery laps
(`polc demos --perturb`) beside it.

A clean demonstration never leaves the expert's path, so it cannot say what to do
off it, and an observation that echoes the previous action (an actuator's state)
predicts the action perfectly there. Recovery laps, recorded with the expert's
action perturbed while its intended action is what is imitated, break both:
`polc fit --demos clean.parquet dart.parquet` fits to all of their rows.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .train import Demos


def concat_demos(parts: Sequence[Demos]) -> Demos:
    """The rows of every part, in order; episode ids renumbered so that no two parts share one."""
    if not parts:
        raise ValueError("no demonstrations to concatenate")
    episodes, offset = [], 0
    for d in parts:
        ep = np.asarray(d.episode, np.int64)
        _, dense = np.unique(ep, return_inverse=True)  # 0..k-1 in each part, whatever its ids
        episodes.append(dense + offset)
        offset += int(dense.max()) + 1 if len(dense) else 0
    return Demos({k: np.concatenate([d.obs[k] for d in parts]) for k in parts[0].obs},
                 {k: np.concatenate([d.actions[k] for d in parts]) for k in parts[0].actions},
                 np.concatenate(episodes))


def used_seeds(metadata: Sequence[dict]) -> list[int]:
    """Every seed the tables' metadata say they were recorded on (the closed-loop check skips them)."""
    out: list[int] = []
    for m in metadata:
        out += [s for s in (m or {}).get("seeds") or [] if isinstance(s, int) and s not in out]
    return out


__all__ = ["concat_demos", "used_seeds"]

"""The declared weights' closed-loop score, kept on disk between `polc fit` runs.

`polc fit`'s closed-loop check scores the declared and the fitted weights on the same
training seeds (`closed_loop.py`). The declared half depends only on the source, the
environment, the seeds and the code that simulates and scores them, so refitting a
structure (another demonstration, other options) would simulate it again for the same
numbers. It is kept here, one small JSON file per

    the policy's structure (`step.structure_key`) and declared params (their bytes),
    the environment (name, step limit, metric), the seeds, the number of environments
    stepped together, and a digest of polc's own source and the simulator's version

so any change to one of them is a miss, never a stale score. The files live beside the
compile cache (`$XDG_CACHE_HOME/polc/scores`, `jaxcache.cache_root()`'s sibling) and the
cache is off when the compile cache is (`POLC_NO_COMPILE_CACHE=1`): the command decides
and passes a `ScoreCache` (or None) down. A file that cannot be read or written is a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np


@dataclass(frozen=True)
class ScoreCache:
    """A directory of cached closed-loop scores (see the module docstring)."""
    directory: Path

    def get(self, key: str) -> Optional[np.ndarray]:
        """The scores per seed stored under `key`, or None."""
        try:
            with open(self.directory / f"{key}.json", encoding="utf-8") as f:
                return np.asarray(json.load(f)["scores"], np.float64)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, scores: np.ndarray) -> None:
        """Store `scores` under `key` (atomically; silently nothing when it cannot)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".score-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"scores": [float(x) for x in np.asarray(scores).ravel()]}, f)
            os.replace(tmp, self.directory / f"{key}.json")
        except OSError:
            pass


def default_cache() -> Optional[ScoreCache]:
    """The cache `polc fit` uses: beside the compile cache, off when that is turned off."""
    from . import jaxcache

    if jaxcache.disabled():
        return None
    return ScoreCache(jaxcache.cache_root().parent / "scores")


def score_key(policy, params, spec: Any, seeds: Sequence[int], n_envs: int) -> str:
    """The digest a declared score is stored under (see the module docstring)."""
    from . import step

    metric = getattr(spec, "metric", None)
    leaves = [np.asarray(x) for x in _leaves(params)]
    h = hashlib.sha256()
    for part in (step.structure_key(policy.program), spec.schema.name, getattr(spec, "max_steps", None),
                 repr(metric), list(int(s) for s in seeds), int(n_envs), _code_digest()):
        h.update(json.dumps(part, default=repr).encode() + b"\0")
    for x in leaves:
        h.update(str((x.dtype, x.shape)).encode() + np.ascontiguousarray(x).tobytes())
    return h.hexdigest()[:40]


def _leaves(params) -> list:
    import jax

    return jax.tree.leaves(params)


def _code_digest() -> str:
    from ..io.executables import code_digest  # shared with the executables kept on disk

    return code_digest()


__all__ = ["ScoreCache", "default_cache", "score_key"]

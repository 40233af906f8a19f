"""An environment spec with a shorter episode limit (`--quick`), picklable and light.

Rollouts spawn worker processes that unpickle the spec and so import this module:
it imports nothing but the standard library.
"""

from __future__ import annotations

from typing import Any, Optional


class ShortEpisodes:
    """`spec` with episodes cut at `max_steps` (gymnasium's TimeLimit, so they end as
    truncated); every other attribute is the wrapped spec's."""

    def __init__(self, spec: Any, max_steps: int):
        self.spec = spec
        self.max_steps = int(max_steps)

    def make(self, seed: Optional[int] = None, render_mode: Optional[str] = None, **kw: Any):
        return self.spec.make(seed=seed, render_mode=render_mode, max_episode_steps=self.max_steps, **kw)

    def __getattr__(self, name: str) -> Any:
        if name == "spec":  # not set yet while unpickling
            raise AttributeError(name)
        return getattr(self.spec, name)

"""The environments polc knows, by name: `EnvSpec` (schema, maker, expert, metric,
seed ranges) and the registry that `get` and `names` read. The built-in environments
are added by the package (`polc.runtime.envs`); others add themselves with `add`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

import gymnasium as gym
import numpy as np

from polc.diagnostics import Diagnostic
from polc.typed import TypedProgram

from .finite import FiniteActions
from .metric import RETURN, Metric
from .schema import EnvSchema, check_program_against, unknown_env

DEMO_SEEDS = range(0, 1000)
EVAL_SEEDS = range(10_000, 20_000)


class Expert(Protocol):
    """A privileged controller: `act` may read the simulator through `env.unwrapped`."""

    def reset(self) -> None: ...

    def act(self, env: gym.Env) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class EnvSpec:
    """An environment polc knows: its schema, how to make it, its expert, and
    how an episode is scored (`metric`: the return unless the paper says otherwise;
    `solved_at` and `success` when the environment defines them)."""

    schema: EnvSchema
    max_steps: int
    _expert: Callable[[gym.Env], Expert]
    demo_seeds: range = DEMO_SEEDS
    eval_seeds: range = EVAL_SEEDS
    metric: Metric = RETURN
    # The score at or above which an episode counts as solved (Car Racing: 900,
    # gymnasium's reward_threshold); `polc eval` reports the share of episodes there.
    solved_at: Optional[float] = None
    # The info key of a per-step success flag (Meta-World's "success"): an episode
    # succeeds when any of its steps reports it; `polc eval` reports the success rate.
    success: Optional[str] = None

    @property
    def name(self) -> str:
        return self.schema.name

    def make(self, seed: Optional[int] = None, render_mode: Optional[str] = None, **kw: Any) -> gym.Env:
        """`gymnasium.make(schema.env_id)` with its time limit; `seed` seeds the first reset().
        A non-finite action raises `NonFiniteAction` instead of stepping it (`finite.py`)."""
        return FiniteActions(gym.make(self.schema.env_id, render_mode=render_mode, seed=seed, **kw))

    def expert(self, env: gym.Env) -> Expert:
        return self._expert(env)


_REGISTRY: dict[str, EnvSpec] = {}


def add(spec: EnvSpec) -> EnvSpec:
    """Make `spec` known to `get` under its schema's name (idempotent: a name keeps its first spec)."""
    return _REGISTRY.setdefault(spec.name, spec)


def names() -> list[str]:
    """The names `get` knows."""
    return sorted(_REGISTRY)


def get(name: str) -> EnvSpec:
    """The environment called `name`; KeyError listing the known names otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f'unknown environment "{name}"; known: {", ".join(names())}') from None




def check_against_env(tp: TypedProgram, env_name: str) -> list[Diagnostic]:
    """`polc check --env NAME FILE`: located diagnostics for `tp`'s `obs` and `action`
    declarations against environment `env_name`'s schema; an unknown name gives one
    error (E0500) listing the environments polc knows."""
    if env_name not in _REGISTRY:
        return [unknown_env(env_name, names())]
    return check_program_against(tp, get(env_name).schema)


__all__ = ["DEMO_SEEDS", "EVAL_SEEDS", "EnvSpec", "Expert", "add", "check_against_env", "get", "names"]

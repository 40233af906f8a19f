"""Environments polc policies run in, each publishing an observation/action schema.

    spec = polc.runtime.envs.get("car_racing")
    env = spec.make(seed=10_000)              # a gymnasium.Env with dict obs and dict actions
    obs, _ = env.reset()
    expert = spec.expert(env)                 # privileged controller (reads env.unwrapped)
    obs, reward, terminated, truncated, info = env.step(expert.act(env))

Importing this package registers every environment with gymnasium
("car_racing" is `gymnasium.make("polc/CarRacing-v0")`, "door" is
`gymnasium.make("polc/DoorOpen-v0")`, Meta-World door-open-v3; "door_mjx" is
`gymnasium.make("polc/DoorMJX-v0")`, polc's own MJX door scene stepped by C
MuJoCo, whose MJX twin `door_mjx.DoorMJX` is a brax Env for `polc rl --engine brax`).

Seed policy: demonstrations come from `spec.demo_seeds` (0..999) and evaluation
from `spec.eval_seeds` (10_000 upward), so a policy is never evaluated on a
track it was fitted on. `spec.eval_seeds[:10]` are the usual 10 unseen seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

import gymnasium as gym
import numpy as np

from .car_racing import CAR_RACING
from .door import DOOR, DOOR_METRIC, MAX_STEPS as _DOOR_STEPS
from .door_mjx_scene import DOOR_MJX, DOOR_MJX_METRIC, MAX_STEPS as _DOOR_MJX_STEPS
from .metric import RETURN, Metric
from .schema import EnvSchema, Field, check_program_against

DEMO_SEEDS = range(0, 1000)
EVAL_SEEDS = range(10_000, 20_000)


class Expert(Protocol):
    """A privileged controller: `act` may read the simulator through `env.unwrapped`."""

    def reset(self) -> None: ...

    def act(self, env: gym.Env) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class EnvSpec:
    """An environment polc knows: its schema, how to make it, its expert, and
    how an episode is scored (`metric`: the return unless the paper says otherwise)."""

    schema: EnvSchema
    max_steps: int
    _expert: Callable[[gym.Env], Expert]
    demo_seeds: range = DEMO_SEEDS
    eval_seeds: range = EVAL_SEEDS
    metric: Metric = RETURN

    @property
    def name(self) -> str:
        return self.schema.name

    def make(self, seed: Optional[int] = None, render_mode: Optional[str] = None, **kw: Any) -> gym.Env:
        """`gymnasium.make(schema.env_id)` with its time limit; `seed` seeds the first reset()."""
        return gym.make(self.schema.env_id, render_mode=render_mode, seed=seed, **kw)

    def expert(self, env: gym.Env) -> Expert:
        return self._expert(env)


def _car_racing_expert(env: gym.Env) -> Expert:
    from .car_racing_expert import CarRacingExpert

    return CarRacingExpert()


def _door_expert(env: gym.Env) -> Expert:
    from .door_expert import DoorExpert

    return DoorExpert()


def _door_mjx_expert(env: gym.Env) -> Expert:
    from .door_mjx_gym import DoorMJXExpert

    return DoorMJXExpert()


_CAR_RACING_STEPS = 1000  # gymnasium's CarRacing-v3 TimeLimit; the return depends on it

_REGISTRY: dict[str, EnvSpec] = {
    "car_racing": EnvSpec(CAR_RACING, _CAR_RACING_STEPS, _car_racing_expert),
    "door": EnvSpec(DOOR, _DOOR_STEPS, _door_expert, metric=DOOR_METRIC),
    "door_mjx": EnvSpec(DOOR_MJX, _DOOR_MJX_STEPS, _door_mjx_expert, metric=DOOR_MJX_METRIC),
}

if CAR_RACING.env_id not in gym.registry:
    gym.register(id=CAR_RACING.env_id, entry_point="polc.runtime.envs.car_racing:SemanticCarRacing",
                 max_episode_steps=_CAR_RACING_STEPS, reward_threshold=900,
                 # Its first-step check warns on actions given as Python floats or JAX
                 # arrays; tests/test_env_car_racing.py runs gymnasium's full check_env instead.
                 disable_env_checker=True)

if DOOR.env_id not in gym.registry:  # metaworld's 500-step horizon; the metric is over these steps
    gym.register(id=DOOR.env_id, entry_point="polc.runtime.envs.door:SemanticDoorOpen",
                 max_episode_steps=_DOOR_STEPS, disable_env_checker=True)

if DOOR_MJX.env_id not in gym.registry:
    gym.register(id=DOOR_MJX.env_id, entry_point="polc.runtime.envs.door_mjx_gym:DoorMJXGym",
                 max_episode_steps=_DOOR_MJX_STEPS, disable_env_checker=True)


def names() -> list[str]:
    """The names `get` knows."""
    return sorted(_REGISTRY)


def get(name: str) -> EnvSpec:
    """The environment called `name`; KeyError listing the known names otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f'unknown environment "{name}"; known: {", ".join(names())}') from None


__all__ = ["EnvSchema", "EnvSpec", "Expert", "Field", "Metric", "RETURN", "check_program_against", "get",
           "names", "DEMO_SEEDS", "EVAL_SEEDS"]

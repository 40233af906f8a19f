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

Any other Gymnasium environment: `get("gym:ID")` (Dict spaces) or
`get("task/env.toml")` (a schema file naming its env); `gym_env.resolve` takes a
schema file and keyword arguments too (docs/environments.md).
"""

from __future__ import annotations

import gymnasium as gym

from .car_racing import CAR_RACING
from .door import DOOR, DOOR_METRIC, MAX_STEPS as _DOOR_STEPS
from .door_mjx_scene import DOOR_MJX, DOOR_MJX_METRIC, MAX_STEPS as _DOOR_MJX_STEPS
from .finite import NonFiniteAction
from .metric import RETURN, Metric
from .registry import DEMO_SEEDS, EVAL_SEEDS, EnvSpec, Expert, add, check_against_env, get, load_schema, names, using
from .errors import EnvError
from . import gym_env as _gym_env  # noqa: F401  (makes get() resolve gym:ID and env.toml names)
from .gym_env import check_against_gym
from .schema import EnvSchema, Field, check_program_against


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

add(EnvSpec(CAR_RACING, _CAR_RACING_STEPS, _car_racing_expert, solved_at=900.0))
add(EnvSpec(DOOR, _DOOR_STEPS, _door_expert, metric=DOOR_METRIC, success="success"))  # metaworld's info flag
add(EnvSpec(DOOR_MJX, _DOOR_MJX_STEPS, _door_mjx_expert, metric=DOOR_MJX_METRIC))

if CAR_RACING.env_id not in gym.registry:
    gym.register(id=CAR_RACING.env_id, entry_point="polc.runtime.envs.car_racing:SemanticCarRacing",
                 max_episode_steps=_CAR_RACING_STEPS, reward_threshold=900,
                 # Its first-step check warns on actions given as Python floats or JAX
                 # arrays; tests/runtime/envs/test_env_car_racing.py runs gymnasium's full check_env instead.
                 disable_env_checker=True)

if DOOR.env_id not in gym.registry:  # metaworld's 500-step horizon; the metric is over these steps
    gym.register(id=DOOR.env_id, entry_point="polc.runtime.envs.door:SemanticDoorOpen",
                 max_episode_steps=_DOOR_STEPS, disable_env_checker=True)

if DOOR_MJX.env_id not in gym.registry:
    gym.register(id=DOOR_MJX.env_id, entry_point="polc.runtime.envs.door_mjx_gym:DoorMJXGym",
                 max_episode_steps=_DOOR_MJX_STEPS, disable_env_checker=True)


__all__ = ["DEMO_SEEDS", "EVAL_SEEDS", "RETURN", "EnvError", "EnvSchema", "EnvSpec", "Expert", "Field", "Metric",
           "NonFiniteAction", "add", "check_against_env", "check_against_gym", "check_program_against", "get",
           "load_schema", "names",
           "using"]

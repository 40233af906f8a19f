"""Two environments polc never registered, for tests/runtime/envs/test_gym_env.py: `gym:` ids
are made by gymnasium's own `module:ID` form (`gym:gym_test_envs:DictReach-v0`).

DictReach has Dict spaces (named by their keys); FlatReach the same point mass
behind flat Boxes (needs a schema file). Both take a `gain` keyword argument."""

from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np

DT, DRAG, LIMIT = 0.1, 0.5, 2.0


class _PointMass(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, gain: float = 2.0, render_mode: Optional[str] = None):
        self.gain = float(gain)
        self.pos = self.vel = self.target = 0.0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.target = float(self.np_random.uniform(-1, 1))
        self.pos, self.vel = float(self.np_random.uniform(-0.2, 0.2)), 0.0
        return self._obs(), {}

    def _move(self, push: float):
        self.vel += DT * (self.gain * float(np.clip(push, -1, 1)) - DRAG * self.vel)
        self.pos += DT * self.vel
        out = abs(self.pos) > LIMIT
        return self._obs(), -10.0 if out else -abs(self.target - self.pos), out, False, {}


class DictReach(_PointMass):
    def __init__(self, gain: float = 2.0, render_mode: Optional[str] = None):
        super().__init__(gain, render_mode)
        self.observation_space = gym.spaces.Dict({
            "pos": gym.spaces.Box(-3, 3, shape=(), dtype=np.float32),
            "vel": gym.spaces.Box(-np.inf, np.inf, shape=(), dtype=np.float32),
            "target": gym.spaces.Box(-1, 1, shape=(), dtype=np.float32)})
        self.action_space = gym.spaces.Dict({"push": gym.spaces.Box(-1, 1, shape=(), dtype=np.float32)})

    def _obs(self):
        return {k: np.asarray(v, np.float32) for k, v in (("pos", self.pos), ("vel", self.vel), ("target", self.target))}

    def step(self, action):
        return self._move(float(action["push"]))


class FlatReach(_PointMass):
    """Observation Box(4): [pos, vel, target, gain]; action Box(1): [push]."""

    def __init__(self, gain: float = 2.0, render_mode: Optional[str] = None):
        super().__init__(gain, render_mode)
        self.observation_space = gym.spaces.Box(np.array([-3, -np.inf, -1, 0], np.float32),
                                                np.array([3, np.inf, 1, 10], np.float32))
        self.action_space = gym.spaces.Box(-1, 1, shape=(1,), dtype=np.float32)

    def _obs(self):
        return np.array([self.pos, self.vel, self.target, self.gain], np.float32)

    def step(self, action):
        return self._move(float(np.asarray(action)[0]))


for _name in ("DictReach", "FlatReach"):
    if f"{_name}-v0" not in gym.registry:
        gym.register(id=f"{_name}-v0", entry_point=f"gym_test_envs:{_name}", max_episode_steps=40)


def expert(obs: dict) -> dict:
    """A PD law in the schema's names."""
    return {"push": float(np.clip(1.5 * (obs["target"] - obs["pos"]) - 1.0 * obs["vel"], -1, 1))}


def raw_expert(obs: dict) -> np.ndarray:
    """The same law, returning FlatReach's own action array."""
    return np.array([expert(obs)["push"]], np.float32)


def raising_expert(obs: dict) -> dict:
    raise RuntimeError("the expert's sensor is unplugged")


def forgetful_expert(obs: dict) -> dict:
    return {"pull": 0.0}


def closeness(columns: dict) -> np.ndarray:
    """A metric per step for the tests' [metric] table: how close the mass is to its target."""
    return -np.abs(columns["obs.target"] - columns["obs.pos"])


# ---- user functions that go wrong (tests/runtime/task/test_task_files.py) ----------------------------------


def three_values_expert(obs: dict) -> np.ndarray:
    """FlatReach's action is Box(1): three values are not its action."""
    return np.array([0.5, 0.0, 0.0], np.float32)


def nan_metric(columns: dict) -> np.ndarray:
    return np.full(len(columns["reward"]), np.nan)


def short_metric(columns: dict) -> np.ndarray:
    return np.ones(3)


def text_metric(columns: dict) -> str:
    return "great"


def raising_metric(columns: dict) -> np.ndarray:
    return columns["obs.no_such"]

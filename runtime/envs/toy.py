"""A trivial environment for fast learning tests: a point mass on a line that
must reach a target (brax keeps trivial environments for the same reason).

State: position `pos`, velocity `vel`, target `target` (drawn per episode from
the seed). One action `push` in [-1, 1] accelerates the mass:
    vel += DT * (GAIN * push - DRAG * vel);   pos += DT * vel
Reward per step: -|target - pos|; leaving [-LIMIT, LIMIT] ends the episode
(terminated) with reward -10. Episodes last at most MAX_STEPS (truncated).

The expert is the PD controller `push = clip(KP * (target - pos) - KD * vel)`,
so a Pol program of that structure can fit its gains back exactly.

Not in the env registry by default: `register()` adds it as "toy_reach" to
the registry of `polc.runtime.envs` (tests call it); `reach_policy()` is the matching Pol source.
"""

from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np

from .registry import EnvSpec, add
from .schema import EnvSchema, Field

NAME = "toy_reach"
ENV_ID = "polc/ToyReach-v0"
DT, GAIN, DRAG = 0.1, 2.0, 0.5
LIMIT, VMAX = 2.0, 3.0
MAX_STEPS = 50
KP, KD = 1.5, 1.0  # the expert's gains

SCHEMA = EnvSchema(
    name=NAME,
    env_id=ENV_ID,
    version="1",
    obs=(
        Field("pos", (), -LIMIT, LIMIT, "position"),
        Field("vel", (), -VMAX, VMAX, "velocity"),
        Field("target", (), -1.0, 1.0, "target position"),
        Field("gap", (2,), -VMAX, VMAX, "target - pos, and -vel"),
        Field("grid", (2, 2), -VMAX, VMAX, "[[pos, vel], [target, target - pos]] (a matrix, for layout tests)"),
    ),
    actions=(Field("push", (), -1.0, 1.0, "acceleration command"),),
)


class PointMass(gym.Env):
    """The environment (see the module docstring). `seed` seeds the first reset."""

    metadata = {"render_modes": []}

    def __init__(self, seed: Optional[int] = None, render_mode: Optional[str] = None):
        self.observation_space = gym.spaces.Dict({
            f.name: gym.spaces.Box(f.lo, f.hi, shape=f.shape, dtype=np.float32) for f in SCHEMA.obs})
        self.action_space = gym.spaces.Dict({
            f.name: gym.spaces.Box(f.lo, f.hi, shape=f.shape, dtype=np.float32) for f in SCHEMA.actions})
        self.render_mode = render_mode
        self._first_seed = seed
        self.pos = self.vel = self.target = 0.0

    def _obs(self) -> dict[str, np.ndarray]:
        p, v, g = self.pos, self.vel, self.target
        raw = {"pos": p, "vel": v, "target": g, "gap": [g - p, -v], "grid": [[p, v], [g, g - p]]}
        return {f.name: np.asarray(np.clip(np.asarray(raw[f.name], np.float32), f.lo, f.hi)) for f in SCHEMA.obs}

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is None and self._first_seed is not None:
            seed = self._first_seed
        self._first_seed = None
        super().reset(seed=seed)
        self.target = float(self.np_random.uniform(-1.0, 1.0))
        self.pos = float(self.np_random.uniform(-0.2, 0.2))
        self.vel = 0.0
        return self._obs(), {}

    def step(self, action: dict[str, Any]):
        push = float(np.clip(np.asarray(action["push"], np.float64), -1.0, 1.0))
        self.vel += DT * (GAIN * push - DRAG * self.vel)
        self.pos += DT * self.vel
        if abs(self.pos) > LIMIT:
            return self._obs(), -10.0, True, False, {}
        return self._obs(), -abs(self.target - self.pos), False, False, {}


class PDExpert:
    """The privileged expert: reads the state through `env.unwrapped`."""

    def reset(self) -> None:
        pass

    def act(self, env: gym.Env) -> dict[str, np.ndarray]:
        e = env.unwrapped
        return {"push": np.float32(np.clip(KP * (e.target - e.pos) - KD * e.vel, -1.0, 1.0))}


def _expert(env: gym.Env) -> PDExpert:
    return PDExpert()


SPEC = EnvSpec(SCHEMA, MAX_STEPS, _expert)

if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="polc.runtime.envs.toy:PointMass", max_episode_steps=MAX_STEPS)


def reach_policy(kp: float = KP, kd: float = KD, std: float = 0.1, name: str = "reach") -> str:
    """Pol source of the expert's structure with the given initial weights and a
    fitted noise std: fitting it to demonstrations should recover the gains."""
    return f'''policy {name} "PD control of the toy point mass"
obs gap : real[2] in [-3, 3] "target - pos, and -vel"
obs vel : real in [-3, 3]   "velocity"
weight kp : real >= 0 = {kp} "push per unit of distance to the target"
weight kd : real >= 0 = {kd} "damping"
weight s  : real in [0.01, 1] = {std} "noise std"
latent err = gap[0] "distance to go"
latent far = abs(err) > 0.5 "more than half a unit away"
action push : real in [-1, 1] = kp * err - kd * vel ~ normal(std = s)
'''


def register() -> EnvSpec:
    """Make "toy_reach" known to `polc.runtime.envs.get` (idempotent)."""
    return add(SPEC)

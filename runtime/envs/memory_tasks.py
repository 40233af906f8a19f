"""Small tasks for the memory construct examples (examples/memory/, issue 38).

Each example program in examples/memory/ shows one kind of memory (a PID's integral, a filtered
velocity, a latch, a timer, a state machine, an oscillator, a previous action). These are the
tasks their observations mean something in: gymnasium environments in NumPy, short episodes (60
to 150 steps), a flat Box observation whose first fields are the policy's and whose last fields are
privileged (an example's `env.toml` names them and marks them `hidden = true`: the expert and the
trace read them, a policy does not; docs/environments.md, "Privileged observations"). Every random
draw comes from the environment's `np_random`, so the seed fixes an episode. A schema file loads
one as `env = "gym:polc.runtime.envs.memory_tasks:ID"` (gymnasium's `MODULE:ID` form).

- `MemoryPointMass-v0` (pid.pol, with a disturbance; lowpass.pol, with a noisy position): a point
  mass on a rail in [-1, 1], pushed by `force` in [-1, 1]: `v += DT * (GAIN * (force + d) - DRAG * v)`,
  `x += DT * v`. Each episode draws a set point and a start in [-0.6, 0.6], a constant force
  disturbance `d ~ U[-max_disturbance, max_disturbance]` and measures the position with Gaussian
  noise of std `noise`. Observation: target, measured position, then (hidden) the true position,
  the velocity and d. Reward: `-|x - target|` per step; 100 steps.
- `MemoryGrip-v0` (latch.pol): a gripper waits for an object handed to it, holds it and lets go
  when it is taken. Its contact force reads vibration in [0, 0.4] while the hand is empty, about
  0.9 when the object arrives, between 0.25 and 0.45 once it is held (the object settles in the
  closed fingers), and below 0.15 after it is taken. No single threshold tells "hold" from
  "empty": squeezing while empty costs `2 * grip`, an open grip (`grip < 0.5`) on a settled object
  drops it (-20, the episode ends), each step holding it earns 1. Hidden: the object is in the
  hand. 60 steps.
- `MemoryBounce-v0` (timer.pol): a ball bounces on a paddle every `P` steps, `P` drawn per
  episode in 12..20 (the first bounce within the first period); the policy senses only the
  contact, at the step of a bounce. The paddle's speed follows `push` with a lag,
  `speed = 0.6 * speed + 0.4 * push`, a bounce earns `2 * speed` and pushing costs `0.1 * push^2`
  per step: the push must come before the bounce, so a policy must know how long it has been
  since the last one. Hidden: the steps to the next bounce. 100 steps.
- `MemoryHeading-v0` (rate_limit.pol): a vehicle's heading error, which `steer` in [-1, 1] turns
  by `0.2 * steer` rad per step; the set heading jumps by 0.5 to 2 rad (either sign) every 20 to
  40 steps. Reward: `-|err| - 10 * (steer - previous steer)^2`: a steering jerk costs. 120 steps.
- `MemoryGait-v0` (oscillator.pol): two joints driven by torques (`w += DT * (4 * torque - w)`,
  angle `+= DT * w`, angles in [-1.5, 1.5]); the body swims forward by the area the joint angles
  sweep when the second lags the first, a travelling wave: reward `a[t-1] * b[t] - a[t] * b[t-1]`
  per step minus `0.01 * |torque|^2`. Nothing hidden. 100 steps.
- `MemoryPickPlace-v0` (pick_place.pol): a 2-D pick and place (x along the table, z height). The
  gripper moves by `0.1 * move` per step on each axis; the object and the goal lie on the table in
  [-0.8, 0.8], at least 0.3 apart. A grasp is tried when the grip (`grip > 0.5`) has been closed
  around the object (within 0.03 horizontally, below 0.02) for `DWELL` = 5 steps in a row; it
  holds with a probability `p ~ U[0.4, 0.9]` drawn per episode, else the object slips when the
  gripper rises. The grip force reads 0.5 while closed around the object on the table, 1 while the
  object is lifted, 0 otherwise: a failed grasp shows only when the load comes on. Success: the
  held object within 0.03 of the goal (reward 1, the episode ends); `give_up > 0.5` ends it with
  0; 150 steps. Hidden: the object is held; p.
"""

from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np

POINT_MASS_ID = "MemoryPointMass-v0"
GRIP_ID = "MemoryGrip-v0"
BOUNCE_ID = "MemoryBounce-v0"
HEADING_ID = "MemoryHeading-v0"
GAIT_ID = "MemoryGait-v0"
PICK_PLACE_ID = "MemoryPickPlace-v0"

_MODULE = "polc.runtime.envs.memory_tasks"


def _box(low: list[float], high: list[float]) -> gym.spaces.Box:
    return gym.spaces.Box(np.asarray(low, np.float32), np.asarray(high, np.float32))


def _finite_nonneg(name: str, value: float) -> float:
    v = float(value)
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
    return v


class PointMass(gym.Env):
    """A point mass on a rail with a set point, a constant force disturbance and a noisy position
    measurement (the module docstring). Observation: target, measured position, true position,
    velocity, disturbance; action: force in [-1, 1]."""

    DT, GAIN, DRAG = 0.1, 2.0, 0.2

    def __init__(self, max_disturbance: float = 0.0, noise: float = 0.0):
        self.max_disturbance = _finite_nonneg("max_disturbance", max_disturbance)
        if self.max_disturbance > 1:
            raise ValueError(f"max_disturbance must be at most 1 (the largest force), not {max_disturbance!r}")
        self.noise = _finite_nonneg("noise", noise)
        self.observation_space = _box([-1, -1, -1, -5, -1], [1, 1, 1, 5, 1])
        self.action_space = _box([-1], [1])
        self.x = self.v = self.target = self.d = 0.0

    def _obs(self) -> np.ndarray:
        measured = float(np.clip(self.x + self.noise * self.np_random.normal(), -1, 1))
        return np.asarray([self.target, measured, self.x, self.v, self.d], np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        r = self.np_random
        self.target, self.x = (float(u) for u in r.uniform(-0.6, 0.6, size=2))
        self.v = 0.0
        self.d = float(r.uniform(-self.max_disturbance, self.max_disturbance))
        return self._obs(), {}

    def step(self, action: Any):
        u = float(np.clip(np.asarray(action, np.float64).reshape(-1)[0], -1, 1))
        self.v += self.DT * (self.GAIN * (u + self.d) - self.DRAG * self.v)
        self.v = float(np.clip(self.v, -5, 5))
        self.x += self.DT * self.v
        if abs(self.x) > 1:  # the rail's end stops the mass
            self.x, self.v = float(np.sign(self.x)), 0.0
        return self._obs(), -abs(self.x - self.target), False, False, {}


class Grip(gym.Env):
    """An object handed to a gripper, held, then taken (the module docstring). Observation:
    force, object in hand (hidden); action: grip in [0, 1]."""

    def __init__(self):
        self.observation_space = _box([0, 0], [1, 1])
        self.action_space = _box([0], [1])
        self.t = self.arrive = self.leave = 0
        self.held = self.present = False
        self.force = 0.0

    def _read(self) -> float:
        r = self.np_random
        if not self.present:
            return float(r.uniform(0.0, 0.15) if self.t >= self.leave else r.uniform(0.0, 0.4))
        return float(r.uniform(0.25, 0.45) if self.held else r.uniform(0.8, 1.0))

    def _obs(self) -> np.ndarray:
        return np.asarray([self.force, float(self.present)], np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        r = self.np_random
        self.t = 0
        self.arrive = int(r.integers(5, 16))
        self.leave = self.arrive + int(r.integers(25, 36))
        self.held = self.present = False
        self.force = self._read()
        return self._obs(), {}

    def step(self, action: Any):
        grip = float(np.clip(np.asarray(action, np.float64).reshape(-1)[0], 0, 1))
        closed = grip > 0.5
        reward, terminated = 0.0, False
        if self.present:
            if closed:
                self.held, reward = True, 1.0
            elif self.held:  # opened on a settled object: it falls
                self.present = self.held = False
                reward, terminated = -20.0, True
        else:
            reward = -2.0 * grip  # squeezing an empty hand
        self.t += 1
        if self.t == self.arrive and not terminated:
            self.present = True
        if self.t == self.leave and self.present:
            self.present = self.held = False  # taken from the hand
        self.force = self._read()
        return self._obs(), reward, terminated, False, {}


class Bounce(gym.Env):
    """A ball bouncing on a paddle at a period unknown to the policy (the module docstring).
    Observation: contact, steps to the next bounce (hidden); action: push in [0, 1]."""

    LAG, GAIN, EFFORT = 0.6, 2.0, 0.1

    def __init__(self):
        self.observation_space = _box([0, 0], [1, 20])
        self.action_space = _box([0], [1])
        self.t = self.first = self.period = 0
        self.speed = 0.0

    def _to_bounce(self) -> int:
        if self.t < self.first:
            return self.first - self.t
        return self.period - (self.t - self.first) % self.period

    def _obs(self, contact: bool) -> np.ndarray:
        return np.asarray([float(contact), float(self._to_bounce())], np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        r = self.np_random
        self.period = int(r.integers(12, 21))
        self.first = int(r.integers(1, self.period + 1))
        self.t, self.speed = 0, 0.0
        return self._obs(False), {}

    def step(self, action: Any):
        push = float(np.clip(np.asarray(action, np.float64).reshape(-1)[0], 0, 1))
        self.speed = self.LAG * self.speed + (1 - self.LAG) * push
        self.t += 1
        bounce = self.t >= self.first and (self.t - self.first) % self.period == 0
        reward = self.GAIN * self.speed * bounce - self.EFFORT * push * push
        return self._obs(bounce), reward, False, False, {}


class Heading(gym.Env):
    """Heading tracking with a set heading that jumps, and a cost on steering jerks (the module
    docstring). Observation: heading error; action: steer in [-1, 1]."""

    TURN, JERK = 0.2, 10.0

    def __init__(self):
        self.observation_space = _box([-3.15], [3.15])
        self.action_space = _box([-1], [1])
        self.err = self.last = 0.0
        self.next_jump = 0

    def _jump(self) -> None:
        r = self.np_random
        self.err = float(np.clip(self.err + r.choice([-1.0, 1.0]) * r.uniform(0.5, 2.0), -3.0, 3.0))
        self.next_jump += int(r.integers(20, 41))

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.err, self.last, self.next_jump = 0.0, 0.0, 0
        self._jump()
        return np.asarray([self.err], np.float32), {}

    def step(self, action: Any):
        steer = float(np.clip(np.asarray(action, np.float64).reshape(-1)[0], -1, 1))
        reward = -abs(self.err) - self.JERK * (steer - self.last) ** 2
        self.err, self.last = self.err - self.TURN * steer, steer
        self.next_jump -= 1
        if self.next_jump <= 0:
            self.next_jump = 0
            self._jump()
        return np.asarray([self.err], np.float32), reward, False, False, {}


class Gait(gym.Env):
    """Two torque-driven joints that swim by a travelling wave (the module docstring).
    Observation: joint_a, joint_b; action: torque_a, torque_b in [-1, 1]."""

    DT, GAIN, LIMIT = 0.1, 4.0, 1.5

    def __init__(self):
        self.observation_space = _box([-1.5, -1.5], [1.5, 1.5])
        self.action_space = _box([-1, -1], [1, 1])
        self.q = np.zeros(2)
        self.w = np.zeros(2)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.q = self.np_random.uniform(-0.1, 0.1, size=2)
        self.w = np.zeros(2)
        return self.q.astype(np.float32), {}

    def step(self, action: Any):
        u = np.clip(np.asarray(action, np.float64).reshape(-1)[:2], -1, 1)
        q0 = self.q.copy()
        self.w = self.w + self.DT * (self.GAIN * u - self.w)
        self.q = self.q + self.DT * self.w
        stop = np.abs(self.q) > self.LIMIT
        self.q, self.w = np.where(stop, np.sign(self.q) * self.LIMIT, self.q), np.where(stop, 0.0, self.w)
        swim = float(q0[0] * self.q[1] - self.q[0] * q0[1])
        return self.q.astype(np.float32), swim - 0.01 * float(u @ u), False, False, {}


class PickPlace(gym.Env):
    """A 2-D pick and place with a dwell before a grasp holds and grasps that can fail (the module
    docstring). Observation: dx_obj, height, force, dx_goal, held (hidden), p (hidden); actions:
    move_xy, move_z in [-1, 1], grip, give_up in [0, 1]."""

    STEP, DWELL, NEAR_XY, NEAR_Z, GOAL = 0.1, 5, 0.03, 0.02, 0.03

    def __init__(self):
        self.observation_space = _box([-2, 0, 0, -2, 0, 0], [2, 1, 1, 2, 1, 1])
        self.action_space = _box([-1, -1, 0, 0], [1, 1, 1, 1])
        self.gx = self.gz = self.ox = self.goal = self.p = 0.0
        self.held = self.closed = self.failed = False
        self.dwell = 0

    def _force(self) -> float:
        if self.held:
            return 1.0 if self.gz >= self.NEAR_Z else 0.5
        if self.closed and abs(self.ox - self.gx) < self.NEAR_XY and self.gz < self.NEAR_Z:
            return 0.5
        return 0.0

    def _obs(self) -> np.ndarray:
        return np.asarray([self.ox - self.gx, self.gz, self._force(), self.goal - self.ox, float(self.held), self.p],
                          np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        r = self.np_random
        self.gx, self.gz = 0.0, 0.5
        self.ox = float(r.uniform(-0.8, 0.8))
        self.goal = self.ox
        while abs(self.goal - self.ox) < 0.3:
            self.goal = float(r.uniform(-0.8, 0.8))
        self.p = float(r.uniform(0.4, 0.9))
        self.held = self.closed = self.failed = False
        self.dwell = 0
        return self._obs(), {}

    def step(self, action: Any):
        a = np.asarray(action, np.float64).reshape(-1)
        move_xy, move_z = (float(np.clip(v, -1, 1)) for v in a[:2])
        grip, give_up = (float(np.clip(v, 0, 1)) for v in a[2:4])
        self.closed = grip > 0.5
        at_object = abs(self.ox - self.gx) < self.NEAR_XY and self.gz < self.NEAR_Z
        if self.held and not self.closed:  # let go: the object drops where it is
            self.held = False
        if self.closed and at_object and not self.held:
            self.dwell += 1
            if self.dwell == self.DWELL:  # the grasp is tried: it holds, or slips when lifted
                self.held = bool(self.np_random.uniform() < self.p)
        else:
            self.dwell = 0
        self.gx = float(np.clip(self.gx + self.STEP * move_xy, -1, 1))
        self.gz = float(np.clip(self.gz + self.STEP * move_z, 0, 1))
        if self.held:
            self.ox = self.gx
        success = self.held and abs(self.goal - self.ox) < self.GOAL
        terminated = success or give_up > 0.5
        return self._obs(), float(success), terminated, False, {}


def _register(env_id: str, entry: str, steps: int) -> None:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=f"{_MODULE}:{entry}", max_episode_steps=steps)


_register(POINT_MASS_ID, "PointMass", 100)
_register(GRIP_ID, "Grip", 60)
_register(BOUNCE_ID, "Bounce", 100)
_register(HEADING_ID, "Heading", 120)
_register(GAIT_ID, "Gait", 100)
_register(PICK_PLACE_ID, "PickPlace", 150)

__all__ = ["BOUNCE_ID", "Bounce", "GAIT_ID", "GRIP_ID", "Gait", "Grip", "HEADING_ID", "Heading",
           "PICK_PLACE_ID", "POINT_MASS_ID", "PickPlace", "PointMass"]

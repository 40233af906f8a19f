"""Meta-World door-open-v3 with named semantic observations and dict actions.

`SemanticDoorOpen` holds metaworld's `SawyerDoorEnvV3` (physics, reward, the
500-step horizon `max_path_length` untouched) in `self.sim` and changes:

1. Observations: metaworld's 39-vector split into named float32 fields in the
   paper's layout (`DOOR.obs`, in this order): hand xyz, gripper opening, handle
   xyz, handle quaternion, the same four for the previous step, goal xyz. The
   vector's zero padding (obs[11:18] and obs[29:36]: room for a second object)
   is dropped. Units are metres in metaworld's world frame (x to the robot's
   right, y away from its base, z up). The goal is observable (metaworld's MT1
   setting, `partially_observable=False`); with the door it is the point the
   handle should reach, `door position + (-0.3, -0.45, 0)`.
2. Actions: a dict `{"dx", "dy", "dz", "grab"}` of floats in [-1, 1], passed to
   metaworld as `[dx, dy, dz, grab]` (clipped): dx, dy, dz move the hand's mocap
   target by up to 1 cm per step along x, y, z; grab closes the gripper (+1) or
   opens it (-1).
3. `info["handle_to_target"]`: the handle-to-goal distance (m) after each step,
   beside metaworld's own info (`success`, `near_object`, ...).

Seeds and configurations. A door-open configuration is metaworld's `rand_vec`:
the door's position, uniform in x [0, 0.1], y [0.85, 0.95], z = 0.15 (its
`_random_reset_space`); the goal follows it, and the hand always starts at
(0, 0.6, 0.2). `reset(seed=s)` draws the door position with gymnasium's
`np_random(s)` (`numpy.random.default_rng(s)`): `door = rng.uniform(low, high)`,
its first draw, so seed s always gives the same configuration; a reset without
a seed draws the next configuration from the same stream (gymnasium's usual
contract). This is metaworld's own configuration space, but one configuration
per seed rather than MT1's 50 pre-drawn tasks, so demonstration seeds 0..999
and evaluation seeds 10_000.. (see `polc.runtime.envs`) give disjoint, unseen
configurations. The physics is deterministic: seed + actions fix the episode.

Metric (`DOOR_METRIC`, the paper's): the minimum handle-to-target distance over
the episode, lower is better, computed from the step table as the minimum over
the states the policy acted in of |obs.handle - obs.goal|. A closed door reads
about 0.55 m; metaworld's scripted expert reaches about 0.022 m.

Ranges. Metaworld clips the hand to its `_HAND_SPACE` ([-0.525, 0.525] x
[0.348, 1.025] x [-0.0525, 0.7]); the handle lies on a circle of radius 0.391 m
about the hinge (door position + (-0.185, -0.1, 0)), inside [-0.6, 1.25] for
every configuration and door angle. Every field is clipped to its declared range,
which only ever removes float32 rounding.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import gymnasium as gym
import numpy as np

from .car_racing import _f32_inside, _space
from .metric import Columns, Metric
from .schema import EnvSchema, Field

MAX_STEPS = 500  # metaworld's max_path_length for every v3 task; the metric is over these steps
GOAL_OFFSET = np.array([-0.3, -0.45, 0.0])  # SawyerDoorEnvV3.reset_model: goal = door + this
HAND_LO, HAND_HI = -0.525, 1.025  # the extremes of metaworld's _HAND_SPACE, which clips the hand
HANDLE_LO, HANDLE_HI = -0.6, 1.25  # a circle of 0.391 m about the hinge, every door position
GOAL_LO, GOAL_HI = -0.3, 0.5  # goal x in [-0.3, -0.2], y in [0.4, 0.5], z = 0.15

_HAND = "end-effector (gripper) position xyz, m"
_GRIP = "gripper opening: finger distance / 0.1 m, clipped to [0, 1] by metaworld (1 open, about 0.26 closed)"
_HANDLE = "door handle position xyz, m (it swings on a 0.391 m circle about the hinge as the door opens)"
_QUAT = "door handle orientation, a unit quaternion (x, y, z, w) as metaworld reports it (scipy's order)"
_PREV = " at the previous step (equal to the current one right after a reset)"

DOOR = EnvSchema(
    name="door",
    env_id="polc/DoorOpen-v0",
    version="1 (metaworld 3.1.1 door-open-v3)",
    obs=(
        Field("hand", (3,), HAND_LO, HAND_HI, _HAND),
        Field("grip", (), 0.0, 1.0, _GRIP),
        Field("handle", (3,), HANDLE_LO, HANDLE_HI, _HANDLE),
        Field("handle_quat", (4,), -1.0, 1.0, _QUAT),
        Field("prev_hand", (3,), HAND_LO, HAND_HI, _HAND + _PREV),
        Field("prev_grip", (), 0.0, 1.0, _GRIP + _PREV),
        Field("prev_handle", (3,), HANDLE_LO, HANDLE_HI, _HANDLE + _PREV),
        Field("prev_handle_quat", (4,), -1.0, 1.0, _QUAT + _PREV),
        Field("goal", (3,), GOAL_LO, GOAL_HI,
              "where the handle should end up, xyz, m: the door position + (-0.3, -0.45, 0)"),
    ),
    actions=(
        Field("dx", (), -1.0, 1.0, "move the hand along x (+ right), up to 1 cm per step"),
        Field("dy", (), -1.0, 1.0, "move the hand along y (+ away from the robot), up to 1 cm per step"),
        Field("dz", (), -1.0, 1.0, "move the hand along z (+ up), up to 1 cm per step"),
        Field("grab", (), -1.0, 1.0, "gripper effort: +1 closes the fingers, -1 opens them"),
    ),
)

# Where each field sits in metaworld's 39-vector (the padding 11:18 and 29:36 is unused).
_FLAT_AT = {"hand": 0, "grip": 3, "handle": 4, "handle_quat": 7, "prev_hand": 18, "prev_grip": 21,
            "prev_handle": 22, "prev_handle_quat": 25, "goal": 36}


def _layout() -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
    """The gather index into the 39-vector (schema order), per-element float32
    clip bounds, and each field's (name, slice, shape) in the gathered buffer."""
    index, lo, hi, views, at = [], [], [], [], 0
    for f in DOOR.obs:
        index.extend(range(_FLAT_AT[f.name], _FLAT_AT[f.name] + f.size))
        b = _f32_inside(f.lo, f.hi)
        lo += [b[0]] * f.size
        hi += [b[1]] * f.size
        views.append((f.name, slice(at, at + f.size), f.shape))
        at += f.size
    return np.array(index), np.array(lo, np.float32), np.array(hi, np.float32), tuple(views)


_INDEX, _LO, _HI, _VIEWS = _layout()


def observe(flat: np.ndarray) -> dict[str, np.ndarray]:
    """Metaworld's (39,) observation -> the named float32 fields of `DOOR.obs`."""
    out = np.asarray(flat, np.float64)[_INDEX].astype(np.float32)
    np.clip(out, _LO, _HI, out=out)
    return {name: out[sl].reshape(shape) for name, sl, shape in _VIEWS}


def raw_action(action: Mapping[str, Any]) -> np.ndarray:
    """The float64 array `[dx, dy, dz, grab]` handed to metaworld, each clipped to [-1, 1]."""
    try:
        raw = np.array([float(np.asarray(action[k]).reshape(())) for k in ("dx", "dy", "dz", "grab")])
    except KeyError as e:
        raise KeyError(f"door action needs keys dx, dy, dz, grab; missing {e}") from None
    return np.clip(raw, -1.0, 1.0)


def handle_to_target(columns: Columns) -> np.ndarray:
    """(T,) distance (m) from the handle to the goal at each step of a step table."""
    d = np.asarray(columns["obs.handle"], np.float64) - np.asarray(columns["obs.goal"], np.float64)
    return np.sqrt(np.sum(d * d, axis=-1))


DOOR_METRIC = Metric(
    name="min handle-to-target distance", key="min_handle_to_target", higher_is_better=False,
    doc="the smallest distance |handle - goal| (m) over the states the policy acted in, 500 per episode",
    per_step=handle_to_target, reduce="min", unit="m")


class SemanticDoorOpen(gym.Env):
    """door-open-v3 with dict observations and dict actions; see the module docstring.

    `seed`, when given, seeds the first `reset()` called without one (so
    `make(seed=s)` is deterministic). `sim` is metaworld's env (privileged state
    for the expert); `flat_obs` its last (39,) float64 observation."""

    metadata = {"render_modes": ["human", "rgb_array", "depth_array"], "render_fps": 80}

    def __init__(self, render_mode: Optional[str] = None, seed: Optional[int] = None,
                 camera_name: Optional[str] = None):
        from metaworld.envs.sawyer_door_v3 import SawyerDoorEnvV3  # ~1 s: only when an env is made

        sim = SawyerDoorEnvV3(render_mode=render_mode, camera_name=camera_name)
        sim._partially_observable = False  # the goal is observed (MT1's setting)
        sim.__dict__.pop("sawyer_observation_space", None)  # a cached property that depends on it
        sim._set_task_called = True  # configurations come from our seeds, not from a metaworld Task
        sim._freeze_rand_vec = True
        self.sim = sim
        self.observation_space = _space(DOOR.obs)
        self.action_space = _space(DOOR.actions)
        self.render_mode = render_mode
        self._first_seed = seed
        self.flat_obs: Optional[np.ndarray] = None
        self.last_raw_action: Optional[np.ndarray] = None

    @property
    def door_position(self) -> np.ndarray:
        """(3,) this episode's configuration: metaworld's rand_vec (door body position, m)."""
        return np.array(self.sim._last_rand_vec)

    @property
    def target(self) -> np.ndarray:
        """(3,) where the handle should go (metaworld's `_target_pos`), float64."""
        return np.array(self.sim._target_pos)

    def handle_distance(self) -> float:
        """|handle - target| (m) in the simulator now, float64."""
        return float(np.linalg.norm(self.sim.data.geom("handle").xpos - self.sim._target_pos))

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is None and self._first_seed is not None:
            seed = self._first_seed
        self._first_seed = None
        super().reset(seed=seed)
        space = self.sim._random_reset_space
        self.sim._last_rand_vec = self.np_random.uniform(space.low, space.high)
        self.flat_obs, _ = self.sim.reset()
        self.last_raw_action = None
        return observe(self.flat_obs), {"handle_to_target": self.handle_distance()}

    def step(self, action):
        raw = raw_action(action)
        self.last_raw_action = raw
        self.flat_obs, reward, terminated, truncated, info = self.sim.step(raw)
        info = {**info, "handle_to_target": self.handle_distance()}
        return observe(self.flat_obs), float(reward), bool(terminated), bool(truncated), info

    def render(self):
        return self.sim.render()

    def close(self) -> None:
        self.sim.close()

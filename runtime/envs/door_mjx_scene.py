"""The door_mjx task shared by its two simulators: schema, geometry, reward, metric.

One small MJCF (`assets/door_mjx.xml`) is stepped by MJX in float32 behind a
brax `Env` (`door_mjx.DoorMJX`, for `polc rl --engine brax`) and by C MuJoCo in
float64 behind a gymnasium env (`door_mjx_gym.DoorMJXGym`, "polc/DoorMJX-v0",
for `polc demos/fit/eval/rollout`). Everything both need lives here, written
once over an array module `xp` (numpy or jax.numpy), so the two compute the
same observation, reward and metric from the same simulator quantities. This
module imports neither jax nor mujoco (`polc check --env door_mjx` loads it).

The scene (metres, seconds; world frame as Meta-World's door: x right, y away
from the robot, z up): a door 0.4 m wide hinged about a vertical axis at the
episode's door position `p` (the hinge), its panel extending toward -x; a bar
handle 0.14 m long along the panel, standing 0.1 m off its face toward the
robot on two struts, its centre at `p + R(angle) (-0.36, -0.1, 0)`; the door
opens toward the robot (angle > 0), up to 1.6 rad. A spherical hand (radius
0.03 m) on three slide joints starts at (0, 0.6, 0.2); each action (dx, dy, dz)
in [-1, 1] is the hand's commanded velocity in m/s (a velocity servo), so a
full action moves it about 1 cm per 0.01 s step, as Meta-World's mocap hand
moves. There is no gripper: the hand opens the door by descending into the gap
between the bar and the panel and pulling the bar toward the robot along the
door's arc (the gap is 0.078 m wide, the hand 0.06 m).

Configurations: the door position is uniform in x [0, 0.1], y [0.85, 0.95],
z = 0.15 (Meta-World's door range). The goal is where the handle is when the
door stands open by 1.2 rad: `p + R(1.2) (-0.36, -0.1, 0)` = p + (-0.037, -0.372, 0).

Metric (`DOOR_MJX_METRIC`, the Meta-World door's shape): the minimum
handle-to-goal distance over the 500 states the policy acted in, lower is
better. A closed door reads 0.42 m; the scripted expert reaches about 0.003 m.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .door import handle_to_target
from .metric import Metric
from .schema import EnvSchema, Field

XML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets", "door_mjx.xml")
MAX_STEPS = 500
SUBSTEPS = 2  # physics steps (0.005 s) per control step (0.01 s)
DOOR_LO = np.array([0.0, 0.85, 0.15])  # the door (hinge) position's range; z fixed
DOOR_HI = np.array([0.1, 0.95, 0.15])
HAND_START = np.array([0.0, 0.6, 0.2])
HANDLE_REL = np.array([-0.36, -0.1, 0.0])  # the bar's centre from the hinge, door closed
BEHIND = 0.05  # the hooking point: this far from the bar's centre toward the panel
GOAL_ANGLE = 1.2  # rad: the goal is the handle's position at this door angle
MAX_ANGLE = 1.6  # the hinge's upper limit


def rotate_z(v: Any, angle: Any, xp: Any = np) -> Any:
    """(..., 3) vectors turned by `angle` (rad, (...)) about +z."""
    c, s = xp.cos(angle), xp.sin(angle)
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    return xp.stack([c * x - s * y, s * x + c * y, z], axis=-1)


GOAL_REL = rotate_z(HANDLE_REL, GOAL_ANGLE)
CLOSED_DISTANCE = float(np.linalg.norm(HANDLE_REL - GOAL_REL))  # 0.42 m

# Observation ranges (scalar per field, as the schema carries them).
HAND_LO, HAND_HI = -0.5, 1.05  # the slide joints' ranges: x [-0.5, 0.5], y [0.35, 1.05], z [0, 0.5]
_R = float(np.linalg.norm(HANDLE_REL))  # 0.374 m: the handle's circle about the hinge
HANDLE_LO, HANDLE_HI = -0.4, 1.35  # the door range +- the circle's radius
GOAL_LO, GOAL_HI = -0.1, 0.6  # x [-0.037, 0.063], y [0.478, 0.578], z 0.15

_HAND = "hand (sphere centre) position xyz, m"
_HANDLE = "door handle (bar centre) position xyz, m; it swings on a 0.374 m circle about the hinge"
_PREV = " at the previous step (equal to the current one right after a reset)"

DOOR_MJX = EnvSchema(
    name="door_mjx",
    env_id="polc/DoorMJX-v0",
    version="1 (polc door_mjx.xml, MuJoCo 3.3.0)",
    obs=(
        Field("hand", (3,), HAND_LO, HAND_HI, _HAND),
        Field("handle", (3,), HANDLE_LO, HANDLE_HI, _HANDLE),
        Field("prev_hand", (3,), HAND_LO, HAND_HI, _HAND + _PREV),
        Field("prev_handle", (3,), HANDLE_LO, HANDLE_HI, _HANDLE + _PREV),
        Field("goal", (3,), GOAL_LO, GOAL_HI,
              "where the handle should end up, xyz, m: the handle's position with the door open 1.2 rad"),
        Field("door_angle", (), 0.0, MAX_ANGLE, "door opening angle, rad (0 closed, + toward the robot)"),
    ),
    actions=(
        Field("dx", (), -1.0, 1.0, "hand velocity along x (+ right), m/s: 1 moves it about 1 cm per step"),
        Field("dy", (), -1.0, 1.0, "hand velocity along y (+ away from the robot), m/s"),
        Field("dz", (), -1.0, 1.0, "hand velocity along z (+ up), m/s"),
    ),
)

OBS_SIZE = sum(f.size for f in DOOR_MJX.obs)  # 16
ACTION_NAMES = tuple(f.name for f in DOOR_MJX.actions)

DOOR_MJX_METRIC = Metric(
    name="min handle-to-target distance", key="min_handle_to_target", higher_is_better=False,
    doc="the smallest distance |handle - goal| (m) over the states the policy acted in, 500 per episode",
    per_step=handle_to_target, reduce="min", unit="m")


def _bounds() -> tuple[np.ndarray, np.ndarray]:
    """Per-element float32 clip bounds of the packed observation, inside each field's range."""
    from .car_racing import _f32_inside

    lo, hi = [], []
    for f in DOOR_MJX.obs:
        b = _f32_inside(f.lo, f.hi)
        lo += [b[0]] * f.size
        hi += [b[1]] * f.size
    return np.array(lo, np.float32), np.array(hi, np.float32)


OBS_LO, OBS_HI = _bounds()


def pack_obs(hand, handle, prev_hand, prev_handle, goal, angle, xp: Any = np):
    """The schema's fields in schema order, one (16,) float32 vector, each element
    clipped to its field's range (the hinge's soft limit lets the angle pass 0
    or 1.6 by a hair; positions only by float rounding)."""
    flat = xp.concatenate([xp.asarray(v, xp.float32).reshape(-1)
                           for v in (hand, handle, prev_hand, prev_handle, goal, xp.reshape(angle, (1,)))])
    return xp.clip(flat, OBS_LO, OBS_HI)


def unpack_obs(flat: np.ndarray) -> dict[str, np.ndarray]:
    """A packed (16,) observation -> the named float32 fields of `DOOR_MJX.obs`."""
    out, at = {}, 0
    for f in DOOR_MJX.obs:
        out[f.name] = np.asarray(flat[at:at + f.size], np.float32).reshape(f.shape)
        at += f.size
    return out


def hook_point(handle, angle, xp: Any = np):
    """(3,) where the hand hooks the handle: BEHIND m from the bar toward the panel."""
    inward = xp.stack([-xp.sin(angle), xp.cos(angle), xp.zeros_like(angle)], axis=-1)
    return handle + BEHIND * inward


def reward(hand, handle, goal, angle, xp: Any = np):
    """Shaped reward in [0, 1] per step: up to 0.2 for the hand near the hook point
    (1 - tanh(10 m^-1 x distance)), plus up to 0.8 for the handle's progress from the
    closed door to the goal, linear in its distance to the goal (0 when shut, 0.8 there),
    so opening pays from the first centimetre."""
    reach = xp.sqrt(xp.sum(xp.square(hand - hook_point(handle, angle, xp))))
    dist = xp.sqrt(xp.sum(xp.square(handle - goal)))
    return 0.2 * (1.0 - xp.tanh(10.0 * reach)) + 0.8 * xp.clip(1.0 - dist / CLOSED_DISTANCE, 0.0, 1.0)


def goal_of(door, xp: Any = np):
    """(3,) the goal for a door (hinge) position."""
    return door + GOAL_REL


def door_from_uniform(u, xp: Any = np):
    """A door position from a uniform draw u in [0, 1)^3."""
    return DOOR_LO + (DOOR_HI - DOOR_LO) * u


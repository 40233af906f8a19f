"""door_mjx in C MuJoCo (float64) as a gymnasium env, "polc/DoorMJX-v0", and its expert.

The same MJCF, observation, reward and metric as the MJX env (`door_mjx.py`;
the task is described in `door_mjx_scene`), so `polc demos/fit/eval/rollout`
and the tracer run on it unchanged and `polc eval` scores a brax-trained policy
here. Observations are dicts of named float32 fields (`DOOR_MJX.obs`); actions
are dicts {"dx", "dy", "dz"} of floats, clipped to [-1, 1] (m/s).

Seeds: `reset(seed=s)` draws the door position as `numpy.random.default_rng(s)`
`.uniform(DOOR_LO, DOOR_HI)` (gymnasium's `np_random`), so a seed fixes the
configuration and, with the actions, the episode. The MJX env draws its door
positions from JAX keys instead: the two agree on the physics, not on which
seed gives which door (`reset_to(door)` puts either at a given door).

Step: ctrl = the clipped actions, then 2 physics steps of 0.005 s.
`info["handle_to_target"]` is |handle - goal| (m) after the step.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import gymnasium as gym
import numpy as np

from . import door_mjx_scene as S
from .car_racing import _space


def raw_action(action: Mapping[str, Any]) -> np.ndarray:
    """The float64 ctrl (dx, dy, dz), each clipped to [-1, 1]."""
    try:
        raw = np.array([float(np.asarray(action[k]).reshape(())) for k in S.ACTION_NAMES])
    except KeyError as e:
        raise KeyError(f"door_mjx action needs keys dx, dy, dz; missing {e}") from None
    return np.clip(raw, -1.0, 1.0)


class DoorMJXGym(gym.Env):
    """door_mjx stepped by C MuJoCo; see the module docstring. `model`/`data` are
    MuJoCo's (privileged state for the expert); `door` this episode's hinge position."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 100}

    def __init__(self, render_mode: Optional[str] = None, seed: Optional[int] = None):
        import mujoco

        self._mj = mujoco
        self.model = mujoco.MjModel.from_xml_path(S.XML)
        self.data = mujoco.MjData(self.model)
        self._hand = self.model.body("hand").id
        self._handle = self.model.geom("handle").id
        self._hinge = self.model.joint("hinge").qposadr[0]
        self.observation_space = _space(S.DOOR_MJX.obs)
        self.action_space = _space(S.DOOR_MJX.actions)
        self.render_mode = render_mode
        self._renderer = None
        self._first_seed = seed
        self.door = S.door_from_uniform(np.full(3, 0.5))
        self._prev: Optional[tuple[np.ndarray, np.ndarray]] = None

    # ---- simulator quantities (float64) ----

    @property
    def hand(self) -> np.ndarray:
        return self.data.xpos[self._hand].copy()

    @property
    def handle(self) -> np.ndarray:
        return self.data.geom_xpos[self._handle].copy()

    @property
    def angle(self) -> float:
        return float(self.data.qpos[self._hinge])

    @property
    def goal(self) -> np.ndarray:
        return S.goal_of(self.door)

    def handle_distance(self) -> float:
        return float(np.linalg.norm(self.handle - self.goal))

    def flat_obs(self) -> np.ndarray:
        """(16,) float32, the packed observation (schema order)."""
        prev_hand, prev_handle = self._prev
        return S.pack_obs(self.hand, self.handle, prev_hand, prev_handle, self.goal, self.angle)

    def _observe(self) -> dict[str, np.ndarray]:
        return S.unpack_obs(self.flat_obs())

    # ---- gymnasium ----

    def reset_to(self, door: np.ndarray) -> dict[str, np.ndarray]:
        """Start an episode with the door (hinge) at `door` (3,); returns the observation."""
        self._mj.mj_resetData(self.model, self.data)
        self.door = np.asarray(door, np.float64).copy()
        self.data.mocap_pos[0] = self.door
        self._mj.mj_forward(self.model, self.data)
        self._prev = (self.hand, self.handle)
        return self._observe()

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is None and self._first_seed is not None:
            seed = self._first_seed
        self._first_seed = None
        super().reset(seed=seed)
        obs = self.reset_to(self.np_random.uniform(S.DOOR_LO, S.DOOR_HI))
        return obs, {"handle_to_target": self.handle_distance()}

    def step(self, action):
        self._prev = (self.hand, self.handle)
        self.data.ctrl[:] = raw_action(action)
        for _ in range(S.SUBSTEPS):
            self._mj.mj_step(self.model, self.data)
        obs = self._observe()
        r = S.reward(self.hand, self.handle, self.goal, self.angle)
        return obs, float(r), False, False, {"handle_to_target": self.handle_distance()}

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        if self._renderer is None:
            self._renderer = self._mj.Renderer(self.model, 240, 320)
        self._renderer.update_scene(self.data)
        return self._renderer.render()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


class DoorMJXExpert:
    """A privileged scripted controller: reads the door position and angle.

        hook = handle + 0.05 m toward the panel (the gap behind the bar)
        target = hook + (0, 0, 0.12)      while the hand is > 0.015 m from the hook in xy
               = hook                     else while it is > 0.02 m from it in z
               = hook(angle + 0.35)       else: where the hook will be 0.35 rad further
                                          open (at most the goal angle), i.e. pull along the arc
        (dx, dy, dz) = clip(12 * (target - hand), -1, 1)
    Deterministic and stateless."""

    GAIN = 12.0

    def reset(self) -> None:
        pass

    def act(self, env: gym.Env) -> dict[str, np.ndarray]:
        e = env.unwrapped
        hand, handle, angle = e.hand, e.handle, e.angle
        hook = S.hook_point(handle, angle)
        off = hand - hook
        if np.hypot(off[0], off[1]) > 0.015 and not _inside_gap(off):
            target = hook + np.array([0.0, 0.0, 0.12])
        elif abs(off[2]) > 0.02:
            target = hook
        else:
            ahead = min(angle + 0.35, S.GOAL_ANGLE)
            at = e.door + S.rotate_z(S.HANDLE_REL, ahead)
            target = S.hook_point(at, ahead)
        a = np.clip(self.GAIN * (target - hand), -1.0, 1.0).astype(np.float32)
        return {name: np.array(a[i]) for i, name in enumerate(S.ACTION_NAMES)}


def _inside_gap(off: np.ndarray) -> bool:
    """The hand is already hooked: within 0.04 m of the hook point and at its height."""
    return bool(np.linalg.norm(off) < 0.04 and abs(off[2]) < 0.02)

"""The door's demonstrator: metaworld's scripted `SawyerDoorOpenV3Policy`.

Its rule, on metaworld's flat observation (hand xyz, handle xyz):
    grasp = handle - (0.05, 0, 0)
    target = grasp + (0.06, 0.02, 0.2)   while the hand is > 0.12 m from it in xy
           = grasp + (0.06, 0.02, 0)     else while the height error is > 0.04 m
           = grasp                       else (pushing the handle along the door's arc)
    (dx, dy, dz) = 25 * (target - hand),  grab = 1 (gripper closed)
`act` returns that clipped to [-1, 1] (metaworld clips it the same way, so the
recorded action is the executed one) as the dict actions of `polc/DoorOpen-v0`.
Deterministic and stateless; it reads the simulator's unclipped float64
observation through `env.unwrapped.flat_obs`.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np


class DoorExpert:
    """`act(env)` -> {"dx", "dy", "dz", "grab"} float32 scalars."""

    def __init__(self) -> None:
        from metaworld.policies.sawyer_door_open_v3_policy import SawyerDoorOpenV3Policy

        self.policy = SawyerDoorOpenV3Policy()

    def reset(self) -> None:
        pass  # stateless

    def act(self, env: gym.Env) -> dict[str, np.ndarray]:
        flat = np.array(env.unwrapped.flat_obs, np.float64)  # a copy: the policy edits its input in place
        with warnings.catch_warnings():
            # metaworld's `move` warns whenever 25 * error exceeds 1, i.e. on most steps.
            warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")
            a = np.clip(self.policy.get_action(flat), -1.0, 1.0).astype(np.float32)
        return {name: np.array(a[i]) for i, name in enumerate(("dx", "dy", "dz", "grab"))}

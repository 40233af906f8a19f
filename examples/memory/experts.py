"""Demonstrators for the memory construct examples' tasks (runtime/envs/memory_tasks.py), one per
folder: `polc demos examples/memory/NAME/env.toml --expert examples/memory/experts.py:NAME`.

Each is a callable of the observation dict (the schema's names, hidden fields included) that
returns the action dict; one with memory of its own is an object whose `reset()` polc calls at the
start of every episode. Which read privileged (hidden) fields is said at each.
"""

from __future__ import annotations

import math

import numpy as np


def _clip(x: float, lo: float, hi: float) -> float:
    return float(min(max(x, lo), hi))


class PID:
    """pid: a hand-tuned PID on the set point and the position, the fields a policy reads (never
    the hidden velocity or disturbance): pid.pol's computation with gains 4, 0.2 and 10."""

    KP, KI, KD, I_MAX = 4.0, 0.2, 10.0, 0.5

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.integ, self.prev_err = 0.0, 0.0

    def __call__(self, obs: dict) -> dict:
        err = float(obs["target"]) - float(obs["position"])
        u = self.KP * err + self.integ + self.KD * (err - self.prev_err)
        self.integ = _clip(self.integ + self.KI * err, -self.I_MAX, self.I_MAX)
        self.prev_err = err
        return {"force": _clip(u, -1, 1)}


def disturbance_aware(obs: dict) -> dict:
    """pid, privileged: reads the velocity and the disturbance and cancels it (an upper bound)."""
    x, v = float(obs["true_position"]), float(obs["velocity"])
    u = 2.0 * (float(obs["target"]) - x) - 1.0 * v - float(obs["disturbance"])
    return {"force": _clip(u, -1, 1)}


def lowpass(obs: dict) -> dict:
    """lowpass, privileged: PD on the true position and velocity (hidden from the policy, which
    sees a noisy position only)."""
    u = 4.0 * (float(obs["target"]) - float(obs["true_position"])) - 1.5 * float(obs["velocity"])
    return {"force": _clip(u, -1, 1)}


def latch(obs: dict) -> dict:
    """latch, privileged: grips exactly while the object is in the hand."""
    return {"grip": 1.0 if float(obs["present"]) > 0.5 else 0.0}


def timer(obs: dict) -> dict:
    """timer, privileged: reads the steps to the next bounce and pushes through the last 4."""
    return {"push": 1.0 if float(obs["to_bounce"]) <= 4 else 0.0}


class RateLimit:
    """rate_limit: rate_limit.pol's computation with gain 1.5 (the policy's reads only)."""

    K, MAX_STEP = 1.5, 0.1

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.last = 0.0

    def __call__(self, obs: dict) -> dict:
        wanted = _clip(self.K * float(obs["heading_err"]), -1, 1)
        self.last = _clip(wanted, self.last - self.MAX_STEP, self.last + self.MAX_STEP)
        return {"steer": self.last}


class Oscillator:
    """oscillator: its own clock (a central pattern generator), oscillator.pol's computation with
    frequency 0.06 cycles per step, amplitude 1, lag 0.25 cycles and gain 3."""

    FREQ, AMP, LAG, KP = 0.06, 1.0, 0.25, 3.0

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.phase = 0.0

    def __call__(self, obs: dict) -> dict:
        ta = self.AMP * math.sin(2 * math.pi * self.phase)
        tb = self.AMP * math.sin(2 * math.pi * (self.phase - self.LAG))
        self.phase = (self.phase + self.FREQ) % 1.0
        return {"torque_a": _clip(self.KP * (ta - float(obs["joint_a"])), -1, 1),
                "torque_b": _clip(self.KP * (tb - float(obs["joint_b"])), -1, 1)}


class PickPlace:
    """pick_place: the five-mode state machine (approach, descend, grasp with a dwell, lift with a
    retry, transport), pick_place.pol's computation with gains 5 and 5; reads what a policy reads
    (never `held` or `grasp_p`)."""

    APPROACH, DESCEND, GRASP, LIFT, TRANSPORT = range(5)
    DWELL, K_XY, K_Z = 5, 5.0, 5.0

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.mode, self.timer, self.retries = self.APPROACH, 0, 0

    def __call__(self, obs: dict) -> dict:
        dx, h, f, dg = (float(obs[k]) for k in ("dx_obj", "height", "force", "dx_goal"))
        m = self.mode
        act = {"move_xy": _clip(self.K_XY * (dg if m == self.TRANSPORT else dx), -1, 1)
               if m in (self.TRANSPORT, self.APPROACH) else 0.0,
               "move_z": _clip(-self.K_Z * h, -1, 1) if m == self.DESCEND else (1.0 if m == self.LIFT else 0.0),
               "grip": 1.0 if m in (self.GRASP, self.LIFT, self.TRANSPORT) else 0.0,
               "give_up": 1.0 if self.retries >= 3 else 0.0}
        failed = m == self.LIFT and f < 0.1
        self.timer = self.timer + 1 if m == self.GRASP else 0
        if m == self.APPROACH and abs(dx) < 0.02:
            self.mode = self.DESCEND
        elif m == self.DESCEND and h < 0.01:
            self.mode = self.GRASP
        elif m == self.GRASP and self.timer - 1 >= self.DWELL:
            self.mode = self.LIFT
        elif failed:
            self.mode = self.DESCEND
        elif m == self.LIFT and h > 0.2:
            self.mode = self.TRANSPORT
        self.retries += int(failed)
        return act


pid = PID()
rate_limit = RateLimit()
oscillator = Oscillator()
pick_place = PickPlace()

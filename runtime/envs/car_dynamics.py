"""gymnasium's Car Racing car, its per-step dynamics in Python floats.

`ScalarCar` is gymnasium's `Car` (gymnasium/envs/box2d/car_dynamics.py, 1.4.0, by Oleg
Klimov, MIT licence) with `steer`, `brake`, `gas` and `step` rewritten line for line, every
value and every Box2D call that changes the world the same, with one difference: the scalar
maths run on Python floats instead of numpy scalars. gymnasium hands the car its action as
numpy scalars and calls `np.sign`, `np.square`, `np.sqrt` and `np.clip` on single numbers,
about a dozen times per car per frame, so nearly every operation of a frame paid numpy's
per-call overhead; here the action's values become Python floats on arrival and those calls
are `math` and Python's operators (a vector's components are also read as `.x` and `.y`, not
through b2Vec2's Python `__getitem__`, and a joint's angle once). That took about a fifth off
a whole Car Racing rollout step (docs/performance.md, section 6, "stop 32"). Why this is not
left to the library: the stock car is what every Car Racing step pays, and gymnasium has no
way to run it without numpy scalars.

Why it is the same simulation: `+ - * /` and `sqrt` are IEEE-754 double operations, correctly
rounded, in numpy's float64 and in Python's float alike, so every value below equals
gymnasium's bit for bit (`float()` of a numpy float64 is exact); `_sign` and `_clip01` return
what `np.sign` and `np.clip(x, 0, 1)` return (the signed zeros and NaN included, and an int for
an int, as `np.sign` does); only the types differ (float instead of numpy.float64).
tests/runtime/envs/test_env_car_racing.py steps this car and gymnasium's side by side and compares every
body's position, angle and velocities, every wheel's state and every observation bit for bit,
over random, braking and expert driving.

`SemanticCarRacing.reset` turns the car gymnasium built into a `ScalarCar` (its class
only: the object, its bodies and joints stay gymnasium's).
"""

from __future__ import annotations

import math

from gymnasium.envs.box2d.car_dynamics import ENGINE_POWER, FRICTION_LIMIT, SIZE, WHEEL_MOMENT_OF_INERTIA, Car


def _sign(x):
    """`np.sign(x)` of a float or an int: -1, 0 or 1 (a float for a float; 0.0 for both signed
    zeros, NaN for NaN)."""
    if x > 0:
        return 1 if type(x) is int else 1.0
    if x < 0:
        return -1 if type(x) is int else -1.0
    if x == 0:
        return 0 if type(x) is int else 0.0
    return x  # NaN


def _clip01(x) -> float:
    """`np.clip(x, 0, 1)` of one number: numpy's maximum, then minimum, keep the first
    argument unless the bound is strictly beyond it (so -0.0 stays -0.0 and NaN stays NaN),
    as Python's `max` and `min` do."""
    return float(min(max(x, 0), 1))


class ScalarCar(Car):
    """gymnasium's `Car`; `steer`, `brake`, `gas` and `step` in Python floats (see the module docstring)."""

    def steer(self, s):
        s = float(s)  # gymnasium hands over numpy scalars: the same value, as a Python float
        self.wheels[0].steer = s
        self.wheels[1].steer = s

    def brake(self, b):
        b = float(b)
        for w in self.wheels:
            w.brake = b

    def gas(self, gas):
        gas = _clip01(gas)
        for w in self.wheels[2:4]:
            diff = gas - w.gas
            if diff > 0.1:
                diff = 0.1  # gradually increase, but stop immediately
            w.gas += diff

    def step(self, dt):
        for w in self.wheels:
            # Steer each wheel
            turn = w.steer - w.joint.angle  # gymnasium reads the joint's angle twice (a Box2D call each)
            dir = _sign(turn)
            val = abs(turn)
            w.joint.motorSpeed = dir * min(50.0 * val, 3.0)

            # Position => friction_limit
            grass = True
            friction_limit = FRICTION_LIMIT * 0.6  # Grass friction if no tile
            for tile in w.tiles:
                friction_limit = max(friction_limit, FRICTION_LIMIT * tile.road_friction)
                grass = False

            # Force. A b2Vec2's `[0]` and `[1]` go through a Python `__getitem__` (3x its `.x`)
            forw = w.GetWorldVector((0, 1))
            side = w.GetWorldVector((1, 0))
            v = w.linearVelocity
            fx, fy, sx, sy, vx, vy = forw.x, forw.y, side.x, side.y, v.x, v.y
            vf = fx * vx + fy * vy  # forward speed
            vs = sx * vx + sy * vy  # side speed

            w.omega += dt * ENGINE_POWER * w.gas / WHEEL_MOMENT_OF_INERTIA / (abs(w.omega) + 5.0)
            self.fuel_spent += dt * ENGINE_POWER * w.gas

            if w.brake >= 0.9:
                w.omega = 0
            elif w.brake > 0:
                BRAKE_FORCE = 15  # radians per second
                dir = -_sign(w.omega)
                val = BRAKE_FORCE * w.brake
                if abs(val) > abs(w.omega):
                    val = abs(w.omega)  # low speed => same as = 0
                w.omega += dir * val
            w.phase += w.omega * dt

            vr = w.omega * w.wheel_rad  # rotating wheel speed
            f_force = -vf + vr  # force direction is direction of speed difference
            p_force = -vs

            f_force *= 205000 * SIZE * SIZE
            p_force *= 205000 * SIZE * SIZE
            force = math.sqrt(f_force * f_force + p_force * p_force)  # np.sqrt(np.square(f) + np.square(p))

            # Skid trace
            if abs(force) > 2.0 * friction_limit:
                if w.skid_particle and w.skid_particle.grass == grass and len(w.skid_particle.poly) < 30:
                    w.skid_particle.poly.append((w.position[0], w.position[1]))
                elif w.skid_start is None:
                    w.skid_start = w.position
                else:
                    w.skid_particle = self._create_particle(w.skid_start, w.position, grass)
                    w.skid_start = None
            else:
                w.skid_start = None
                w.skid_particle = None

            if abs(force) > friction_limit:
                f_force /= force
                p_force /= force
                force = friction_limit  # Correct physics here
                f_force *= force
                p_force *= force

            w.omega -= dt * f_force * w.wheel_rad / WHEEL_MOMENT_OF_INERTIA

            w.ApplyForceToCenter((p_force * sx + f_force * fx, p_force * sy + f_force * fy), True)

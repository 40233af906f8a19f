"""examples/car_racing/initial.pol written by hand in JAX: the baseline the
compiled policy must match in speed.

What a person would write from the .pol: one unbatched function (vmap it for a
batch), weights kept unconstrained and mapped through Stan's transforms at the
top, the same latents, the actions' means clipped to their ranges once. It reads
the same pytrees as `CompiledPolicy.apply` (params: name -> unconstrained
scalar; obs: name -> array of its declared shape) and returns the same
(actions, latents) dicts, so a timing difference is the lowering's and not the
calling convention's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def constrain(u: dict) -> dict:
    """Unconstrained params -> weight values (lower a: a + exp(u); upper b: b - exp(u);
    interval [a, b]: a + (b - a) * sigmoid(u))."""
    lower0 = ("k_look", "k_heading", "k_center", "k_yaw", "k_yaw_v", "k_curve", "k_sharp", "k_side",
              "k_grass", "k_gas", "k_brake")
    w = {n: jnp.exp(u[n]) for n in lower0}
    w["w_slip"] = -jnp.exp(u["w_slip"])
    w["v_max"] = 0.2 + 1.2 * jax.nn.sigmoid(u["v_max"])
    w["s_steer"] = 0.01 + 0.49 * jax.nn.sigmoid(u["s_steer"])
    w["s_steer_k"] = 0.5 * jax.nn.sigmoid(u["s_steer_k"])
    w["s_pedal"] = 0.01 + 0.49 * jax.nn.sigmoid(u["s_pedal"])
    return w


def apply(params: dict, obs: dict) -> tuple[dict, dict]:
    """One observation (tiles (12, 4), wheel_speed (4,), on_grass (4,), the rest
    scalars) -> (actions {steer, gas, brake}: clipped means, latents {9 names}), all scalars."""
    w = constrain(params)
    tiles, speed, offset = obs["tiles"], obs["speed"], obs["offset"]

    look_x = jnp.mean(tiles[2:6, 0])
    yaw_gain = w["k_yaw"] * (1 + w["k_yaw_v"] * speed)
    steer_cmd = (w["k_look"] * look_x + w["k_heading"] * obs["heading_err"] - w["k_center"] * offset
                 - yaw_gain * obs["ang_vel"])

    curvature = jnp.mean(jnp.abs(tiles[:, 2]))
    sharp_ahead = jnp.max(tiles[:8, 3])
    slip = jax.nn.relu(jnp.mean(obs["wheel_speed"][2:4]) - speed)
    grass = jnp.mean(obs["on_grass"])
    target_speed = jnp.clip(w["v_max"] - w["k_curve"] * curvature - w["k_sharp"] * sharp_ahead
                            - w["k_side"] * jnp.abs(offset) + w["w_slip"] * slip - w["k_grass"] * grass, 0.1, 1.4)
    speed_err = target_speed - speed

    actions = {
        "steer": jnp.clip(steer_cmd, -1, 1),
        "gas": jnp.clip(w["k_gas"] * speed_err, 0, 1),
        "brake": jnp.clip(-w["k_brake"] * speed_err, 0, 1),
    }
    latents = {"look_x": look_x, "yaw_gain": yaw_gain, "steer_cmd": steer_cmd, "curvature": curvature,
               "sharp_ahead": sharp_ahead, "slip": slip, "grass": grass, "target_speed": target_speed,
               "speed_err": speed_err}
    return actions, latents


def batched(fn):
    """jit(vmap(fn)) over a leading batch axis of obs; params shared."""
    return jax.jit(jax.vmap(fn, in_axes=(None, 0)))

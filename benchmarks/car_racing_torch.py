"""examples/car_racing/initial.pol as the paper writes a structured policy: a
PyTorch nn.Module whose one `forward` returns the actions and the named latents.

Natively batched (every obs has a leading batch axis). Weights are nn.Parameters
in the unconstrained space, mapped through the same Stan transforms as polc's
(lower a: a + exp(u); upper b: b - exp(u); interval [a, b]: a + (b - a) * sigmoid(u)).
Only the benchmark imports this module, in a process that never imports jax.
"""

from __future__ import annotations

import torch
from torch import nn

# name -> (lo, hi) of every weight, as declared in initial.pol.
INF = float("inf")
CONSTRAINTS = {
    "k_look": (0, INF), "k_heading": (0, INF), "k_center": (0, INF), "k_yaw": (0, INF), "k_yaw_v": (0, INF),
    "v_max": (0.2, 1.4), "k_curve": (0, INF), "k_sharp": (0, INF), "k_side": (0, INF), "w_slip": (-INF, 0),
    "k_grass": (0, INF), "k_gas": (0, INF), "k_brake": (0, INF), "s_steer": (0.01, 0.5), "s_steer_k": (0, 0.5),
    "s_pedal": (0.01, 0.5),
}


def constrain(u: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    if lo > -INF and hi < INF:
        return lo + (hi - lo) * torch.sigmoid(u)
    if lo > -INF:
        return lo + torch.exp(u)
    if hi < INF:
        return hi - torch.exp(u)
    return u


class CarRacingPolicy(nn.Module):
    """forward(obs) -> (actions, latents).

    obs: tiles (B, 12, 4), wheel_speed (B, 4), on_grass (B, 4), speed, ang_vel,
    offset, heading_err (B,). actions: steer, gas, brake (B,), the means clipped
    to their ranges; latents: the 9 named latents of initial.pol, each (B,)."""

    def __init__(self, unconstrained: dict[str, float]):
        super().__init__()
        self.u = nn.ParameterDict({n: nn.Parameter(torch.tensor(float(unconstrained[n]))) for n in CONSTRAINTS})

    def weights(self) -> dict[str, torch.Tensor]:
        return {n: constrain(self.u[n], lo, hi) for n, (lo, hi) in CONSTRAINTS.items()}

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        w = self.weights()
        tiles, speed, offset = obs["tiles"], obs["speed"], obs["offset"]

        look_x = tiles[:, 2:6, 0].mean(-1)
        yaw_gain = w["k_yaw"] * (1 + w["k_yaw_v"] * speed)
        steer_cmd = (w["k_look"] * look_x + w["k_heading"] * obs["heading_err"] - w["k_center"] * offset
                     - yaw_gain * obs["ang_vel"])

        curvature = tiles[:, :, 2].abs().mean(-1)
        sharp_ahead = tiles[:, :8, 3].amax(-1)
        slip = torch.relu(obs["wheel_speed"][:, 2:4].mean(-1) - speed)
        grass = obs["on_grass"].mean(-1)
        target_speed = torch.clamp(w["v_max"] - w["k_curve"] * curvature - w["k_sharp"] * sharp_ahead
                                   - w["k_side"] * offset.abs() + w["w_slip"] * slip - w["k_grass"] * grass,
                                   0.1, 1.4)
        speed_err = target_speed - speed

        actions = {
            "steer": torch.clamp(steer_cmd, -1, 1),
            "gas": torch.clamp(w["k_gas"] * speed_err, 0, 1),
            "brake": torch.clamp(-w["k_brake"] * speed_err, 0, 1),
        }
        latents = {"look_x": look_x, "yaw_gain": yaw_gain, "steer_cmd": steer_cmd, "curvature": curvature,
                   "sharp_ahead": sharp_ahead, "slip": slip, "grass": grass, "target_speed": target_speed,
                   "speed_err": speed_err}
        return actions, latents

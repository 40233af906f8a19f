"""`polc rl --engine brax`: brax's PPO driving a compiled `.pol` policy on MJX.

    networks.py   the compiled policy as brax's policy network, its action distribution
    train.py      BraxConfig, the training session, outputs, checkpoint and resume

Importing this package imports nothing heavy (jax and brax load on first use).
"""

from .networks import BRAX_ENVS, BraxError
from .train import BraxConfig, BraxResult, train_brax

__all__ = ["BRAX_ENVS", "BraxConfig", "BraxError", "BraxResult", "train_brax"]

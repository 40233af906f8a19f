"""Evolution strategies on the mean actions (`polc rl --engine es`):

    population.py  a population of params in one set of environments, row i in environment i
    train.py       ESConfig, the update (antithetic perturbations, centred ranks, Adam), outputs; resumable

It shares the run directory (`rl.run`), checkpoints, held-out seeds and curve with
the paper's objective (`rl.train`).
"""

from .train import ESConfig, ESResult, train

__all__ = ["ESConfig", "ESResult", "train"]

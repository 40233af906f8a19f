"""Imitation learning (`polc fit`): a policy's weights fitted to a demonstration, laid
out as the RL learner is (`polc.runtime.rl`):

    losses.py   the objective: Gaussian negative log-likelihood of the demonstrated actions
    train.py    FitConfig, the fit loop with restarts and early stopping, FitResult
    cli.py      the `polc fit` command

Names are loaded on first use (the CLI imports the package on every call; jax waits for a fit).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "losses": ["Batch", "batch_loss", "per_step_loss"],
    "train": ["Demos", "FitConfig", "FitError", "FitResult", "RestartResult", "fit", "load_demos"],
})

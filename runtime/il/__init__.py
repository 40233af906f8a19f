"""Imitation learning (`polc fit`): a policy's weights fitted to a demonstration, laid
out as the RL learner is (`polc.runtime.rl`):

    losses.py   the objective: Gaussian negative log-likelihood of the demonstrated actions
                plus the negative log prior (MAP)
    train.py    FitConfig, the fit loop with restarts and early stopping, FitResult
    closed_loop.py  the declared and the fitted weights scored in closed loop on training seeds
    defaults.py the command line's defaults (prior scale, closed-loop episodes), import-free
    score_cache.py  the declared weights' closed-loop score kept on disk per structure and seeds
    step.py     the compiled training step, made once per structure and reused (flat Adam state)
    jaxcache.py the persistent XLA compilation cache every runtime command turns on
    cli.py      the `polc fit` command

Names are loaded on first use (the CLI imports the package on every call; jax waits for a fit).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "closed_loop": ["ClosedLoop", "closed_loop_check", "training_seeds"],
    "losses": ["Batch", "batch_loss", "centre", "episode_loss", "has_memory", "objective", "per_step_loss",
               "prior_penalty"],
    "defaults": ["CHECK_EPISODES", "PRIOR_SCALE"],
    "score_cache": ["ScoreCache", "default_cache", "score_key"],
    "step": ["FitStep", "fit_step", "structure_key"],
    "train": ["Demos", "FitConfig", "FitError", "FitResult", "RestartResult", "episodes", "fit", "load_demos",
              "split_episodes"],
})

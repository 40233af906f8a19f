"""Defaults of `polc fit` that the command line shows without importing jax or numpy.

PRIOR_SCALE     std, in the unconstrained space, of the pull of every weight without a
                prior toward its declared value (`FitConfig.prior_scale`, `--prior-scale`);
                chosen from measurements: docs/language.md, "Priors".
CHECK_EPISODES  closed-loop episodes per weight set after a fit (`--check-episodes`).
"""

PRIOR_SCALE = 0.25
CHECK_EPISODES = 5

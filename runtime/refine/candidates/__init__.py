"""Candidate populations (`polc refine --candidates K`, beyond the paper): K revisions per
REVISE move, each checked, fitted and scored, the best kept.

    revise.py   the move: candidate 1 is the move's own revision, K - 1 more are asked for
                with the same prompt; each is checked and repaired, all are scored, the best
                becomes next.pol; candidates.json and metrics.json's `candidates` record it
    score.py    fitting and scoring a population on the training seeds (`evaluate_candidates`,
                touching no run directory and no model), the best of the scores, the tie order
    on_ray.py   the same scoring spread over a Ray cluster, one task per candidate

Names are loaded on first use.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "revise": ["Population"],
    "score": ["Candidate", "Score", "best", "candidate_order", "evaluate_candidates"],
    "on_ray": ["ray_evaluate_candidates"],
})

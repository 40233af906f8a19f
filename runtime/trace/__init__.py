"""Running policies (and experts) in environments, and recording what they compute:

    rollout.py    episodes of a compiled policy in N environments, traced or not; the trace's columns
    vector.py     how those environments are stepped (in-process by default; worker processes)
    evaluate.py   the score over unseen seeds: mean actions or sampled, the env's metric
    demos.py      the environment's expert, recorded as a demonstration table
    meta.py       a trace's metadata (polc rollout's and a refinement round's): one builder
    cli.py        polc demos, polc rollout, polc eval

Names are loaded on first use (the CLI imports the package on every call).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "rollout": ["Episode", "RolloutConfig", "RolloutResult", "TraceLayout", "rollout", "verify_compatible"],
    "vector": ["default_n_envs", "make_vector_env"],
    "evaluate": ["EvalResult", "eval_seeds", "evaluate", "evaluate_expert"],
    "demos": ["DemoEpisode", "demo_columns", "run_expert", "write_demos"],
    "meta": ["TraceMeta", "env_meta", "seed_kind"],
})

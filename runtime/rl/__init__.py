"""Reinforcement learning beyond the demonstration (`polc rl`), brax style:

    losses.py      the objective: clipped window likelihood ratio, group-relative reward-to-go
    collect.py     sampled episodes in N environments, one batched policy call per step
    train.py       RLConfig, the update loop (trust region, std floor); resumable
    es/            evolution strategies on the mean actions (`polc rl --engine es`)
    run.py         the run directory both learners share: outputs, keep best, resuming, progress
    heldout.py     training and held-out seeds, the held-out evaluation of --keep best
    checkpoint.py  the atomic checkpoint `--resume` continues from
    curve.py       the learning-curve PNG
    cli.py         the `polc rl` command

Importing this package imports nothing heavy (the CLI registers `polc rl` on every call).
"""

"""Would choosing among `polc fit`'s restarts in closed loop (training seeds) help?

    python scripts/restart_choice.py examples/car_racing/copycat.pol [--restarts 5] [--train 5] [--unseen 100]

Fits the structure to the demonstration as `polc fit` does (same FitConfig, same
split, same restarts) but keeps every restart's weights, then scores each restart, and
the declared weights, with mean actions on the `--train` training seeds that `polc fit`'s
closed-loop check uses and on the first `--unseen` evaluation seeds. Prints one row per
restart: validation loss, training-seed mean, unseen mean. The question it answers:
does the restart that the training seeds rank first beat the one the validation loss
picks (what `polc fit` keeps today) on the unseen tracks?
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--demos", nargs="+", default=["examples/car_racing/demo.parquet"])
    ap.add_argument("--env", default="car_racing")
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--train", type=int, default=5)
    ap.add_argument("--unseen", type=int, default=100)
    args = ap.parse_args()

    import jax

    from polc.runtime import cli as rc
    from polc.runtime.il import train as T
    from polc.runtime.il.closed_loop import training_seeds
    from polc.runtime.il.recovery import concat_demos, used_seeds
    from polc.runtime.trace.evaluate import eval_seeds, evaluate_many
    from polc.runtime.trace.rollout import RolloutConfig
    from polc.runtime.trace.vector import default_n_envs

    policy = rc.compile_policy(args.file)
    tables = [rc.read_table_or_usage(p) for p in args.demos]
    demos = concat_demos([T.load_demos(t, policy.program) for t in tables])
    config = T.FitConfig(restarts=args.restarts)
    split = T.split_episodes if T.has_memory(policy) else T.split
    train, val = split(demos, config.val_fraction, config.seed)
    start = T._initial(policy, config, 0)
    trainer = T._Trainer(policy, start, train, val, config)
    fits = []
    for r in range(config.restarts):
        res, flat = T._restart(trainer, start if r == 0 else T._initial(policy, config, r), r, config, T._NoProgress())
        fits.append((res, trainer.step.unravel(flat)))
    spec = rc.env_spec(args.env)
    tseeds = training_seeds(spec, args.train, used_seeds([t.metadata for t in tables]))
    useeds = eval_seeds(spec, args.unseen)
    params = [policy.init(jax.random.PRNGKey(0))] + [p for _, p in fits]
    names = ["declared"] + [f"restart {res.restart + 1}" for res, _ in fits]
    tr = evaluate_many(policy, params, spec, tseeds, RolloutConfig(n_envs=default_n_envs(len(tseeds))))
    un = evaluate_many(policy, params, spec, useeds, RolloutConfig(n_envs=default_n_envs(len(useeds))))
    print(f"{args.file}: training seeds {tseeds[0]}..{tseeds[-1]}, unseen {useeds[0]}..{useeds[-1]}")
    print("| weights | validation loss | training seeds | unseen |")
    print("| --- | --- | --- | --- |")
    vals = [float("nan")] + [res.val_loss for res, _ in fits]
    for name, v, a, b in zip(names, vals, tr, un):
        print(f"| {name} | {v:.5g} | {np.mean(a.values):.1f} | {np.mean(b.values):.1f} ± {np.std(b.values):.1f} |")
    by_val = 1 + int(np.nanargmin(vals[1:]))
    by_train = 1 + int(np.argmax([np.mean(a.values) for a in tr[1:]]))
    print(f"validation loss picks {names[by_val]} ({np.mean(un[by_val].values):.1f} unseen); "
          f"training seeds pick {names[by_train]} ({np.mean(un[by_train].values):.1f} unseen)")


if __name__ == "__main__":
    main()

"""`polc rl FILE.pol --params P --env NAME --resets N -o DIR [--resume] [overrides]`,
and with `--engine brax`, brax's PPO on an MJX environment:
`polc rl FILE.pol --engine brax --env door_mjx --num-envs N --timesteps T -o DIR [--params P] [--resume]`
(`polc.runtime.rl.brax`; `--seed`, `--lr`, `--gamma`, `--clip` apply to both
engines, every other setting to one engine only: using it with the other is a
usage error).

Exit codes as every runtime command: 0 done, 1 a failure the user must fix
(a policy without noise, a run directory holding another run, non-finite
updates), 2 bad usage. Ctrl-C or SIGTERM stops after the last checkpoint;
`--resume` continues from it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .. import cli as rc
from ..cli import UsageError
from ..cluster.flags import add_ray_flags, pool_for

# (flag, RLConfig field, type, help): the settings a user may override.
OVERRIDES = (
    ("--gamma", "gamma", float, "discount of the reward-to-go (default 0.98)"),
    ("--clip", "clip", float, "likelihood-ratio clip range (default 0.2)"),
    ("--lr", "lr", float, "Adam learning rate (default 7e-3)"),
    ("--episodes-per-update", "episodes_per_update", int, "episodes per update (default 20)"),
    ("--epochs", "epochs", int, "passes over an update's episodes (default 3)"),
    ("--minibatches", "minibatches", int, "Adam steps per epoch (default 1)"),
    ("--window", "window", int, "steps per likelihood-ratio window (default 10; 1 = per step)"),
    ("--seeds-per-update", "seeds_per_update", int, "groups (env seeds) per update (default 1)"),
    ("--seed", "seed", int, "seed of the sampled noise (default 0)"),
    ("--target-kl", "target_kl", float,
     "trust region: an update stops where its approx. KL reaches this (default 0.05; 0 = off, the paper)"),
    ("--min-std", "min_std", float, "floor on every action's sampling std during RL (default 0.1; 0 = off)"),
    ("--max-grad-norm", "max_grad_norm", float, "clip the gradient's global norm (default 1; 0 = off)"),
    ("--normalise-advantages", "normalise_advantages", "bool",
     "normalise the advantages over each update (default on; --no-normalise-advantages: the paper)"),
    ("--keep", "keep", ("best", "last"),
     "rl.params: the last params (default) or the best by a held-out evaluation on validation seeds"),
    ("--val-episodes", "val_episodes", int, "--keep best: held-out episodes per evaluation (default 5)"),
    ("--val-every", "val_every", int, "--keep best: updates between held-out evaluations (default 5)"),
    ("--val-actions", "val_actions", ("mean", "sampled"),
     "--keep best: evaluate the mean (default) or the sampled actions"),
    ("--anneal", "anneal", float,
     "share of the updates, at the end, over which the sampling std shrinks to 0.1x (default 0 = off)"),
    ("--anneal-lr", "anneal_lr", "bool", "--anneal: scale Adam's step down with the sampling std (default off)"),
)


# Flags of one engine only (dest, flag): given with the other engine they are usage errors.
POLC_ONLY = (("resets", "--resets"), ("n_envs", "--n-envs"), ("episodes_per_update", "--episodes-per-update"),
             ("epochs", "--epochs"), ("minibatches", "--minibatches"), ("window", "--window"),
             ("seeds_per_update", "--seeds-per-update"), ("target_kl", "--target-kl"), ("min_std", "--min-std"),
             ("max_grad_norm", "--max-grad-norm"), ("normalise_advantages", "--normalise-advantages"),
             ("keep", "--keep"), ("val_episodes", "--val-episodes"), ("val_every", "--val-every"),
             ("val_actions", "--val-actions"), ("anneal", "--anneal"), ("anneal_lr", "--anneal-lr"))
BRAX_ONLY = (("num_envs", "--num-envs"), ("timesteps", "--timesteps"), ("evals", "--evals"))
# polc-engine override -> BraxConfig field, for the settings both engines share.
SHARED = {"seed": "seed", "lr": "learning_rate", "gamma": "discounting", "clip": "clipping_epsilon"}


def _given(args: argparse.Namespace, dest: str) -> bool:
    """The flag was set on the command line (--n-envs defaults to 0, every other one to None)."""
    value = getattr(args, dest)
    return value is not None and not (dest == "n_envs" and value == 0)


def cmd_rl(args: argparse.Namespace) -> int:
    other = BRAX_ONLY if args.engine == "polc" else POLC_ONLY
    wrong = [flag for dest, flag in other if _given(args, dest)]
    if wrong:
        owner = "brax" if args.engine == "polc" else "polc"
        raise UsageError(f"polc: {', '.join(wrong)} belong{'s' if len(wrong) == 1 else ''} to the {owner} engine, "
                         f"not --engine {args.engine}.")
    if args.engine == "brax":
        return _cmd_rl_brax(args)
    if args.resets is None:
        raise UsageError("polc: the polc engine needs --resets N (the budget of training episodes).")
    return _cmd_rl_polc(args)


def _cmd_rl_polc(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .checkpoint import exists
    from .collect import RLError, verify_stochastic
    from .train import PARAMS, RLConfig, train
    from ..trace.vector import default_n_envs

    spec = rc.env_spec(args.env)
    policy = rc.compile_policy(args.file)
    try:
        verify_stochastic(policy.program)
    except RLError as e:
        return rc.fail(str(e))
    if args.resets < 0:
        raise UsageError("polc: --resets must be at least 0.")
    if args.resume and not exists(args.output):
        print(f"polc: no run to resume in '{args.output}'; starting one.", file=sys.stderr)
    settings = {field: getattr(args, field) for _, field, _, _ in OVERRIDES if getattr(args, field) is not None}
    config = RLConfig(resets=args.resets, **settings)
    if args.resume and exists(args.output):
        config = _resumed_config(args.output, config, settings)
    e = config.episodes_per_update
    resuming = args.resume and exists(args.output)
    if args.n_envs or not resuming:  # a resumed run keeps its own n_envs unless told otherwise
        config = replace(config, n_envs=max(1, args.n_envs or default_n_envs(e)))
    try:
        config.verify()
    except ValueError as err:
        raise UsageError(f"polc: {err}.") from None
    params = rc.params_for(policy, args.params)
    try:
        with rc.sigterm_interrupts():
            with pool_for(args, spec, policy) as pool:
                run = train
                if pool is not None:  # each update's episodes collected by the cluster's workers
                    from functools import partial

                    from ..cluster.remote import ray_train

                    run = partial(ray_train, pool)
                result = run(policy, params, spec, config, args.output, resume=args.resume,
                             start={"file": args.params}, progress=not args.quiet)
    except RLError as err:
        return rc.fail(str(err))
    except KeyboardInterrupt:
        print(f"polc: interrupted; the last finished update is kept in {args.output} "
              f"(continue with --resume).", file=sys.stderr)
        raise
    log = result.log
    if not log["log"]:
        print(f"polc: --resets {args.resets} is less than one update ({e} episodes); nothing trained.",
              file=sys.stderr)
        return 0
    first, last = log["log"][0], log["log"][-1]
    updates = f"{log['updates']} update{'' if log['updates'] == 1 else 's'}"
    kept = ""
    if "kept" in log:
        k = log["kept"]
        kept = (f"; kept update {k['update']} (held-out {k['actions']}-action score {k['score']:.4g} on seeds "
                f"{k['seeds'][0]}..{k['seeds'][-1]}; the last params are in {os.path.join(args.output, log['last_params'])})")
    print(f"wrote {os.path.join(args.output, PARAMS)}: {updates}, {log['resets']} resets, "
          f"mean training return {first['return_mean']:.1f} -> {last['return_mean']:.1f}, "
          f"{log['elapsed_s']:.0f} s{kept}", file=sys.stderr)
    return 0


def _resumed_config(directory: str, config: Any, settings: dict):
    """The checkpoint's settings with the new budget; an explicit override must agree."""
    import json

    import numpy as np

    from .checkpoint import NAME
    from .train import RLConfig

    try:
        with np.load(os.path.join(directory, NAME), allow_pickle=False) as z:
            saved = RLConfig.from_saved(json.loads(str(z["meta"]))["config"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"polc: cannot read the checkpoint in '{directory}': {e}.") from None
    clash = [f"--{k.replace('_', '-')} {v} (the run used {getattr(saved, k)})" for k, v in settings.items()
             if getattr(saved, k) != v]
    if clash:
        raise UsageError("polc: --resume continues a run with its own settings: " + "; ".join(clash) + ".")
    from dataclasses import replace

    return replace(saved, resets=config.resets)


def _cmd_rl_brax(args: argparse.Namespace) -> int:
    """`polc rl --engine brax` (see `polc.runtime.rl.brax`)."""
    from dataclasses import replace

    from ..trace.rollout import verify_compatible
    from .brax import BRAX_ENVS, BraxConfig, BraxError, train_brax
    from .brax.train import CHECKPOINT, PARAMS, exists, saved_config

    if args.env not in BRAX_ENVS:
        raise UsageError(f'polc: --engine brax runs MJX environments only ({", ".join(sorted(BRAX_ENVS))}), '
                         f'not "{args.env}".')
    if args.num_envs is None or args.timesteps is None:
        raise UsageError("polc: --engine brax needs --num-envs N and --timesteps T.")
    if args.num_envs < 1 or args.timesteps < 0:
        raise UsageError("polc: --num-envs must be at least 1 and --timesteps at least 0.")
    spec = rc.env_spec(args.env)
    policy = rc.compile_policy(args.file)
    settings = {SHARED[k]: getattr(args, k) for k in SHARED if getattr(args, k) is not None}
    if args.evals is not None:
        if args.evals < 1:
            raise UsageError("polc: --evals must be at least 1.")
        settings["evals"] = args.evals
    config = BraxConfig(num_envs=args.num_envs, timesteps=args.timesteps, **settings)
    resuming = args.resume and exists(args.output)
    if args.resume and not resuming:
        print(f"polc: no run to resume in '{args.output}'; starting one.", file=sys.stderr)
    if resuming:
        try:
            config = replace(saved_config(args.output), timesteps=args.timesteps)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UsageError(f"polc: cannot read the checkpoint in '{args.output}': {e}.") from None
        flags = {"num_envs": "--num-envs", "evals": "--evals", **{f: "--" + k for k, f in SHARED.items()}}
        asked = {"num_envs": args.num_envs, **settings}
        clash = [f"{flags[k]} {v} (the run used {getattr(config, k)})" for k, v in asked.items()
                 if getattr(config, k) != v]
        if clash:
            raise UsageError("polc: --resume continues a run with its own settings: " + "; ".join(clash) + ".")
    import jax

    try:
        config.verify(jax.local_device_count())
    except ValueError as err:
        raise UsageError(f"polc: {err}.") from None
    verify_compatible(policy.program, spec.schema)
    params = rc.params_for(policy, args.params)
    try:
        with rc.sigterm_interrupts():
            result = train_brax(policy, params, args.env, config, args.output, resume=args.resume,
                                start={"file": args.params}, progress=not args.quiet)
    except BraxError as err:
        return rc.fail(str(err))
    except KeyboardInterrupt:
        print(f"polc: interrupted; the last finished epoch is kept in {args.output} ({CHECKPOINT}; "
              f"continue with --resume).", file=sys.stderr)
        raise
    log = result.log
    if not log["log"]:
        print(f"polc: the run in '{args.output}' already has {log['timesteps']:,} timesteps; nothing trained.",
              file=sys.stderr)
        return 0
    first, last = log["log"][0], log["log"][-1]
    metric = f", {spec.metric.key} {first['metric_mean']:.4g} -> {last['metric_mean']:.4g}" if "metric_mean" in last else ""
    print(f"wrote {os.path.join(args.output, PARAMS)}: {log['timesteps']:,} timesteps on {log['devices']} device(s), "
          f"evaluation return {first['return_mean']:.1f} -> {last['return_mean']:.1f}{metric}, "
          f"{log['elapsed_s']:.0f} s", file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    """Add `polc rl` to the `polc` subcommands."""
    c = sub.add_parser("rl", help="reinforcement learning from fitted params (the paper's objective)")
    c.add_argument("file", help="the .pol policy (every action must declare noise)")
    c.add_argument("--params", help="params to start from, e.g. from polc fit (default: the declared weights)")
    c.add_argument("--env", required=True, help="environment name, e.g. car_racing")
    c.add_argument("--engine", choices=("polc", "brax"), default="polc",
                   help="polc: the paper's objective on gymnasium envs (default); brax: brax's PPO on an MJX env")
    c.add_argument("--resets", type=int, default=None,
                   help="polc engine (required): budget of training episodes (environment resets); stops before exceeding it")
    c.add_argument("-o", "--output", required=True, help="run directory: rl.params, log.json, curve.png, checkpoint")
    c.add_argument("--resume", action="store_true", help="continue the run in the output directory")
    c.add_argument("--n-envs", type=int, default=0, help="polc engine: environments stepped together (default: an update's episodes, up to 64)")
    c.add_argument("--num-envs", type=int, default=None,
                   help="brax engine (required): environments stepped together, a multiple of the JAX device count")
    c.add_argument("--timesteps", type=int, default=None,
                   help="brax engine (required): budget of environment steps (rounded up to whole epochs)")
    c.add_argument("--evals", type=int, default=None,
                   help="brax engine: progress points (epochs), each evaluated and checkpointed (default 10)")
    for flag, field, kind, text in OVERRIDES:
        if kind == "bool":
            c.add_argument(flag, dest=field, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif isinstance(kind, tuple):
            c.add_argument(flag, dest=field, choices=kind, default=None, help=text)
        else:
            c.add_argument(flag, dest=field, type=kind, default=None, help=text)
    c.add_argument("-q", "--quiet", action="store_true", help="no progress")
    add_ray_flags(c)
    c.set_defaults(func=rc.guard(cmd_rl))

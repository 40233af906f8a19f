"""`polc rl FILE.pol --params P --env NAME --resets N -o DIR [--resume] [overrides]`,
with `--engine es` evolution strategies on the mean actions (`polc.runtime.rl.es`;
`--population`, `--sigma`), and with `--engine brax`, brax's PPO on an MJX environment:
`polc rl FILE.pol --engine brax --env door_mjx --num-envs N --timesteps T -o DIR [--params P] [--resume]`
(`polc.runtime.rl.brax`). `--seed` and `--lr` apply to every engine; each other
setting to the engines `ENGINE_FLAGS` names: using it with another is a usage error.

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
    ("--lr", "lr", float, "Adam learning rate (default 7e-3; es engine 0.02)"),
    ("--episodes-per-update", "episodes_per_update", int, "episodes per update (default 20)"),
    ("--epochs", "epochs", int, "passes over an update's episodes (default 3)"),
    ("--minibatches", "minibatches", int, "Adam steps per epoch (default 1)"),
    ("--window", "window", int, "steps per likelihood-ratio window (default 10; 1 = per step)"),
    ("--seeds-per-update", "seeds_per_update", int, "groups (env seeds) per update (default 1)"),
    ("--seed", "seed", int, "seed of the sampled noise, or of the es engine's perturbations (default 0)"),
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


# The engines each flag applies to (dest, flag, engines); with another engine it is a usage error.
ENGINE_FLAGS = (
    ("resets", "--resets", ("polc", "es")), ("n_envs", "--n-envs", ("polc",)),
    ("episodes_per_update", "--episodes-per-update", ("polc",)), ("epochs", "--epochs", ("polc",)),
    ("minibatches", "--minibatches", ("polc",)), ("window", "--window", ("polc",)),
    ("seeds_per_update", "--seeds-per-update", ("polc",)), ("target_kl", "--target-kl", ("polc",)),
    ("min_std", "--min-std", ("polc",)), ("max_grad_norm", "--max-grad-norm", ("polc",)),
    ("normalise_advantages", "--normalise-advantages", ("polc",)), ("keep", "--keep", ("polc", "es")),
    ("val_episodes", "--val-episodes", ("polc", "es")), ("val_every", "--val-every", ("polc", "es")),
    ("val_actions", "--val-actions", ("polc",)), ("anneal", "--anneal", ("polc",)),
    ("anneal_lr", "--anneal-lr", ("polc",)), ("gamma", "--gamma", ("polc", "brax")),
    ("clip", "--clip", ("polc", "brax")), ("num_envs", "--num-envs", ("brax",)),
    ("timesteps", "--timesteps", ("brax",)), ("evals", "--evals", ("brax",)),
    ("population", "--population", ("es",)), ("sigma", "--sigma", ("es",)),
)
# polc-engine override -> BraxConfig field, for the settings both engines share.
SHARED = {"seed": "seed", "lr": "learning_rate", "gamma": "discounting", "clip": "clipping_epsilon"}
# The flags the es engine reads (each dest is the ESConfig field of that name).
ES_SETTINGS = ("seed", "lr", "keep", "val_episodes", "val_every", "population", "sigma")


def _given(args: argparse.Namespace, dest: str) -> bool:
    """The flag was set on the command line (--n-envs defaults to 0, every other one to None)."""
    value = getattr(args, dest)
    return value is not None and not (dest == "n_envs" and value == 0)


def cmd_rl(args: argparse.Namespace) -> int:
    wrong = [(flag, engines) for dest, flag, engines in ENGINE_FLAGS if args.engine not in engines and _given(args, dest)]
    if wrong:
        owners = {engines for _, engines in wrong}
        if len(owners) == 1:
            engines = " and ".join(next(iter(owners)))
            plural = "s" if " and " in engines else ""
            raise UsageError(f"polc: {', '.join(f for f, _ in wrong)} belong{'s' if len(wrong) == 1 else ''} to the "
                             f"{engines} engine{plural}, not --engine {args.engine}.")
        each = "; ".join(f"{f} to the {' and '.join(e)} engine{'s' if len(e) > 1 else ''}" for f, e in wrong)
        raise UsageError(f"polc: these flags belong to other engines than --engine {args.engine}: {each}.")
    if args.engine == "brax":
        return _cmd_rl_brax(args)
    if args.engine == "es":
        if args.resets is None:
            raise UsageError("polc: the es engine needs --resets N (the budget of training episodes).")
        return _cmd_rl_es(args)
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
    _verified(config)
    params = rc.params_for(policy, args.params)

    def run():
        with pool_for(args, spec, policy) as pool:
            learn = train
            if pool is not None:  # each update's episodes collected by the cluster's workers
                from functools import partial

                from ..cluster.remote import ray_train

                learn = partial(ray_train, pool)
            return learn(policy, params, spec, config, args.output, resume=args.resume, start={"file": args.params},
                         progress=not args.quiet)

    result = _trained(args, run)
    if isinstance(result, int):
        return result
    return _summary(args, result.log, PARAMS, e, "return")


def _cmd_rl_es(args: argparse.Namespace) -> int:
    """`polc rl --engine es` (see `polc.runtime.rl.es`)."""
    from ..trace.rollout import verify_compatible
    from .checkpoint import exists
    from .es import ESConfig, train
    from .run import PARAMS

    if getattr(args, "ray", None):
        raise UsageError("polc: --ray is not supported by --engine es (its population runs in this process).")
    if args.resets < 0:
        raise UsageError("polc: --resets must be at least 0.")
    spec = rc.env_spec(args.env)
    policy = rc.compile_policy(args.file)
    settings = {k: getattr(args, k) for k in ES_SETTINGS if getattr(args, k) is not None}
    config = ESConfig(resets=args.resets, **settings)
    resuming = args.resume and exists(args.output)
    if args.resume and not resuming:
        print(f"polc: no run to resume in '{args.output}'; starting one.", file=sys.stderr)
    if resuming:
        config = _resumed_config(args.output, config, settings, engine="es")
    _verified(config)
    verify_compatible(policy.program, spec.schema)
    params = rc.params_for(policy, args.params)
    result = _trained(args, lambda: train(policy, params, spec, config, args.output, resume=args.resume,
                                          start={"file": args.params}, progress=not args.quiet))
    if isinstance(result, int):
        return result
    return _summary(args, result.log, PARAMS, config.population, "population return")


def _verified(config: Any) -> None:
    """`config.verify()`, its complaint a usage error."""
    try:
        config.verify()
    except ValueError as err:
        raise UsageError(f"polc: {err}.") from None


def _trained(args: argparse.Namespace, run: Any) -> Any:
    """`run()`'s result, or the exit code of its `RLError` (said on stderr); Ctrl-C and
    SIGTERM stop it after its last checkpoint, which `--resume` continues."""
    from .collect import RLError

    try:
        with rc.locked(args.output, "polc rl"), rc.sigterm_interrupts():
            return run()
    except RLError as err:
        return rc.fail(str(err))
    except KeyboardInterrupt:
        print(f"polc: interrupted; the last finished update is kept in {args.output} "
              f"(continue with --resume).", file=sys.stderr)
        raise


def _summary(args: argparse.Namespace, log: dict, params_file: str, per_update: int, what: str) -> int:
    """The last line of a polc or es run: what was written, the returns, what was kept."""
    if not log["log"]:
        print(f"polc: --resets {args.resets} is less than one update ({per_update} episodes); nothing trained.",
              file=sys.stderr)
        return 0
    first, last = log["log"][0], log["log"][-1]
    updates = f"{log['updates']} update{'' if log['updates'] == 1 else 's'}"
    kept = ""
    if "kept" in log:
        k = log["kept"]
        kept = (f"; kept update {k['update']} (held-out {k['actions']}-action score {k['score']:.4g} on seeds "
                f"{k['seeds'][0]}..{k['seeds'][-1]}; the last params are in {os.path.join(args.output, log['last_params'])})")
    print(f"wrote {os.path.join(args.output, params_file)}: {updates}, {log['resets']} resets, "
          f"mean training {what} {first['return_mean']:.1f} -> {last['return_mean']:.1f}, "
          f"{log['elapsed_s']:.0f} s{kept}", file=sys.stderr)
    return 0


def _resumed_config(directory: str, config: Any, settings: dict, engine: str = "polc"):
    """The checkpoint's settings with the new budget; an explicit override must agree, and
    the checkpoint must be the same engine's."""
    from dataclasses import replace

    from .checkpoint import CheckpointError, read_meta

    if engine == "es":
        from .es import ESConfig as kind
    else:
        from .train import RLConfig as kind
    try:
        meta = read_meta(directory)
        saved_engine = meta.get("engine", "polc")
        if saved_engine != engine:
            raise UsageError(f"polc: the run in '{directory}' was trained by --engine {saved_engine}; resume it "
                             f"with --engine {saved_engine}, or start a new run in another directory.")
        saved = kind.from_saved(meta["config"])
    except (CheckpointError, KeyError, TypeError) as e:
        raise UsageError(f"polc: cannot read the checkpoint in '{directory}': {e}.") from None
    clash = [f"--{k.replace('_', '-')} {v} (the run used {getattr(saved, k)})" for k, v in settings.items()
             if getattr(saved, k) != v]
    if clash:
        raise UsageError("polc: --resume continues a run with its own settings: " + "; ".join(clash) + ".")
    return replace(saved, resets=config.resets)


def _cmd_rl_brax(args: argparse.Namespace) -> int:
    """`polc rl --engine brax` (see `polc.runtime.rl.brax`)."""
    from dataclasses import replace

    from ..trace.rollout import verify_compatible
    from .brax import BRAX_ENVS, BraxConfig, BraxError, train_brax
    from .brax.networks import verify_memoryless
    from .brax.train import CHECKPOINT, PARAMS, exists, saved_config

    if args.env not in BRAX_ENVS:
        raise UsageError(f'polc: --engine brax runs MJX environments only ({", ".join(sorted(BRAX_ENVS))}), '
                         f'not "{args.env}".')
    if args.num_envs is None or args.timesteps is None:
        raise UsageError("polc: --engine brax needs --num-envs N and --timesteps T.")
    if args.num_envs < 1 or args.timesteps < 0:
        raise UsageError("polc: --num-envs must be at least 1 and --timesteps at least 0.")
    policy = rc.compile_policy(args.file)
    try:
        verify_memoryless(policy.program)
    except BraxError as err:
        return rc.fail(str(err))
    spec = rc.env_spec(args.env)
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
        with rc.locked(args.output, "polc rl"), rc.sigterm_interrupts():
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
    c = sub.add_parser("rl", help="reinforcement learning from fitted params (the paper's objective, or evolution "
                                  "strategies on the mean actions)")
    c.add_argument("file", help="the .pol policy (the polc engine needs noise on every action; es does not)")
    c.add_argument("--params", help="params to start from, e.g. from polc fit (default: the declared weights)")
    c.add_argument("--env", required=True, help=rc.ENV_HELP)
    c.add_argument("--engine", choices=("polc", "es", "brax"), default="polc",
                   help="polc: the paper's objective on gymnasium envs (default); es: evolution strategies on the "
                        "mean actions (docs/results/rl.md); brax: brax's PPO on an MJX env")
    c.add_argument("--resets", type=int, default=None,
                   help="polc and es engines (required): budget of training episodes (environment resets); "
                        "stops before exceeding it")
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
    c.add_argument("--population", type=int, default=None,
                   help="es engine: members per update, an even number of antithetic pairs, one episode each (default 20)")
    c.add_argument("--sigma", type=float, default=None,
                   help="es engine: std of the perturbations of the unconstrained params (default 0.05)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress")
    add_ray_flags(c)
    c.set_defaults(func=rc.guard(cmd_rl))

"""`polc fit FILE.pol --demos DEMOS.parquet [MORE.parquet ...] -o FILE.params [--restarts K --epochs E --lr LR ...]`:
imitation learning, the policy's weights fitted to a demonstration (MAP: the weights'
priors and `--prior-scale` count), then a closed-loop check of the fitted weights
against the declared ones on a few training seeds (`--check-episodes`, 0: off), and
the better of the two written (`--keep best`, the default; `--keep fitted` writes the
fit whatever its score). When the declared weights win, the fit is kept beside the
output as `STEM.fitted.params`."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Optional

from .. import cli as rc
from polc.cli import UsageError

from .defaults import CHECK_EPISODES, PRIOR_SCALE

KEEPS = ("best", "fitted")  # the choices of --keep (closed_loop.KEEPS, without importing numpy)


def fitted_path(output: str) -> str:
    """Where the fit goes when the declared weights are kept: beside the output,
    `car.params` -> `car.fitted.params`."""
    import os

    stem, ext = os.path.splitext(output)
    return f"{stem}.fitted{ext}" if ext else f"{output}.fitted"


def _env_name(args: argparse.Namespace, table) -> Optional[str]:
    """The environment of the closed-loop check: --env, else the one the demonstration names."""
    if args.env:
        return args.env
    env = (table.metadata or {}).get("env")
    return env.get("name") if isinstance(env, dict) else None


def cmd_fit(args: argparse.Namespace) -> int:
    from .closed_loop import choose
    from .recovery import concat_demos, used_seeds
    from .train import FitConfig, FitError, fit, load_demos
    from ..io.demo_check import DemoRejected, vet_demo
    from ..io.params import save_params

    if args.check_episodes < 0:
        raise UsageError("polc: --check-episodes must be 0 (no check) or more.")
    if not args.prior_scale > 0:
        raise UsageError("polc: --prior-scale must be positive (inf: no pull toward the declared weights).")
    rc.output_file(args.output)  # a missing directory is refused (or made) before the fit, not after
    policy = rc.compile_policy(args.file)
    tables = [rc.read_table_or_usage(p) for p in args.demos]
    table = tables[0]
    env_name = _env_name(args, table) if args.check_episodes else None
    spec = rc.env_spec(env_name) if env_name else None  # an unknown --env is a usage error before fitting
    config = FitConfig(learning_rate=args.lr, mlp_learning_rate=args.mlp_lr, batch_size=args.batch_size,
                       max_epochs=args.epochs, patience=args.patience, val_fraction=args.val_fraction,
                       restarts=args.restarts, seed=args.seed, prior_scale=args.prior_scale)
    try:
        for t in tables:
            for note in vet_demo(t, policy.program, strict=args.strict):  # partial, or out of range
                print(f"polc: warning: {note}", file=sys.stderr)
        demos = concat_demos([load_demos(t, policy.program) for t in tables])
        result = fit(policy, demos, config, progress=not args.quiet)
    except (FitError, DemoRejected) as e:
        return rc.fail(str(e))
    check = _closed_loop(policy, result.params, spec, used_seeds([t.metadata for t in tables]), args)
    choice = choose(check, args.keep)
    extra = {"demos": args.demos[0] if len(args.demos) == 1 else list(args.demos), "keep": choice.to_json()}
    if check is not None:
        extra["closed_loop"] = check.to_json()
    aside = None
    if choice.kept == "declared":
        import jax

        aside = fitted_path(args.output)
        save_params(aside, policy, result.params, result.info(**extra, kept_as=args.output))
        save_params(args.output, policy, policy.init(jax.random.PRNGKey(0)), result.info(**extra, fit_in=aside))
    else:
        save_params(args.output, policy, result.params, result.info(**extra))
    b = result.best
    print(f"{'fitted' if aside else 'wrote ' + args.output}: {result.loss} validation {b.val_loss:.4g} (train {b.train_loss:.4g}), "
          f"restart {b.restart + 1} of {config.restarts} at epoch {b.best_epoch}, {result.seconds:.1f} s",
          file=sys.stderr)
    for r in result.restarts:
        if r.stopped.startswith("diverged"):
            print(f"  restart {r.restart + 1} {r.stopped}", file=sys.stderr)
    for line in _pinned(policy, result.params):
        print(line, file=sys.stderr)
    if check is not None:
        print(check.summary(), file=sys.stderr)
        if check.worse:
            print(check.warning(), file=sys.stderr)
        print(f"kept the {choice.kept} weights in {args.output}: {choice.reason}"
              + (f"; the fit is in {aside} (--keep fitted writes it as the output)" if aside else ""),
              file=sys.stderr)
    elif args.check_episodes and spec is None:
        print("closed-loop check skipped: the demonstration names no environment (give --env NAME)",
              file=sys.stderr)
    return 0


def _pinned(policy, params) -> list[str]:
    """One line per fitted weight element that sits on a bound, as `polc analyze`'s signs check
    says it (the data want it past the bound, or its term does not help)."""
    import numpy as np

    from polc.analysis import transforms
    from ..diagnostics.checks import at_bounds, pinned_sentence

    lines = []
    for w in policy.program.weights:
        if not (math.isfinite(w.lo) or math.isfinite(w.hi)):
            continue
        value = transforms.constrain(np.asarray(params[w.name], np.float64), w.lo, w.hi, np)
        lines += [f"  pinned: {pinned_sentence(w, b)}" for b in at_bounds(w, value)]
    return lines


def _closed_loop(policy, params, spec, used: list[int], args: argparse.Namespace):
    if spec is None or not args.check_episodes:
        return None
    from .closed_loop import closed_loop_check, training_seeds
    from .score_cache import default_cache

    try:
        seeds = training_seeds(spec, args.check_episodes, used)
    except ValueError as e:
        raise UsageError(f"polc: --check-episodes {args.check_episodes}: {e}.") from None
    return closed_loop_check(policy, params, spec, seeds, cache=default_cache())


def _scale(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (a positive scale, or inf)") from None


def register(sub: Any) -> None:
    """Add `polc fit` to the `polc` subcommands."""
    c = sub.add_parser("fit", help="imitation learning: fit a policy's weights to a demonstration (MAP)")
    c.add_argument("file", help="the .pol policy")
    c.add_argument("--demos", required=True, nargs="+", metavar="DEMOS.parquet",
                   help="demonstration (or trace) tables, fitted as one: e.g. a clean lap and recovery laps "
                        "(`polc demos --perturb`) beside it")
    c.add_argument("-o", "--output", required=True, help="the params file to write (JSON)")
    c.add_argument("--restarts", type=int, default=3, help="fits from different initial draws; the best "
                                                           "validation loss is kept (default 3)")
    c.add_argument("--epochs", type=int, default=2000, help="maximum epochs per restart")
    c.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate of the named weights")
    c.add_argument("--mlp-lr", type=float, default=1e-3, help="Adam learning rate of mlp(...) blocks")
    c.add_argument("--batch-size", type=int, default=256, help="demonstration steps per Adam step (default 256; a policy with memory: whole "
                        "episodes, about this many steps' worth, at least one)")
    c.add_argument("--patience", type=int, default=100, help="epochs without validation improvement")
    c.add_argument("--val-fraction", type=float, default=0.2,
                   help="share of the demonstration's rows (a policy with memory: whole episodes) held out at "
                        "random for early stopping (default 0.2)")
    c.add_argument("--seed", type=int, default=0, help="seed of the validation split, the restarts' initial draws and the batch order")
    c.add_argument("--prior-scale", type=_scale, default=PRIOR_SCALE, metavar="S",
                   help="weights without a prior are pulled toward their declared value by a Gaussian of "
                        f"std S in the unconstrained space (default {PRIOR_SCALE:g}; inf: no pull)")
    c.add_argument("--check-episodes", type=int, default=CHECK_EPISODES, metavar="N",
                   help="closed-loop episodes of the declared and of the fitted weights on training seeds "
                        f"after fitting (default {CHECK_EPISODES}; 0: no check)")
    c.add_argument("--keep", choices=KEEPS, default="best",
                   help="best (default): write the better of the declared and the fitted weights in the closed-loop "
                        "check on training seeds (the fit then goes to STEM.fitted.params); fitted: always the fit")
    c.add_argument("--env", help="the closed-loop check's " + rc.ENV_HELP + " (default: the demonstration's)")
    c.add_argument("--strict", action="store_true",
                   help="refuse a partial demonstration (.partial.parquet) or one whose data leave the program's "
                        "declared ranges (default: a warning saying how many rows, which columns, by how much)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=rc.guard(cmd_fit))

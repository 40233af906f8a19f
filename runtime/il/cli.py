"""`polc fit FILE.pol --demos DEMOS.parquet -o FILE.params [--restarts K --epochs E --lr LR ...]`:
imitation learning, the policy's weights fitted to a demonstration (MAP: the weights'
priors and `--prior-scale` count), then a closed-loop check of the fitted weights
against the declared ones on a few training seeds (`--check-episodes`, 0: off)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Optional

from .. import cli as rc
from polc.cli import UsageError

from .defaults import CHECK_EPISODES, PRIOR_SCALE



def _env_name(args: argparse.Namespace, table) -> Optional[str]:
    """The environment of the closed-loop check: --env, else the one the demonstration names."""
    if args.env:
        return args.env
    env = (table.metadata or {}).get("env")
    return env.get("name") if isinstance(env, dict) else None


def cmd_fit(args: argparse.Namespace) -> int:
    from .train import FitConfig, FitError, fit, load_demos
    from ..io.demo_check import DemoRejected, vet_demo
    from ..io.params import save_params

    if args.check_episodes < 0:
        raise UsageError("polc: --check-episodes must be 0 (no check) or more.")
    if not args.prior_scale > 0:
        raise UsageError("polc: --prior-scale must be positive (inf: no pull toward the declared weights).")
    rc.output_file(args.output)  # a missing directory is refused (or made) before the fit, not after
    policy = rc.compile_policy(args.file)
    table = rc.read_table_or_usage(args.demos)
    env_name = _env_name(args, table) if args.check_episodes else None
    spec = rc.env_spec(env_name) if env_name else None  # an unknown --env is a usage error before fitting
    config = FitConfig(learning_rate=args.lr, mlp_learning_rate=args.mlp_lr, batch_size=args.batch_size,
                       max_epochs=args.epochs, patience=args.patience, val_fraction=args.val_fraction,
                       restarts=args.restarts, seed=args.seed, prior_scale=args.prior_scale)
    try:
        for note in vet_demo(table, policy.program, strict=args.strict):  # partial, or out of range
            print(f"polc: warning: {note}", file=sys.stderr)
        demos = load_demos(table, policy.program)
        result = fit(policy, demos, config, progress=not args.quiet)
    except (FitError, DemoRejected) as e:
        return rc.fail(str(e))
    check = _closed_loop(policy, result.params, spec, table, args)
    extra = {"demos": args.demos}
    if check is not None:
        extra["closed_loop"] = check.to_json()
    save_params(args.output, policy, result.params, result.info(**extra))
    b = result.best
    print(f"wrote {args.output}: {result.loss} validation {b.val_loss:.4g} (train {b.train_loss:.4g}), "
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
    elif args.check_episodes and spec is None:
        print("closed-loop check skipped: the demonstration names no environment (give --env NAME)",
              file=sys.stderr)
    return 0


def _pinned(policy, params) -> list[str]:
    """One line per fitted weight element that sits on a bound, as `polc analyze`'s signs check
    says it (the data want it past the bound, or its term does not help)."""
    import numpy as np

    from polc import transforms
    from ..diagnostics.checks import at_bounds, pinned_sentence

    lines = []
    for w in policy.program.weights:
        if not (math.isfinite(w.lo) or math.isfinite(w.hi)):
            continue
        value = transforms.constrain(np.asarray(params[w.name], np.float64), w.lo, w.hi, np)
        lines += [f"  pinned: {pinned_sentence(w, b)}" for b in at_bounds(w, value)]
    return lines


def _closed_loop(policy, params, spec, table, args: argparse.Namespace):
    if spec is None or not args.check_episodes:
        return None
    from .closed_loop import closed_loop_check, training_seeds

    used = (table.metadata or {}).get("seeds") or []
    try:
        seeds = training_seeds(spec, args.check_episodes, [s for s in used if isinstance(s, int)])
    except ValueError as e:
        raise UsageError(f"polc: --check-episodes {args.check_episodes}: {e}.") from None
    return closed_loop_check(policy, params, spec, seeds)


def _scale(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (a positive scale, or inf)") from None


def register(sub: Any) -> None:
    """Add `polc fit` to the `polc` subcommands."""
    c = sub.add_parser("fit", help="imitation learning: fit a policy's weights to a demonstration (MAP)")
    c.add_argument("file", help="the .pol policy")
    c.add_argument("--demos", required=True, help="demonstration (or trace) table, .parquet")
    c.add_argument("-o", "--output", required=True, help="the params file to write (JSON)")
    c.add_argument("--restarts", type=int, default=3, help="fits from different initial draws; the best "
                                                           "validation loss is kept (default 3)")
    c.add_argument("--epochs", type=int, default=2000, help="maximum epochs per restart")
    c.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate of the named weights")
    c.add_argument("--mlp-lr", type=float, default=1e-3, help="Adam learning rate of mlp(...) blocks")
    c.add_argument("--batch-size", type=int, default=256, help="demonstration steps per Adam step (default 256)")
    c.add_argument("--patience", type=int, default=100, help="epochs without validation improvement")
    c.add_argument("--val-fraction", type=float, default=0.2,
                   help="share of the demonstration's rows held out at random for early stopping (default 0.2)")
    c.add_argument("--seed", type=int, default=0, help="seed of the validation split, the restarts' initial draws and the batch order")
    c.add_argument("--prior-scale", type=_scale, default=PRIOR_SCALE, metavar="S",
                   help="weights without a prior are pulled toward their declared value by a Gaussian of "
                        f"std S in the unconstrained space (default {PRIOR_SCALE:g}; inf: no pull)")
    c.add_argument("--check-episodes", type=int, default=CHECK_EPISODES, metavar="N",
                   help="closed-loop episodes of the declared and of the fitted weights on training seeds "
                        f"after fitting (default {CHECK_EPISODES}; 0: no check)")
    c.add_argument("--env", help="the closed-loop check's " + rc.ENV_HELP + " (default: the demonstration's)")
    c.add_argument("--strict", action="store_true",
                   help="refuse a partial demonstration (.partial.parquet) or one whose data leave the program's "
                        "declared ranges (default: a warning saying how many rows, which columns, by how much)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=rc.guard(cmd_fit))

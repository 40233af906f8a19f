"""`polc fit FILE.pol --demos DEMOS.parquet -o FILE.params [--restarts K --epochs E --lr LR ...]`:
imitation learning, the policy's weights fitted to a demonstration."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import cli as rc


def cmd_fit(args: argparse.Namespace) -> int:
    from .train import FitConfig, FitError, fit, load_demos
    from ..io.params import save_params

    policy = rc.compile_policy(args.file)
    table = rc.read_table_or_usage(args.demos)
    config = FitConfig(learning_rate=args.lr, mlp_learning_rate=args.mlp_lr, batch_size=args.batch_size,
                       max_epochs=args.epochs, patience=args.patience, val_fraction=args.val_fraction,
                       restarts=args.restarts, seed=args.seed)
    try:
        demos = load_demos(table, policy.program)
        result = fit(policy, demos, config, progress=not args.quiet)
    except FitError as e:
        return rc.fail(str(e))
    save_params(args.output, policy, result.params, result.info(demos=args.demos))
    b = result.best
    print(f"wrote {args.output}: {result.loss} validation {b.val_loss:.4g} (train {b.train_loss:.4g}), "
          f"restart {b.restart + 1} of {config.restarts} at epoch {b.best_epoch}, {result.seconds:.1f} s",
          file=sys.stderr)
    for r in result.restarts:
        if r.stopped.startswith("diverged"):
            print(f"  restart {r.restart + 1} {r.stopped}", file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    """Add `polc fit` to the `polc` subcommands."""
    c = sub.add_parser("fit", help="imitation learning: fit a policy's weights to a demonstration")
    c.add_argument("file", help="the .pol policy")
    c.add_argument("--demos", required=True, help="demonstration (or trace) table, .parquet")
    c.add_argument("-o", "--output", required=True, help="the params file to write (JSON)")
    c.add_argument("--restarts", type=int, default=3)
    c.add_argument("--epochs", type=int, default=2000, help="maximum epochs per restart")
    c.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate of the named weights")
    c.add_argument("--mlp-lr", type=float, default=1e-3, help="Adam learning rate of mlp(...) blocks")
    c.add_argument("--batch-size", type=int, default=256)
    c.add_argument("--patience", type=int, default=100, help="epochs without validation improvement")
    c.add_argument("--val-fraction", type=float, default=0.2)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=rc.guard(cmd_fit))

"""The runtime's commands for the `polc` CLI (registered by `register(sub)`):

    polc demos ENV --episodes N --seed S -o FILE.parquet
    polc fit FILE.pol --demos DEMOS.parquet -o FILE.params [--restarts K --epochs E --lr LR ...]
    polc rollout FILE.pol [--params P] --env ENV --episodes N [--seed S] [--sample] -o TRACE.parquet
    polc eval FILE.pol [--params P] --env ENV --seeds N [--json]     (or --expert instead of FILE)
    polc plot TABLE.parquet COL [COL ...] [-o OUT.png] [--episode E ...] [--lines]

Each command is `(args) -> exit code` (0 ok, 1 a failure the user must fix,
2 bad usage or unreadable input), in the conventions of `polc.cli`: messages
on stderr, no tracebacks. Without `--params`, a policy runs with the weights
declared in its source (mlp weights drawn from key 0). Rollouts and demos
stopped early (Ctrl-C, SIGTERM, an error) keep their finished episodes in
`<stem>.partial.parquet` (see `polc.runtime.table`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from typing import Any, Iterator, Optional

from polc.cli import UsageError, _load

# Imported by every `polc` invocation (to register the commands), so nothing heavy
# at module level: `polc check` must stay free of numpy/pyarrow/jax.


def _env(name: str):
    from . import envs

    try:
        return envs.get(name)
    except KeyError:
        raise UsageError(f'polc: unknown environment "{name}"; known: {", ".join(envs.names())}.') from None


def _fail(message: str) -> int:
    print(f"polc: {message}", file=sys.stderr)
    return 1


def _policy(path: str):
    program, _ = _load(path)
    return program.compile()


def _params(policy, path: Optional[str]):
    from .params import ParamsError, load_params

    if path is None:
        import jax

        return policy.init(jax.random.PRNGKey(0))
    if not os.path.exists(path):
        raise UsageError(f"polc: cannot read '{path}': no such file.")
    try:
        return load_params(path, policy)
    except ParamsError as e:
        raise _Failure(str(e)) from None


class _Failure(Exception):
    """A failure the user must fix: exit code 1 with this message."""


def _table(path: str):
    from .table import TableError, read_table

    try:
        return read_table(path)
    except TableError as e:
        raise UsageError(f"polc: {e}.") from None


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops the run the way Ctrl-C does, so finished episodes are kept."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _episode_progress(what: str, quiet: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[last]}"),
                    TimeElapsedColumn(), console=Console(stderr=True), disable=quiet, transient=True)


def _env_meta(spec) -> dict:
    return {"name": spec.schema.name, "id": spec.schema.env_id, "version": spec.schema.version,
            "max_steps": spec.max_steps}


@contextlib.contextmanager
def _writing(writer) -> Iterator:
    """Close `writer` when the block ends normally. When it stops early (Ctrl-C,
    SIGTERM, an error) the finished episodes go to the .partial.parquet file beside
    the target, and the target is not written."""
    with _sigterm_interrupts():
        try:
            yield writer
        except BaseException as e:
            kept = writer.abort()
            if kept:
                print(f"polc: stopped; the {writer.episodes} finished episode(s) are in {kept} "
                      f"({writer.path} was not written).", file=sys.stderr)
            elif isinstance(e, KeyboardInterrupt):
                print("polc: interrupted before the first episode finished; nothing written.", file=sys.stderr)
            raise
    writer.close()


# ---- demos ----------------------------------------------------------------------------


def cmd_demos(args: argparse.Namespace) -> int:
    import numpy as np

    from polc import __version__

    from .demos import demo_columns, write_demos
    from .table import TableWriter

    spec = _env(args.env)
    seeds = list(range(args.seed, args.seed + args.episodes))
    demo = spec.demo_seeds
    if args.episodes < 1 or seeds[0] not in demo or seeds[-1] not in demo:
        raise UsageError(f"polc: demonstration seeds must lie in {demo.start}..{demo.stop - 1} (evaluation uses "
                         f"seeds from {spec.eval_seeds.start}); got --seed {args.seed} --episodes {args.episodes}.")
    meta = {"kind": "demonstration", "polc_version": __version__, "env": _env_meta(spec), "seeds": seeds,
            "command": f"polc demos {args.env} --episodes {args.episodes} --seed {args.seed} -o {args.output}"}
    writer = TableWriter(args.output, demo_columns(spec.schema), meta)
    with _episode_progress("expert", args.quiet) as bar, _writing(writer):
        task = bar.add_task("expert", total=len(seeds), last="")
        episodes = write_demos(spec, seeds, writer, lambda ep: bar.update(
            task, advance=1, last=f"seed {ep.seed}: return {ep.ret:.1f}"))
    returns = [ep.ret for ep in episodes]
    print(f"wrote {args.output}: {len(seeds)} episode(s), {writer.rows} steps, expert return "
          f"{np.mean(returns):.1f} ± {np.std(returns):.1f}", file=sys.stderr)
    return 0


# ---- fit ----------------------------------------------------------------------------


def cmd_fit(args: argparse.Namespace) -> int:
    from .fit import FitConfig, FitError, fit, load_demos
    from .params import save_params

    policy = _policy(args.file)
    table = _table(args.demos)
    config = FitConfig(learning_rate=args.lr, mlp_learning_rate=args.mlp_lr, batch_size=args.batch_size,
                       max_epochs=args.epochs, patience=args.patience, val_fraction=args.val_fraction,
                       restarts=args.restarts, seed=args.seed)
    try:
        demos = load_demos(table, policy.program)
        result = fit(policy, demos, config, progress=not args.quiet)
    except FitError as e:
        return _fail(str(e))
    save_params(args.output, policy, result.params, result.info(demos=args.demos))
    b = result.best
    print(f"wrote {args.output}: {result.loss} validation {b.val_loss:.4g} (train {b.train_loss:.4g}), "
          f"restart {b.restart + 1} of {config.restarts} at epoch {b.best_epoch}, {result.seconds:.1f} s",
          file=sys.stderr)
    for r in result.restarts:
        if r.stopped.startswith("diverged"):
            print(f"  restart {r.restart + 1} {r.stopped}", file=sys.stderr)
    return 0


# ---- rollout / eval --------------------------------------------------------------------


def _rollout_config(args: argparse.Namespace, n: int, trace: bool):
    from .rollout import RolloutConfig

    from .vector import default_n_envs

    n_envs = args.n_envs if args.n_envs else default_n_envs(n)
    return RolloutConfig(n_envs=max(1, n_envs), sample=args.sample, noise_seed=args.noise_seed, trace=trace)


def _seeds(spec, n: int, start: Optional[int]) -> list[int]:
    """Rollout seeds: `start`, start+1, ... (any seeds) or the first evaluation seeds."""
    from .evaluate import eval_seeds

    if n < 1:
        raise UsageError("polc: the number of episodes must be at least 1.")
    return list(range(start, start + n)) if start is not None else eval_seeds(spec, n)


def cmd_rollout(args: argparse.Namespace) -> int:
    from polc import __version__
    from polc.emit import sha256

    from .params import params_sha256, structure_sha256
    from .rollout import TraceLayout, rollout
    from .table import TableWriter

    spec = _env(args.env)
    policy = _policy(args.file)
    params = _params(policy, args.params)
    seeds = _seeds(spec, args.episodes, args.seed)
    config = _rollout_config(args, len(seeds), trace=True)
    tp = policy.program
    meta = {"kind": "trace", "polc_version": __version__,
            "policy": {"name": tp.name, "file": args.file, "sha256": sha256(tp), "structure_sha256":
                       structure_sha256(tp), "source": tp.source},
            "params": {"file": args.params, "sha256": params_sha256(params)},
            "env": _env_meta(spec), "seeds": seeds, "actions": "sampled" if args.sample else "mean",
            "noise_seed": args.noise_seed if args.sample else None}
    writer = TableWriter(args.output, TraceLayout(tp, spec.schema).columns(), meta)
    with _episode_progress("rollout", args.quiet) as bar, _writing(writer):
        task = bar.add_task("rollout", total=len(seeds), last="")

        def done(ep) -> None:
            writer.write_episode(ep.columns)
            bar.update(task, advance=1, last=f"seed {ep.seed}: return {ep.ret:.1f}")

        result = rollout(policy, params, spec, seeds, config, done)
    print(f"wrote {args.output}: {len(seeds)} episode(s), {writer.rows} steps, return "
          f"{result.returns.mean():.1f} ± {result.returns.std():.1f}", file=sys.stderr)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .evaluate import eval_seeds, evaluate, evaluate_expert, render

    if (args.file is None) == (not args.expert):
        raise UsageError("polc: eval takes a .pol FILE, or --expert to evaluate the environment's expert.")
    spec = _env(args.env)
    if args.seeds < 1:
        raise UsageError("polc: the number of seeds must be at least 1.")
    try:
        seeds = eval_seeds(spec, args.seeds, args.seed_start)
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    with _episode_progress("eval", args.quiet or args.json) as bar:
        task = bar.add_task("eval", total=len(seeds), last="")
        progress = lambda ep: bar.update(task, advance=1, last=f"seed {ep.seed}: {ep.ret:.1f}")  # noqa: E731
        if args.expert:
            result, what = evaluate_expert(spec, seeds, progress), {"policy": "expert"}
        else:
            policy = _policy(args.file)
            params = _params(policy, args.params)
            result = evaluate(policy, params, spec, seeds, _rollout_config(args, len(seeds), trace=False), progress)
            what = {"policy": args.file, "params": args.params, "actions": "sampled" if args.sample else "mean"}
    if args.json:
        print(json.dumps(result.to_json(**what), indent=1))
    else:
        from rich.console import Console

        Console().print(render(result))
        print(result.summary())
    return 0


# ---- plot ---------------------------------------------------------------------------


def cmd_plot(args: argparse.Namespace) -> int:
    from .plot import default_output, plot
    from .table import TableError

    table = _table(args.table)
    output = args.output or default_output(args.table, args.columns)
    try:
        plot(table, args.columns, output, episodes=args.episode, lines=args.lines)
    except TableError as e:
        raise UsageError(f"polc: {e}") from None
    print(f"wrote {output}", file=sys.stderr)
    return 0


# ---- registration --------------------------------------------------------------------


def _guard(func):
    """`_Failure` -> exit code 1 with its message (the CLI handles the rest)."""
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except _Failure as e:
            return _fail(str(e))

    run.__name__ = func.__name__
    return run


def _runner_flags(c: argparse.ArgumentParser, file_optional: bool = False) -> None:
    c.add_argument("file", nargs="?" if file_optional else None, help="the .pol policy")
    c.add_argument("--params", help="fitted params (default: the weights declared in the source)")
    c.add_argument("--env", required=True, help="environment name, e.g. car_racing")
    c.add_argument("--n-envs", type=int, default=0, help="environments stepped together (default: every episode, up to 64)")
    c.add_argument("--sample", action="store_true", help="sample the policy's noise instead of acting on means")
    c.add_argument("--noise-seed", type=int, default=0, help="key of the sampled noise (with --sample)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def register(sub: Any) -> None:
    """Add demos, fit, rollout, eval and plot to the `polc` subcommands."""
    c = sub.add_parser("demos", help="run an environment's expert and write a demonstration table")
    c.add_argument("env", help="environment name, e.g. car_racing")
    c.add_argument("--episodes", type=int, default=1)
    c.add_argument("--seed", type=int, default=0, help="seed of the first episode (demonstration seeds: 0..999)")
    c.add_argument("-o", "--output", required=True, help="the .parquet table to write")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=_guard(cmd_demos))

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
    c.set_defaults(func=_guard(cmd_fit))

    c = sub.add_parser("rollout", help="run a policy and write a trace of everything it computes")
    _runner_flags(c)
    c.add_argument("--episodes", type=int, default=10)
    c.add_argument("--seed", type=int, help="seed of the first episode (default: the first evaluation seeds)")
    c.add_argument("-o", "--output", required=True, help="the .parquet trace to write")
    c.set_defaults(func=_guard(cmd_rollout))

    c = sub.add_parser("eval", help="mean ± std return over unseen seeds")
    _runner_flags(c, file_optional=True)
    c.add_argument("--expert", action="store_true", help="evaluate the environment's expert instead of a policy")
    c.add_argument("--seeds", type=int, default=10, help="number of evaluation seeds")
    c.add_argument("--seed-start", type=int, help="first seed (default: the environment's first eval seed)")
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    c.set_defaults(func=_guard(cmd_eval))

    c = sub.add_parser("plot", help="plot columns of a trace or demonstration table to PNG")
    c.add_argument("table", help="the .parquet table")
    c.add_argument("columns", nargs="+", metavar="COL", help="column (latent.slip, obs.wheel_speed[2], ...)")
    c.add_argument("-o", "--output", help="the PNG to write (default: beside the table)")
    c.add_argument("--episode", type=int, action="append", help="only this episode (repeatable)")
    c.add_argument("--lines", action="store_true", help="two columns as lines against the step, not a scatter")
    c.set_defaults(func=_guard(cmd_plot))

    from .diagnostics_cli import add_parser as add_analyze  # polc analyze: built-in diagnostics, or your own code

    add_analyze(sub)

    from .refine.cli import register as add_refine  # polc generate, polc refine: the refinement loop

    add_refine(sub)

    from .rl.cli import register as add_rl  # polc rl: reinforcement learning from fitted params

    add_rl(sub)

    from .experiment.cli import register as add_experiment  # polc experiment: Table 1 / Figure 5 in one command

    add_experiment(sub)

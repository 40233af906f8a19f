"""`polc demos`, `polc rollout` and `polc eval`: an environment's expert, a traced
policy, and the score over unseen seeds.

    polc demos ENV --episodes N --seed S [--perturb SIGMA] [--expert FILE.py:FN] -o FILE.parquet
    polc demos ENV --from-parquet YOURS.parquet -o FILE.parquet
    polc rollout FILE.pol [--params P] --env ENV --episodes N [--seed S] [--sample] -o TRACE.parquet
    polc eval FILE.pol [--params P] --env ENV --seeds N [--json]     (or --expert instead of FILE)

`--ray auto|ADDRESS` (or $POLC_RAY_ADDRESS) runs rollout's and eval's episodes on a Ray
cluster's workers, with the same trace and scores (`polc.runtime.cluster`, docs/ray.md).

Without `--params`, a policy runs with the weights declared in its source (mlp
weights drawn from key 0). Rollouts and demos stopped early (Ctrl-C, SIGTERM, an
error) keep their finished episodes in `<stem>.partial.parquet` (`polc.runtime.io.table`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any, Optional

from .. import cli as rc
from ..cli import UsageError
from ..cluster.flags import add_ray_flags, pool_for, ray_address, ray_label


def cmd_demos(args: argparse.Namespace) -> int:
    import numpy as np

    from polc import __version__

    from .demos import demo_columns, parse_perturb, write_demos
    from ..io.table import TableWriter

    spec = rc.env_spec(args.env)
    if args.from_parquet or args.from_minari:
        return _demos_imported(args, spec)
    if args.expert:
        spec = _with_expert(spec, args.expert)
    seeds = list(range(args.seed, args.seed + args.episodes))
    demo = spec.demo_seeds
    if args.episodes < 1 or seeds[0] not in demo or seeds[-1] not in demo:
        raise UsageError(f"polc: demonstration seeds must lie in {demo.start}..{demo.stop - 1} (evaluation uses "
                         f"seeds from {spec.eval_seeds.start}); got --seed {args.seed} --episodes {args.episodes}.")
    perturb = None
    if args.perturb is not None:
        try:
            perturb = parse_perturb(args.perturb, [f.name for f in spec.schema.actions], args.noise_seed)
        except ValueError as e:
            raise UsageError(f"polc: {e}.") from None
    command = f"polc demos {args.env} --episodes {args.episodes} --seed {args.seed}"
    for flag, value in (("--schema", args.schema), ("--env-kwargs", args.env_kwargs), ("--expert", args.expert)):
        if value is not None:
            command += f" {flag} {shlex.quote(value)}"
    if perturb is not None:
        command += f" --perturb {args.perturb} --noise-seed {args.noise_seed}"
    meta = {"kind": "demonstration", "polc_version": __version__, "env": rc.env_meta(spec), "seeds": seeds,
            "command": f"{command} -o {args.output}"}
    if perturb is not None:
        meta["perturb"] = perturb.meta()
    writer = TableWriter(rc.output_file(args.output), demo_columns(spec.schema, perturb is not None), meta)
    with rc.episode_progress("demos", len(seeds), args.quiet) as bar, rc.writing(writer):
        def done(ep) -> None:
            bar.steps(ep.length)
            bar.episode(f"seed {ep.seed}: return {ep.ret:.1f}")

        episodes = write_demos(spec, seeds, writer, done, perturb)
    returns = [ep.ret for ep in episodes]
    what = "perturbed expert return" if perturb is not None else "expert return"
    print(f"wrote {args.output}: {len(seeds)} episode(s), {writer.rows} steps, {what} "
          f"{np.mean(returns):.1f} ± {np.std(returns):.1f}", file=sys.stderr)
    return 0


def _with_expert(spec: Any, ref: str) -> Any:
    """`spec` with a user's expert (`FILE.py:FUNCTION` or `MODULE:FUNCTION`), loaded now so
    a bad reference fails before any episode runs."""
    import dataclasses

    from ..envs.user_expert import UserExpertFactory

    return dataclasses.replace(spec, _expert=UserExpertFactory(ref))


def _demos_imported(args: argparse.Namespace, spec: Any) -> int:
    """`polc demos ENV --from-parquet FILE` (a user's table) or `--from-minari DATASET` (a local
    Minari dataset) as a demonstration."""
    from polc import __version__

    from .demos import demo_columns
    from .imported import TableImportError, read_minari, read_user_table
    from ..io.table import TableWriter

    flag, source = ("--from-parquet", args.from_parquet) if args.from_parquet else ("--from-minari", args.from_minari)
    if args.from_parquet and args.from_minari:
        raise UsageError("polc: give --from-parquet or --from-minari, not both.")
    if args.expert or args.perturb is not None:
        raise UsageError(f"polc: {flag} takes the actions from the data; give no --expert or --perturb.")
    meta = {"kind": "demonstration", "polc_version": __version__, "env": rc.env_meta(spec), "seeds": [],
            "source": {"parquet" if args.from_parquet else "minari": source},
            "command": f"polc demos {args.env} {flag} {shlex.quote(source)} -o {args.output}"}
    episodes = read_user_table(spec.schema, source) if args.from_parquet else read_minari(spec, source)
    writer = TableWriter(rc.output_file(args.output), demo_columns(spec.schema), meta)
    try:
        with rc.writing(writer):
            for columns in episodes:
                writer.write_episode(columns)
    except TableImportError as e:
        raise UsageError(f"polc: {e}.") from None
    print(f"wrote {args.output}: {writer.episodes} episode(s), {writer.rows} steps from {source}", file=sys.stderr)
    return 0


def _rollout_config(args: argparse.Namespace, n: int, trace: bool):
    from .rollout import RolloutConfig

    from .vector import default_n_envs

    n_envs = args.n_envs if args.n_envs else default_n_envs(n)
    backend = getattr(args, "backend", "jax")
    if backend == "c" and args.sample:
        raise UsageError("polc: --backend c computes the mean actions only; it cannot --sample.")
    if backend == "c" and ray_address(args) is not None:
        raise UsageError("polc: --backend c runs in this process; drop --ray.")
    return RolloutConfig(n_envs=max(1, n_envs), sample=args.sample, noise_seed=args.noise_seed, trace=trace,
                         backend=backend)


def _seeds(spec, n: int, start: Optional[int], evaluation: bool) -> tuple[list[int], str]:
    """Rollout seeds and their kind: `start`, start+1, ... when given; else the first
    evaluation seeds with `--eval-seeds`; else the first training seeds (the range
    demonstrations come from), so that tuning on traces never sees the tracks that
    `polc eval` reports as unseen."""
    from .evaluate import eval_seeds

    if n < 1:
        raise UsageError("polc: the number of episodes must be at least 1.")
    if start is not None and evaluation:
        raise UsageError("polc: give --seed or --eval-seeds, not both.")
    if start is not None:
        seeds = list(range(start, start + n))
    elif evaluation:
        seeds = eval_seeds(spec, n)
    else:
        seeds = list(spec.demo_seeds[:n])
    kinds = {"training" if s in spec.demo_seeds else "evaluation" if s in spec.eval_seeds else "other" for s in seeds}
    return seeds, kinds.pop() if len(kinds) == 1 else "mixed"


def cmd_rollout(args: argparse.Namespace) -> int:
    from polc import __version__
    from polc.backend.emit import sha256

    from ..io.params import params_sha256, structure_sha256
    from .rollout import TraceLayout, rollout
    from ..io.table import TableWriter

    spec = rc.env_spec(args.env)
    policy = rc.compile_policy(args.file)
    params = rc.params_for(policy, args.params)
    seeds, seed_kind = _seeds(spec, args.episodes, args.seed, args.eval_seeds)
    config = _rollout_config(args, len(seeds), trace=True)
    tp = policy.program
    meta = {"kind": "trace", "polc_version": __version__,
            "policy": {"name": tp.name, "file": args.file, "sha256": sha256(tp), "structure_sha256":
                       structure_sha256(tp), "source": tp.source},
            "params": {"file": args.params, "sha256": params_sha256(params)},
            "env": rc.env_meta(spec), "seeds": seeds, "seed_kind": seed_kind,
            "actions": "sampled" if args.sample else "mean",
            "noise_seed": args.noise_seed if args.sample else None}
    writer = TableWriter(rc.output_file(args.output), TraceLayout(tp, spec.schema).columns(), meta)
    with pool_for(args, spec, policy) as pool, \
            rc.episode_progress(ray_label("rollout", pool), len(seeds), args.quiet) as bar, rc.writing(writer):
        def done(ep) -> None:
            writer.write_episode(ep.columns)
            bar.episode(f"seed {ep.seed}: return {ep.ret:.1f}")

        if pool is None:
            result = rollout(policy, params, spec, seeds, config, done, on_steps=bar.steps)
        else:  # the same episodes, stepped by the cluster's workers (polc.runtime.cluster)
            from ..cluster.remote import ray_rollout

            result = ray_rollout(pool, params, seeds, config, done, on_steps=bar.steps)
    print(f"wrote {args.output}: {len(seeds)} episode(s), {writer.rows} steps, return "
          f"{result.returns.mean():.1f} ± {result.returns.std():.1f}", file=sys.stderr)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .evaluate import eval_seeds, evaluate, evaluate_expert, render

    if (args.file is None) == (not args.expert):
        raise UsageError("polc: eval takes a .pol FILE, or --expert to evaluate the environment's expert.")
    spec = rc.env_spec(args.env)
    if args.episodes < 1:
        raise UsageError("polc: the number of seeds must be at least 1.")
    try:
        seeds = eval_seeds(spec, args.episodes, args.seed)
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    if args.expert:  # in this process, --ray or not: the expert reads the simulator
        with rc.episode_progress("eval", len(seeds), args.quiet or args.json) as bar:
            if isinstance(args.expert, str):  # a user's expert, not the environment's own
                spec = _with_expert(spec, args.expert)
            result = evaluate_expert(spec, seeds, lambda ep: bar.episode(f"seed {ep.seed}: {ep.ret:.1f}"))
        what = {"policy": "expert" if args.expert is True else f"expert {args.expert}"}
    else:
        policy = rc.compile_policy(args.file)
        params = rc.params_for(policy, args.params)
        config = _rollout_config(args, len(seeds), trace=False)
        with pool_for(args, spec, policy) as pool, \
                rc.episode_progress(ray_label("eval", pool), len(seeds), args.quiet or args.json) as bar:
            progress = lambda ep: bar.episode(f"seed {ep.seed}: {ep.ret:.1f}")  # noqa: E731
            if pool is None:
                result = evaluate(policy, params, spec, seeds, config, progress, on_steps=bar.steps)
            else:  # each worker evaluates its share with the same code (polc.runtime.cluster)
                from ..cluster.remote import ray_evaluate

                result = ray_evaluate(pool, params, seeds, config, progress, on_steps=bar.steps)
        what = {"policy": args.file, "params": args.params, "actions": "sampled" if args.sample else "mean"}
    if args.json:
        print(json.dumps(result.to_json(**what), indent=1))
    else:
        from rich.console import Console

        Console().print(render(result))
        print(result.summary())
    return 0


def register(sub: Any) -> None:
    """Add demos, rollout and eval to the `polc` subcommands."""
    c = sub.add_parser("demos", help="run an environment's expert and write a demonstration table")
    c.add_argument("env", help=rc.ENV_HELP)
    rc.env_flags(c)
    c.add_argument("--expert", metavar="FILE.py:FUNCTION",
                   help="your demonstrator for a gym: env, a function of the observation dict that returns the "
                        "action dict (or MODULE:FUNCTION)")
    c.add_argument("--from-parquet", metavar="FILE",
                   help="no expert: convert your own table, its columns named as the schema says "
                        "(obs.NAME / action.NAME or NAME; optional episode, reward, terminated, truncated)")
    c.add_argument("--from-minari", metavar="DATASET",
                   help="no expert: a locally installed Minari dataset of this environment (never downloaded), "
                        "its observations and actions named by the schema")
    c.add_argument("--episodes", type=int, default=1, help="how many episodes, one seed each (default 1)")
    c.add_argument("--seed", type=int, default=0, help="seed of the first episode (demonstration seeds: 0..999)")
    c.add_argument("--perturb", metavar="SIGMA",
                   help="recovery data (DART): step the environment with the expert's action plus N(0, SIGMA^2) "
                        "noise (clipped to the action's range) and record the expert's action; SIGMA for every "
                        "action, or NAME=SIGMA,... for some")
    c.add_argument("--noise-seed", type=int, default=0, help="key of the --perturb noise")
    c.add_argument("-o", "--output", required=True, help="the .parquet table to write")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=rc.guard(cmd_demos))

    c = sub.add_parser("rollout", help="run a policy and write a trace of everything it computes")
    rc.runner_flags(c)
    c.add_argument("--episodes", type=int, default=10, help="how many episodes, one seed each (default 10)")
    c.add_argument("--seed", type=int, help="seed of the first episode (default: the first training seeds, 0 up)")
    c.add_argument("--eval-seeds", action="store_true",
                   help="run on the first evaluation seeds instead (the ones polc eval reports as unseen)")
    c.add_argument("-o", "--output", required=True, help="the .parquet trace to write")
    add_ray_flags(c)
    c.set_defaults(func=rc.guard(cmd_rollout))

    c = sub.add_parser("eval", help="mean ± std score over unseen seeds, whether the mean meets the solved threshold, "
                                    "the share solved and the success rate where the environment defines them")
    rc.runner_flags(c, file_optional=True)
    c.add_argument("--expert", nargs="?", const=True, metavar="FILE.py:FUNCTION",
                   help="evaluate an expert instead of a policy: the environment's own, or yours (a function of "
                        "the observation dict that returns the action dict, as for polc demos --expert)")
    # The same spelling as demos and rollout; --seeds and --seed-start stay as aliases.
    c.add_argument("--episodes", "--seeds", dest="episodes", type=int, default=10,
                   help="how many episodes, one unseen seed each (default 10; the field reports 100: CarRacing "
                        "is solved at 900 over 100)")
    c.add_argument("--seed", "--seed-start", dest="seed", type=int,
                   help="seed of the first episode (default: the environment's first evaluation seed)")
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    c.add_argument("--backend", choices=("jax", "c"), default="jax",
                   help="c: act with the policy's generated C (polc compile -o X.c), built with the system C "
                        "compiler and called through ctypes (docs/deploying.md)")
    add_ray_flags(c)
    c.set_defaults(func=rc.guard(cmd_eval))

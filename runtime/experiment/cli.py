"""`polc experiment TASK [-o DIR] [--quick] [--skip-rl] [--llm SPEC] [--resume] [--ray auto|ADDRESS]
[--recovery steer=0.3]`.

Exit codes as every runtime command: 0 done, 1 a step failed (what finished is
kept; the same command continues), 2 bad usage.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from .. import cli as rc
from ..cli import UsageError


def cmd_experiment(args: argparse.Namespace) -> int:
    from .plan import FULL, QUICK, TASKS

    task = TASKS.get(args.task)
    if task is None:
        raise UsageError(f"polc: no experiment '{args.task}'; choose one of: {', '.join(TASKS)}.")
    budget = QUICK if args.quick else FULL
    if args.recovery:
        from dataclasses import replace

        from .. import envs
        from ..il.recovery import Recovery

        try:
            Recovery(args.recovery).resolve(envs.get(task.env))
        except ValueError as e:
            raise UsageError(f"polc: --recovery {args.recovery}: {e}.") from None
        budget = replace(budget, recovery=args.recovery)
    out = Path(args.output or Path("results") / (task.name + ("-quick" if args.quick else "")))
    if args.resume and not (out / "experiment.json").exists():
        near = [] if out.exists() else rc.nearest_runs(str(out))
        raise UsageError(f"polc: --resume: there is no experiment in '{out}' to continue; run the command "
                         f"without --resume to start one there"
                         + (f" (the nearest run directories: {', '.join(near)})." if near else "."))
    command = "polc " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["experiment"] \
        else f"polc experiment {task.name}" + (" --quick" if args.quick else "") + f" -o {out}"
    with rc.locked(str(out), "polc experiment"):
        return _run(args, task, budget, out, command)


def _run(args: argparse.Namespace, task: Any, budget: Any, out: Path, command: str) -> int:
    """The experiment in `out` (locked), its table written; the exit code."""
    from .report import RESULTS, TABLE, write_all
    from .run import Experiment, ExperimentError
    from ..cluster.flags import ray_address

    try:
        exp = Experiment(task, budget, str(out), llm=args.llm, progress=not args.quiet, skip_rl=args.skip_rl)
        address = ray_address(args)
        if address is None:
            found = exp.run()
        else:
            from .distributed import run_on_ray

            found = exp.run(lambda exp, steps: run_on_ray(exp, steps, address))
    except ExperimentError as e:
        print(f"polc: {e}.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"polc: interrupted; finished steps are kept in {out}/steps (run the same command to continue).",
              file=sys.stderr)
        raise
    write_all(out, task, budget, found["rows"], found["refinement"], exp.metric, exp.seeds, exp.seconds, command,
              exp.solved_at, rl_skipped=task.rl and not exp.rl)
    print((out / TABLE).read_text(encoding="utf-8"))
    print(f"wrote {out / TABLE}, {out / RESULTS} and the plots in {out}", file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    """Add `polc experiment` to the `polc` subcommands."""
    from ..cluster.flags import add_ray_flags
    from .plan import TASKS

    c = sub.add_parser("experiment", help="the paper's Table 1 (car_racing) or Figure 5 (door), measured")
    c.add_argument("task", help=f"which experiment: {', '.join(TASKS)}")
    c.add_argument("-o", "--output", help="output directory (default results/TASK); rerun to continue it")
    c.add_argument("--quick", action="store_true",
                   help="a reduced run (3 seeds, 300-step episodes, tiny RL budgets, 1 training seed) that "
                        "exercises every step; its table and plots are marked QUICK (default: 100 unseen seeds, "
                        "3 RL training seeds)")
    c.add_argument("--skip-rl", action="store_true",
                   help="only the expert and IL rows (RL is most of a full run's time); the same command without "
                        "it adds the RL rows, reusing these steps")
    c.add_argument("--llm", help="refine with this model (e.g. gemini:gemini-2.5-flash) instead of the "
                                 "bundled scripted session / the GEMINI_API_KEY default")
    c.add_argument("--resume", action="store_true",
                   help="continue the experiment in -o (refused when there is none); rerunning the same command "
                        "does the same: finished steps are never recomputed")
    c.add_argument("--recovery", metavar="SIGMA|NAME=SIGMA,...",
                   help="record DART recovery laps once (the expert on the demonstration's seeds, its executed actions "
                        "perturbed as `polc demos --perturb` does, e.g. steer=0.3): every IL fit, and the refinement "
                        "loop's, is made with and without them and the better on training seeds kept (default: off)")
    add_ray_flags(c, workers=False)
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    c.set_defaults(func=rc.guard(cmd_experiment))

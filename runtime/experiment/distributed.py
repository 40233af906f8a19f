"""`polc experiment --ray auto|ADDRESS`: the experiment's steps as a dependency graph of Ray
tasks (fit -> evaluations and RL runs -> the table), as many at once as the cluster has CPUs.

    results = run_on_ray(exp, exp.plan(), "auto")   # what Experiment.run does with it as its runner

A finished step (its steps/<name>.json) is never sent: its saved result is used. Every other
step runs in a Ray worker as `StepCall`, which builds the same Experiment there (once per
worker process, so a structure compiles once per worker) and runs the step's own code, so a
step's result is the one a local run computes; an evaluation of many seeds (the expert's, a
structure's) is itself spread over tasks, a share of the seeds each (`spread_evaluation`).
The driver saves each result as it arrives,
so a failure later loses nothing; a step that keeps failing fails the command naming it,
after every step that does not need it has finished (`cluster.graph`).

The output directory must be the same directory on every node (one machine, or a shared
filesystem such as NFS): the steps write their params, RL runs and the refinement there,
and the steps after them read them. A worker that does not see it fails its step saying so.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .plan import Budget, Structure, TASKS
from .run import Experiment, ExperimentError, Step

_HERE: dict[tuple, Experiment] = {}  # in a Ray worker: the experiments its steps belong to


@dataclass(frozen=True)
class StepCall:
    """Step `name` of the experiment these fields describe, runnable in any Ray worker (it
    pickles as plain data)."""

    task: str
    budget: Budget
    out: str        # absolute
    folder: str     # absolute
    llm: Optional[str]
    skip_rl: bool
    name: str

    def experiment(self) -> Experiment:
        key = (self.task, self.budget, self.out, self.folder, self.llm, self.skip_rl)
        if key not in _HERE:
            if not (Path(self.out) / "experiment.json").exists():
                raise ExperimentError(
                    f"the output directory {self.out} is not on the node {socket.gethostname()}: an experiment on "
                    f"several machines needs it on a filesystem every node mounts at that path (docs/ray.md)")
            exp = Experiment(TASKS[self.task], self.budget, self.out, llm=self.llm, progress=False,
                             skip_rl=self.skip_rl, folder=self.folder,
                             say=lambda s: print(s, file=sys.stderr, flush=True))
            exp.spread = lambda structure, params, config: spread_evaluation(self, structure, params, config)
            _HERE[key] = exp
        return _HERE[key]

    def __call__(self, deps: dict) -> dict:
        exp = self.experiment()
        step = next(s for s in exp.plan() if s.name == self.name)
        result = exp.timed(self.name, lambda: step.compute(deps))
        result["ran_on"] = {"host": socket.gethostname(), "pid": os.getpid()}
        return result


SHARE = 8  # seeds a share at least: a smaller share's task costs more than it saves


def spread_evaluation(call: StepCall, structure: Optional[Structure], params: Any, config: Any):
    """In a step on Ray: the step's evaluation (of `structure` with `params`, or of the expert
    when it is None) on every seed, its seeds split into shares of at least `SHARE`, one Ray
    task each (up to one per CPU of the cluster), merged in seed order. An episode depends only
    on its seed, so this is the EvalResult one process computes. While this step waits for
    them, Ray lends its CPU to the shares."""
    import ray

    from ..cluster.graph import RETRIES
    from ..cluster.pool import shares
    from ..cluster.remote import _share_config, host_params, merge_evaluations
    from ..trace.vector import MAX_BATCH

    seeds = [int(x) for x in call.experiment().seeds]
    cpus = int(ray.cluster_resources().get("CPU", 1))
    parts = shares(len(seeds), min(cpus, len(seeds) // SHARE), MAX_BATCH)
    key = None if structure is None else structure.key
    if len(parts) == 1:
        return _evaluate_share(call, key, params, seeds, config)
    task = ray.remote(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)(_evaluate_share)
    ref = ray.put(None if params is None else host_params(params))
    refs = [task.remote(call, key, ref, seeds[a:b], None if config is None else _share_config(config, b - a))
            for a, b in parts]
    try:
        return merge_evaluations(ray.get(refs))
    except ray.exceptions.RayTaskError as e:  # the share's own error (a non-finite action), as raised there
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise


def _evaluate_share(call: StepCall, key: Optional[str], params: Any, seeds: list, config: Any):
    from ..trace.evaluate import evaluate, evaluate_expert

    exp = call.experiment()
    if key is None:
        return evaluate_expert(exp.spec, seeds)
    structure = next(s for s in exp.task.structures if s.key == key)
    return evaluate(exp._policy(structure), params, exp.spec, seeds, config)


def run_on_ray(exp: Experiment, steps: list[Step], address: str) -> dict[str, dict]:
    """Every step's result, the unfinished ones computed on the cluster at `address`."""
    from ..cli import Failure
    from ..cluster.connect import ClusterError, connected
    from ..cluster.graph import GraphError, Node, run_graph

    done = {}
    for s in steps:
        cached = exp._cached(s.name)
        if cached is not None:
            done[s.name] = cached
    todo = [s for s in steps if s.name not in done]
    if not todo:
        return done
    fields = dict(task=exp.task.name, budget=exp.budget, out=str(exp.out.resolve()),
                  folder=str(exp.folder.resolve()), llm=exp.llm, skip_rl=not exp.rl and exp.task.rl)
    nodes = [Node(s.name, s.deps, StepCall(name=s.name, **fields)) for s in todo]
    what = {s.name: s.what for s in todo}
    finished = [len(done)]

    def started(name: str, running: int, left: int) -> None:
        exp.say(f"[{name}] {what[name]} ({running} running, {left} waiting)")

    def saved(name: str, result: dict) -> None:
        finished[0] += 1
        where = result.get("ran_on", {})
        exp._save(name, result)
        exp.say(f"    {finished[0]} of {len(steps)} steps finished (that one on {where.get('host', '?')}, "
                f"pid {where.get('pid', '?')})")

    try:
        with connected(address) as cluster:
            exp.say(f"{len(todo)} of {len(steps)} steps to run, at most {cluster.cpus} at a time "
                    f"({len(done)} finished before)")
            return run_graph(nodes, done, on_start=started, on_done=saved)
    except GraphError as e:
        raise ExperimentError(f"{e}; every finished step is kept in {exp.out}/steps: fix the cause and run the "
                              f"same command (or add --resume) to continue") from None
    except ClusterError as e:
        raise Failure(f"{e}.") from None


__all__ = ["SHARE", "StepCall", "run_on_ray", "spread_evaluation"]

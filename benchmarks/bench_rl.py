"""RL on Car Racing: wall time per 100 resets with one environment, with every
episode of an update stepped together in this process (the default), and with
worker processes; and each update's split between rollout and gradient.

    .venv/bin/python benchmarks/bench_rl.py [--reps 3] [--updates 1] [--json FILE]
    .venv/bin/python benchmarks/bench_rl.py --experiment results/car_racing   # resets to reach 900

Timing: the structure is `examples/car_racing/initial.pol` fitted to the bundled
demonstration (fitted once, first). Each repetition runs `--updates` updates of 20
episodes (the paper's) for every candidate, interleaved in a rotating order so
drift on a shared machine hits all alike; a candidate's figure is the median over
repetitions of its seconds per 100 resets, from `polc.runtime.rl.train`'s own
per-update record (`collect_s` rollout, `update_s` gradient). The first update of
each candidate (compilation, environment start-up) is run once before timing and
not counted. Nothing here asserts a time.

`--against COMMIT` times this working tree's RL against polc at git COMMIT (e.g. the
commit before issue 18's changes, 792c298), each in its own child process pinned to the
idlest core, interleaved `--reps` times in a rotating order: the default 20 in-process
environments, one warm-up update, then `--updates` timed updates of 20 episodes each.
matplotlib is imported in each child before training (a once-per-process cost, like the
compiles). Per candidate: seconds per 100 resets in process CPU time (steadier on a shared machine)
and wall time, the median over repetitions, and the median of the per-repetition
ratios new / old. It also checks that the engine gives the SAME episodes: every
episode's return (float64, exactly) and the final rl.params file's weights. Since the grouped
weight transforms (a1b19a0) this tree's policy rounds some weights differently in the
last float32 bit, and a Car Racing episode amplifies that, so a third candidate runs
this tree with the per-weight transforms the old trees used (`lower(..., grouped=False)`);
the identity is checked between it and the old tree, and the default's is reported beside.
`--new COMMIT` times polc at COMMIT as the new side instead of the working tree (so the
tree may change while it runs).

`--experiment DIR` reads a finished `polc experiment car_racing -o DIR` and prints
the resets each structure needed before its mean training return over 5 updates
(100 episodes on 5 tracks) first reached 900 (refinement resets included for the
refined structure), the paper's 404 / 2000 / not reached.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "examples" / "car_racing" / "initial.pol"
DEMO = ROOT / "examples" / "car_racing" / "demo.parquet"
CANDIDATES = {  # name -> (n_envs, asynchronous)
    "1 env": (1, False),
    "20 envs, one process (default)": (20, False),
    "2 envs, worker processes": (2, True),
}


def fitted(policy):
    from polc.runtime.il.train import FitConfig, fit, load_demos
    from polc.runtime.io.table import read_table

    return fit(policy, load_demos(read_table(str(DEMO)), policy.program), FitConfig(restarts=1)).params


def run_updates(policy, params, spec, n_envs: int, asynchronous: bool, updates: int) -> list[dict]:
    """`updates` timed updates after one untimed warm-up update; their log records."""
    from polc.runtime.rl import train as rl

    config = rl.RLConfig(resets=20 * (updates + 1), n_envs=n_envs, asynchronous=asynchronous)
    with tempfile.TemporaryDirectory() as d:
        log = rl.train(policy, params, spec, config, d).log["log"]
    return log[1:]


def timing(args) -> dict:
    import polc
    from polc.runtime import envs

    policy = polc.load(str(POLICY)).compile()
    params = fitted(policy)
    spec = envs.get("car_racing")
    names = list(CANDIDATES)
    per100 = {n: [] for n in names}
    split = {n: [] for n in names}
    for rep in range(args.reps):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            n_envs, asynchronous = CANDIDATES[name]
            log = run_updates(policy, params, spec, n_envs, asynchronous, args.updates)
            rollout = sum(r["collect_s"] for r in log)
            gradient = sum(r["update_s"] for r in log)
            resets = 20 * len(log)
            per100[name].append(100.0 * (rollout + gradient) / resets)
            split[name].append((rollout, gradient))
            print(f"  rep {rep + 1} {name:32s} {per100[name][-1]:7.1f} s per 100 resets "
                  f"(rollout {rollout:.1f} s, gradient {gradient:.2f} s)", file=sys.stderr, flush=True)
    med = {n: statistics.median(v) for n, v in per100.items()}
    base = med["20 envs, one process (default)"]
    print(f"\nRL on Car Racing ({POLICY.name}, fitted), {args.updates} update(s) of 20 episodes per repetition, "
          f"median of {args.reps}:")
    print(f"{'candidate':34s} {'s / 100 resets':>15s} {'x default':>10s} {'rollout share':>14s}")
    out = {}
    for n in names:
        r = statistics.median(s[0] for s in split[n])
        g = statistics.median(s[1] for s in split[n])
        print(f"{n:34s} {med[n]:15.1f} {med[n] / base:10.2f} {r / (r + g):14.1%}")
        out[n] = {"seconds_per_100_resets": med[n], "ratio_to_default": med[n] / base,
                  "rollout_s": r, "gradient_s": g, "all": per100[n]}
    return out


def worker(args) -> int:
    """One candidate of `--against`: train from `--params`, print JSON (timings, returns)."""
    import time

    from polc.runtime.rl import collect, train as rl

    common.single_threaded_jax_env()
    import polc
    from polc.runtime import envs
    from polc.runtime.io.params import load_params

    returns: list[list[str]] = []
    real_run = collect.Collector.run

    def run(self, *a, **k):  # every episode's return, exactly (repr of the float64)
        ep = real_run(self, *a, **k)
        returns.append([repr(float(x)) for x in ep.returns])
        return ep

    collect.Collector.run = run
    # matplotlib's import (about 0.8 s) is paid once per process, at the first curve.png, like
    # the compiles the warm-up update absorbs; imported here, before any update, so that a tree
    # which draws the curve at checkpoints (not after the warm-up) is not charged it in the one
    # timed update while one that draws after every update paid it in the warm-up.
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    marks: list[tuple[float, float]] = []
    if args.per_weight:  # the weight transforms of the old trees, for the identity check
        from polc.backend.lower import lower

        policy = lower(polc.load(str(POLICY)).typed, grouped=False)
    else:
        policy = polc.load(str(POLICY)).compile()
    params = load_params(args.worker, policy)
    config = rl.RLConfig(resets=20 * (args.updates + 1), n_envs=20)
    with tempfile.TemporaryDirectory() as d:
        rl.train(policy, params, envs.get("car_racing"), config, d,
                 on_update=lambda record: marks.append((common.cpu_seconds(), time.perf_counter())))
        final = (Path(d) / rl.PARAMS).read_text()
    timed = 20 * args.updates
    print(json.dumps({"cpu_per_100": 100 * (marks[-1][0] - marks[0][0]) / timed,
                      "wall_per_100": 100 * (marks[-1][1] - marks[0][1]) / timed,
                      "returns": returns, "params": final}))
    return 0


PER_WEIGHT = "new, per-weight transforms"


def learned(result: dict, key: str):
    """What must be identical in a worker's `result`: the returns, or the params file's
    weights and mlp leaves (its config record gains a field with every new option)."""
    if key != "params":
        return result[key]
    saved = json.loads(result["params"])
    return saved["weights"], saved.get("mlps")


def against(args) -> dict:
    """This tree's RL against polc at `args.against`, interleaved child processes."""
    import subprocess

    old_tree = common.source_tree(args.against)
    here = Path(__file__).resolve()
    with tempfile.TemporaryDirectory() as d:
        params = str(Path(d) / "fitted.params")
        polc_bin = str(Path(sys.executable).parent / "polc")
        subprocess.run([polc_bin, "fit", str(POLICY), "--demos", str(DEMO), "-o", params, "--restarts", "1",
                        "--check-episodes", "0", "-q"], check=True, capture_output=True)
        new_tree = common.source_tree(args.new) if args.new else None
        cands = {f"new ({args.new})" if args.new else "new (this tree)": new_tree, PER_WEIGHT: new_tree,
                 f"old ({args.against})": old_tree}
        names = list(cands)
        out = {n: [] for n in names}
        load = common.LoadMeter()
        for rep in range(args.reps):
            for name in names[rep % 3:] + names[:rep % 3]:
                core = common.idlest_core()
                argv = ["taskset", "-c", str(core), sys.executable, str(here), "--worker", params,
                        "--updates", str(args.updates)] + (["--per-weight"] if name == PER_WEIGHT else [])
                p = subprocess.run(argv, env=common.child_env(cands[name]), capture_output=True, text=True,
                                   cwd=d)
                if p.returncode != 0:
                    raise RuntimeError(f"{name} failed:\n{p.stderr[-3000:]}")
                out[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
                r = out[name][-1]
                print(f"  rep {rep + 1} {name:24s} {r['cpu_per_100']:6.1f} s CPU, {r['wall_per_100']:6.1f} s wall "
                      f"per 100 resets (core {core})", file=sys.stderr, flush=True)
        busy = load.busy_cores()
    new, per_weight, old = names

    def same(a: str, b: str, key: str) -> bool:
        return all(learned(x, key) == learned(y, key) for x in out[a] for y in out[b])

    med = statistics.median
    result = {"against": args.against, "new": args.new, "reps": args.reps, "updates": args.updates, "busy_cores": busy,
              "identical_returns": same(per_weight, old, "returns"), "identical_params": same(per_weight, old, "params"),
              "identical_returns_grouped": same(new, old, "returns")}
    print(f"\nRL on Car Racing ({POLICY.name}, fitted), 20 in-process envs, {args.updates} timed update(s) of 20 "
          f"episodes after a warm-up update, {args.reps} interleaved repetitions:")
    print(f"{'candidate':24s} {'CPU s / 100 resets':>19s} {'wall s / 100 resets':>20s}")
    for n in names:
        result[n] = {k: [r[k] for r in out[n]] for k in ("cpu_per_100", "wall_per_100")}
        print(f"{n:24s} {med(result[n]['cpu_per_100']):19.1f} {med(result[n]['wall_per_100']):20.1f}")
    for k in ("cpu_per_100", "wall_per_100"):
        result[f"ratio_{k}"] = common.paired_ratio(result[new][k], result[old][k])
        result[f"ratio_{k}_per_weight"] = common.paired_ratio(result[per_weight][k], result[old][k])
    print(f"new / old (median of per-repetition ratios): CPU {result['ratio_cpu_per_100']:.3f}, "
          f"wall {result['ratio_wall_per_100']:.3f}   (target <= 0.6); per-weight transforms: CPU "
          f"{result['ratio_cpu_per_100_per_weight']:.3f}")
    print(f"per-weight transforms vs old: identical returns for the same seeds: {result['identical_returns']} "
          f"(every episode, float64); identical final rl.params weights: {result['identical_params']}")
    print(f"this tree's default (grouped transforms, last-bit differences) vs old: identical returns "
          f"{result['identical_returns_grouped']}")
    if busy is not None:
        print(f"machine load during the run: {busy:.1f} of {os.cpu_count()} cores busy")
    return result


def resets_to_900(directory: str) -> dict:
    from polc.runtime.experiment.run import SMOOTH, first_reached

    results = json.loads((Path(directory) / "results.json").read_text())
    refine_resets = results["refinement"].get("resets", 0)
    budget = results["budget"]["high"]
    out = {}
    print(f"Resets until the mean training return over {SMOOTH} updates first reached 900 ({directory}):")
    for key in ("refined", "initial", "mlp"):  # one run per training seed: rl/<key>/seed<k>/log.json
        for path in sorted((Path(directory) / "rl" / key).glob("seed*/log.json")):
            first = first_reached(json.loads(path.read_text())["log"], 900.0)
            total = None if first is None else first + (refine_resets if key == "refined" else 0)
            out[f"{key}/{path.parent.name}"] = total
            print(f"  {key:8s} {path.parent.name:6s} {'not reached in %d' % budget if total is None else total}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--updates", type=int, default=1, help="timed updates per candidate and repetition")
    ap.add_argument("--experiment", help="a finished `polc experiment car_racing` directory")
    ap.add_argument("--against", metavar="COMMIT", help="time this tree's RL against polc at this git commit")
    ap.add_argument("--new", metavar="COMMIT", help="with --against: time polc at COMMIT as the new side, "
                    "not the working tree")
    ap.add_argument("--worker", metavar="PARAMS", help=argparse.SUPPRESS)
    ap.add_argument("--per-weight", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.experiment:
        result = resets_to_900(args.experiment)
    else:
        result = against(args) if args.against else timing(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

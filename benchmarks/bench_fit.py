"""`polc fit` on the shipped Car Racing demonstration: CPU time of the whole process with
a cold and a warm compilation cache, against polc at an older commit (issue 18).

    .venv/bin/python benchmarks/bench_fit.py [--reps 3] [--against COMMIT] [--policy initial.pol]
                                             [--demos examples/car_racing/demo.parquet] [--json FILE]
    .venv/bin/python benchmarks/bench_fit.py --in-process [--against COMMIT]
    .venv/bin/python benchmarks/bench_fit.py --old-site DIR   # old polc on the packages it had

`--old-site DIR` puts DIR before everything else on the old candidate's PYTHONPATH, so it runs
with the packages a fresh install had at COMMIT, where this tree pins them differently: e.g.
`pip install --no-deps --target DIR ml_dtypes==0.7.0` (pyproject.toml keeps ml_dtypes below 0.7,
whose extension module costs 0.55 s of CPU to import here, and the old commit did not).

Each repetition runs, in a rotating order, one child process per candidate, the command's
defaults (3 restarts, the 5-episode closed-loop check), pinned to the idlest core:

    old (COMMIT)   polc at COMMIT (`git archive` on PYTHONPATH; default: the commit before
                   the compile cache, the reused step and the flat optimiser state)
    no cache       this tree, POLC_NO_COMPILE_CACHE=1: the reused step and flat Adam only
    cold cache     this tree, an empty cache directory (XDG_CACHE_HOME of its own)
    warm cache     this tree, a cache filled by one untimed fit before the repetitions

The figure is process CPU time (user + sys of the child, which waiting for a busy core does
not inflate), with wall time beside it; ratios are medians of per-repetition ratios.
Before the table: whether every candidate wrote the same weights (this tree's candidates
bit for bit; against the old commit the largest relative difference, since Adam over one
flat vector rounds differently in the last bit), and the fitted closed-loop score.
`--paired`: the old commit with its own compile cache too (issue 40: COMMIT has one), four
candidates, old and this tree each with the cache off (POLC_NO_COMPILE_CACHE=1: every
compile paid, nothing of an earlier run kept, the closed-loop scores cache included) and
warm (a cache of its own filled by one untimed fit); the ratios are this tree / old, per pair.
`--in-process`: three `fit()` calls in one process (a new compile of the same source each
time, no persistent cache), old and this tree in a child process each: CPU seconds and XLA
compiles (jax.monitoring's backend-compile events) per fit.
Nothing here asserts a time. Regenerate the demonstration with
`polc demos car_racing --episodes 1 --seed 0 -o examples/car_racing/demo.parquet`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

BEFORE = "cc9c491"  # main before issue 18's fit work
CANDIDATES = ("old", "no cache", "cold cache", "warm cache")


def _env(tree: Path | None, cache_home: str | None, site: str | None = None) -> dict[str, str]:
    env = common.child_env(tree)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([site] + [p for p in [env.get("PYTHONPATH")] if p])
    for k in ("JAX_COMPILATION_CACHE_DIR", "POLC_NO_COMPILE_CACHE", "TF_CPP_MIN_LOG_LEVEL"):
        env.pop(k, None)
    if cache_home is None:
        env["POLC_NO_COMPILE_CACHE"] = "1"
    else:
        env["XDG_CACHE_HOME"] = cache_home
    return env


def run_fit(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child; raises if it fails."""
    core = common.idlest_core()
    c0, t0 = common.children_cpu(), time.perf_counter()
    p = subprocess.run(["taskset", "-c", str(core), *argv], env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, common.children_cpu() - c0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return cpu, wall


def _weights(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return {"weights": data["weights"], "mlps": data.get("mlps", {}), "fit": data["fit"]}


def fits_in_process(pol: str, demos_path: str, n: int) -> list[dict]:
    """`n` fits in this process (run as a child): CPU seconds and XLA compiles of each."""
    import jax

    import polc
    from polc.runtime.il.train import FitConfig, fit, load_demos
    from polc.runtime.io.table import read_table

    count = {"n": 0}
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, secs, **kw: count.__setitem__("n", count["n"] + (name == "/jax/core/compile/backend_compile_duration")))
    demos = load_demos(read_table(demos_path), polc.load(pol).compile().program)
    out = []
    for _ in range(n):
        policy = polc.load(pol).compile()
        count["n"], t = 0, time.process_time()
        fit(policy, demos, FitConfig())
        out.append({"cpu_s": time.process_time() - t, "compiles": count["n"]})
    return out


def in_process(args, pol: str) -> None:
    old_tree = common.source_tree(args.against)
    rows = []
    for name, tree, site in ((f"old ({args.against})", old_tree, args.old_site), ("this tree", None, None)):
        argv_ = [sys.executable, __file__, "--worker", "3", "--policy", args.policy, "--demos", args.demos]
        p = subprocess.run(["taskset", "-c", str(common.idlest_core()), *argv_], env=_env(tree, None, site),
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{name} failed:\n{p.stderr[-3000:]}")
        fits = json.loads(p.stdout.strip().splitlines()[-1])
        rows.append([name] + [f"{f['cpu_s']:.2f} s, {f['compiles']} compiles" for f in fits])
    print(common.table(["fit() in one process", "1st", "2nd (same structure)", "3rd"], rows))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (median)")
    ap.add_argument("--against", default=BEFORE, metavar="COMMIT", help=f"the older polc (default {BEFORE})")
    ap.add_argument("--policy", default="initial.pol", help="a policy of examples/car_racing/")
    ap.add_argument("--demos", default=str(common.ROOT / "examples" / "car_racing" / "demo.parquet"))
    ap.add_argument("--old-site", metavar="DIR", help="packages before all others for the old candidate (see above)")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--in-process", action="store_true", help="fits in one process instead (see above)")
    ap.add_argument("--paired", action="store_true", help="old and this tree each cache off and warm (see above)")
    ap.add_argument("--new", metavar="COMMIT", help="with --paired: polc at COMMIT as the new side instead of this "
                                                    "working tree (which may then change while it runs)")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    pol = str(common.ROOT / "examples" / "car_racing" / args.policy)
    if args.worker:
        print(json.dumps(fits_in_process(pol, args.demos, args.worker)))
        return 0
    if args.in_process:
        print(common.header(f"bench_fit --in-process: `fit()` of {args.policy} three times in one process"))
        in_process(args, pol)
        return 0
    if args.paired:
        print(common.header(f"bench_fit --paired: `polc fit {args.policy}` CPU time, cache off / warm, this tree "
                            f"against {args.against}"))
        paired(args, pol)
        return 0
    print(common.header(f"bench_fit: `polc fit {args.policy}` CPU time, compile cache cold / warm, against "
                        f"{args.against}"))
    old_tree = common.source_tree(args.against)
    polc_bin = str(Path(sys.executable).parent / "polc")
    with tempfile.TemporaryDirectory() as tmp:
        warm_home = os.path.join(tmp, "warm")

        def command(name: str, rep: int) -> tuple[list[str], dict[str, str], str]:
            out = os.path.join(tmp, f"{name.replace(' ', '_')}-{rep}.params")
            argv_ = [polc_bin, "fit", pol, "--demos", args.demos, "-o", out, "-q"]
            if name == "old":
                return argv_, _env(old_tree, None, args.old_site), out
            if name == "no cache":
                return argv_, _env(None, None), out
            home = warm_home if name == "warm cache" else os.path.join(tmp, f"cold-{rep}")
            return argv_, _env(None, home), out

        argv_, env, _ = command("warm cache", -1)
        run_fit(argv_, env)  # fills the warm cache (untimed)
        load = common.LoadMeter()
        cpu, wall, results = _interleaved(CANDIDATES, args.reps, command)
        busy = load.busy_cores()
        cache_bytes = sum(f.stat().st_size for f in Path(warm_home).rglob("*") if f.is_file())
    raw = {"machine": common.machine(), "against": args.against, "old_site": args.old_site,
           "policy": args.policy, "reps": args.reps,
           "busy_cores": busy, "cpu_s": cpu, "wall_s": wall, "cache_bytes": cache_bytes}
    report(raw, results)
    common.write_json(args.json, raw)
    return 0


def _interleaved(names, reps: int, command) -> tuple[dict, dict, dict]:
    """CPU and wall seconds and the written weights of each candidate's `polc fit`, the
    candidates run in a rotated order each repetition so load drifts hit them alike."""
    cpu, wall, results = ({n: [] for n in names} for _ in range(3))
    for rep in range(reps):
        for name in tuple(names[rep % len(names):]) + tuple(names[:rep % len(names)]):
            argv_, env, out = command(name, rep)
            c, w = run_fit(argv_, env)
            cpu[name].append(c)
            wall[name].append(w)
            results[name].append(_weights(out))
            print(f"  rep {rep + 1} {name:10s} {c:6.2f} s CPU {w:6.2f} s wall", file=sys.stderr, flush=True)
    return cpu, wall, results


PAIRED = ("old off", "new off", "old warm", "new warm")


def paired(args, pol: str) -> None:
    """Old and this tree, each with the cache off and warm, interleaved (see `--paired`)."""
    old_tree = common.source_tree(args.against)
    new_tree = common.source_tree(args.new) if args.new else None
    polc_bin = str(Path(sys.executable).parent / "polc")
    with tempfile.TemporaryDirectory() as tmp:
        def command(name: str, rep: int) -> tuple[list[str], dict[str, str], str]:
            side, mode = name.split()
            out = os.path.join(tmp, f"{side}-{mode}-{rep}.params")
            home = None if mode == "off" else os.path.join(tmp, f"{side}-warm")
            env = _env(old_tree if side == "old" else new_tree, home, args.old_site if side == "old" else None)
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode kept, as an installed polc's is
            env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, f"pyc-{side}")
            return [polc_bin, "fit", pol, "--demos", args.demos, "-o", out, "-q"], env, out

        for name in PAIRED:  # untimed: fills each side's warm cache and writes its bytecode
            run_fit(*command(name, -1)[:2])
        load = common.LoadMeter()
        cpu, wall, results = _interleaved(PAIRED, args.reps, command)
        busy = load.busy_cores()
    same = {side: all(r["weights"] == results[f"{side} off"][0]["weights"] for m in ("off", "warm")
                      for r in results[f"{side} {m}"]) for side in ("old", "new")}
    ow, nw = results["old off"][0]["weights"], results["new off"][0]["weights"]
    rel = max(abs(float(nw[k]) - float(ow[k])) / max(abs(float(ow[k])), 1e-12) for k in ow)
    loops = {side: results[f"{side} off"][0]["fit"].get("closed_loop") for side in ("old", "new")}
    print(f"\nweights identical within each side: {same}; largest relative difference new vs old: {rel:.2g}")
    print(f"closed loop (declared, fitted): old {loops['old'] and (loops['old']['declared'], loops['old']['fitted'])}, "
          f"new {loops['new'] and (loops['new']['declared'], loops['new']['fitted'])}")
    rows = []
    for mode in ("off", "warm"):
        o, n = f"old {mode}", f"new {mode}"
        rows.append([f"cache {mode}", f"{statistics.median(cpu[o]):.2f} s", f"{statistics.median(cpu[n]):.2f} s",
                     f"{common.paired_ratio(cpu[n], cpu[o]):.2f}", _range([a / b for a, b in zip(cpu[n], cpu[o])]),
                     f"{common.paired_ratio(wall[n], wall[o]):.2f}"])
    print()
    print(common.table(["polc fit", "old CPU", "new CPU", "new / old CPU", "spread of ratios", "wall ratio"], rows))
    if busy is not None:
        print(f"machine load during the run: {busy:.1f} of {os.cpu_count()} cores busy (this benchmark included)")
    common.write_json(args.json, {"machine": common.machine(), "against": args.against, "reps": args.reps,
                                  "busy_cores": busy, "cpu_s": cpu, "wall_s": wall, "max_rel_diff": rel,
                                  "identical_within_side": same, "closed_loop": loops})


def _range(ratios: list[float]) -> str:
    return f"{min(ratios):.2f}-{max(ratios):.2f}"


def report(raw: dict, results: dict) -> None:
    cpu, wall = raw["cpu_s"], raw["wall_s"]
    new = [r for n in CANDIDATES[1:] for r in results[n]]
    same_new = all(r["weights"] == new[0]["weights"] and r["mlps"] == new[0]["mlps"] for r in new)
    old_w, new_w = results["old"][0]["weights"], new[0]["weights"]
    rel = max(abs(float(new_w[k]) - float(old_w[k])) / max(abs(float(old_w[k])), 1e-12) for k in old_w)
    same_old = all(r["weights"] == results["old"][0]["weights"] for r in results["old"])
    raw.update(identical_weights_this_tree=same_new, max_rel_diff_vs_old=rel, identical_old_runs=same_old)

    def fit_summary(r: dict) -> str:
        f = r["fit"]
        loop = f.get("closed_loop") or {}
        return (f"val {f['val_loss']:.6g}, restart {f['restart']} epoch {f['epoch']}, "
                f"{sum(x['epochs'] for x in f['restarts'])} epochs, closed loop {loop.get('fitted', '-')}")

    print(f"\nweights identical across this tree's candidates and repetitions: {same_new}")
    print(f"largest relative difference of a weight, this tree vs {raw['against']}: {rel:.2g}")
    print(f"  {raw['against']}: {fit_summary(results['old'][0])}")
    print(f"  this tree:  {fit_summary(new[0])}")
    rows = []
    for n in CANDIDATES:
        site = f", {raw['old_site']} first" if raw.get("old_site") else ""
        label = f"old ({raw['against']}{site})" if n == "old" else n
        ratio = "1" if n == "old" else f"{common.paired_ratio(cpu[n], cpu['old']):.2f}"
        raw[f"ratio_cpu_{n}"] = None if n == "old" else common.paired_ratio(cpu[n], cpu["old"])
        rows.append([label, f"{statistics.median(cpu[n]):.2f} s", ratio, f"{statistics.median(wall[n]):.2f} s",
                     "1" if n == "old" else f"{common.paired_ratio(wall[n], wall['old']):.2f}"])
    print()
    print(common.table(["candidate", "CPU (median)", "CPU / old", "wall (median)", "wall / old"], rows))
    print(f"\ntarget: warm cache CPU / old <= 0.5; cache after one fit: {raw['cache_bytes'] / 1e6:.2f} MB")
    if raw["busy_cores"] is not None:
        print(f"machine load during the run: {raw['busy_cores']:.1f} of {os.cpu_count()} cores busy "
              "(this benchmark included)")


if __name__ == "__main__":
    sys.exit(main())

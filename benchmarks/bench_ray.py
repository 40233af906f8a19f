"""`--ray` against in-process evaluation (issue 17): the overhead of a Ray pool for 10 and
100 episodes, and a scaling study with 1 and 2 local Ray worker processes.

    .venv/bin/python benchmarks/bench_ray.py [--env car_racing] [--max-steps 100] [--sizes 10 100]
                                             [--workers 1 2] [--reps 3] [--rounds 2] [--timeout 300] [--json FILE]

Every measurement runs in a child process with a timeout (a Ray instance that hangs, e.g.
"recovering lost objects", is killed with its process group, and reported as such), and
every child shuts Ray down before it exits. A child with W workers starts a local Ray
instance of W CPUs and a pool of W rollout-worker actors, warms both paths up (compilation
is never timed), then for `--reps` repetitions evaluates each size both in process
(`trace.evaluate.evaluate`, the same config `polc eval` uses) and on the pool
(`cluster.remote.ray_evaluate`), in an order that rotates, so drift hits both alike.

Reported, per size: seconds per episode in process and on Ray, and the ray/local ratio as
the median of the per-repetition paired ratios; Ray's start-up (ray.init and the actors'
first call: paid once per command) apart. The scaling study is the Ray time with 1 worker
against 2 workers, children alternating 1, 2, 1, 2 (`--rounds`). On this 2-core machine
shared with other work, 2 workers can give at most 2x. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(args: argparse.Namespace) -> dict:
    """One child: W workers, every size, `reps` interleaved repetitions (see the docstring)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import jax
    import numpy as np
    import ray

    import polc
    from polc.runtime import envs
    from polc.runtime.cluster.pool import WorkerPool
    from polc.runtime.cluster.remote import ray_evaluate
    from polc.runtime.refine.envspec import ShortEpisodes
    from polc.runtime.trace.evaluate import eval_seeds, evaluate
    from polc.runtime.trace.rollout import RolloutConfig
    from polc.runtime.trace.vector import default_n_envs

    if args.env == "toy_reach":
        from polc.runtime.envs import toy

        spec = toy.register()
        source = toy.reach_policy(std=0.3)
        policy = polc.loads(source, "reach.pol").compile()
    else:
        base = envs.get(args.env)
        spec = ShortEpisodes(base, args.max_steps) if args.max_steps else base
        policy = polc.load(str(ROOT / "examples" / args.env / "initial.pol")).compile()
    params = policy.init(jax.random.PRNGKey(0))
    most = max(args.sizes)
    seeds = [int(s) for s in eval_seeds(getattr(spec, "spec", spec), most)]
    config = lambda n: RolloutConfig(n_envs=default_n_envs(n), trace=False)  # noqa: E731  (polc eval's)

    t = time.perf_counter()
    ray.init(num_cpus=args.child_workers, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    out = {"workers": args.child_workers, "ray_init_s": time.perf_counter() - t, "sizes": {}}
    try:
        t = time.perf_counter()
        pool = WorkerPool(spec, policy, args.child_workers)
        for n in args.sizes:  # the actors compile their step for each share size once
            ray_evaluate(pool, params, seeds[:n], config(n))
        out["pool_warm_s"] = time.perf_counter() - t
        for n in args.sizes:
            evaluate(policy, params, spec, seeds[:n], config(n))  # local warm-up (compilation)
        check = {}
        for n in args.sizes:
            local, remote = [], []
            for rep in range(args.reps):
                order = ("local", "ray") if rep % 2 == 0 else ("ray", "local")
                for which in order:
                    t = time.perf_counter()
                    if which == "local":
                        ev = evaluate(policy, params, spec, seeds[:n], config(n))
                        local.append(time.perf_counter() - t)
                    else:
                        ev = ray_evaluate(pool, params, seeds[:n], config(n))
                        remote.append(time.perf_counter() - t)
                    check.setdefault(n, {})[which] = np.asarray(ev.returns).tolist()
            out["sizes"][str(n)] = {"local_s": local, "ray_s": remote,
                                    "same_returns": check[n]["local"] == check[n]["ray"]}
        pool.close()
    finally:
        ray.shutdown()
    return out


def run_child(argv: list[str], workers: int, timeout: float) -> dict:
    """A child measurement; {"error": ...} when it failed or hung (its process group is killed)."""
    cmd = [sys.executable, __file__, "--child-workers", str(workers), *argv]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"workers": workers, "error": f"timed out after {timeout:.0f} s (killed)"}
    if p.returncode != 0:
        return {"workers": workers, "error": f"exit {p.returncode}: {stderr.strip().splitlines()[-1:]}"}
    return json.loads(stdout.strip().splitlines()[-1])


def summary(children: list[dict], sizes: list[int]) -> dict:
    ok = [c for c in children if "error" not in c]
    out: dict = {"errors": [c for c in children if "error" in c]}
    med = statistics.median
    for c in ok:
        c.setdefault("per_size", {})
    by_w: dict[int, list[dict]] = {}
    for c in ok:
        by_w.setdefault(c["workers"], []).append(c)
    for w, cs in sorted(by_w.items()):
        row = {"ray_init_s": med(c["ray_init_s"] for c in cs), "pool_warm_s": med(c["pool_warm_s"] for c in cs)}
        for n in sizes:
            local = [x for c in cs for x in c["sizes"][str(n)]["local_s"]]
            remote = [x for c in cs for x in c["sizes"][str(n)]["ray_s"]]
            ratios = [r / loc for c in cs for loc, r in zip(c["sizes"][str(n)]["local_s"], c["sizes"][str(n)]["ray_s"])]
            row[str(n)] = {"local_s_per_episode": med(local) / n, "ray_s_per_episode": med(remote) / n,
                           "ray_over_local": med(ratios), "reps": len(ratios),
                           "same_returns": all(c["sizes"][str(n)]["same_returns"] for c in cs)}
        out[f"workers={w}"] = row
    if 1 in by_w and 2 in by_w:
        for n in sizes:
            one = med(x for c in by_w[1] for x in c["sizes"][str(n)]["ray_s"])
            two = med(x for c in by_w[2] for x in c["sizes"][str(n)]["ray_s"])
            out.setdefault("speedup_2_over_1_workers", {})[str(n)] = one / two
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="car_racing", help="car_racing (initial.pol, its declared weights) or toy_reach")
    ap.add_argument("--max-steps", type=int, default=100, help="episodes cut at this many steps (0: the env's own)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=3, help="paired repetitions per child")
    ap.add_argument("--rounds", type=int, default=2, help="children per worker count, alternating")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a child may take before it is killed")
    ap.add_argument("--json", help="write the raw and summary numbers here")
    ap.add_argument("--child-workers", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_workers:
        args.child_workers = int(args.child_workers)
        print(json.dumps(child(args)))
        return 0
    argv = ["--env", args.env, "--max-steps", str(args.max_steps), "--sizes", *map(str, args.sizes),
            "--reps", str(args.reps)]
    children = []
    for r in range(args.rounds):
        for w in args.workers:
            c = run_child(argv, w, args.timeout)
            print(f"round {r + 1}, {w} worker(s): " + (c["error"] if "error" in c else
                  ", ".join(f"{n} eps local {statistics.median(c['sizes'][str(n)]['local_s']):.2f} s / ray "
                            f"{statistics.median(c['sizes'][str(n)]['ray_s']):.2f} s" for n in args.sizes)),
                  file=sys.stderr, flush=True)
            children.append(c)
    s = summary(children, args.sizes)
    cut = args.max_steps and args.env != "toy_reach"
    print(f"env {args.env}" + (f", episodes cut at {args.max_steps} steps" if cut else "")
          + f", {os.cpu_count()} CPUs; medians of paired repetitions")
    for key, row in s.items():
        if not key.startswith("workers="):
            continue
        print(f"{key}: ray.init {row['ray_init_s']:.1f} s, pool start + warm-up {row['pool_warm_s']:.1f} s")
        for n in args.sizes:
            x = row[str(n)]
            print(f"  {n:>4} episodes: local {1000 * x['local_s_per_episode']:.1f} ms/episode, ray "
                  f"{1000 * x['ray_s_per_episode']:.1f} ms/episode, ray/local {x['ray_over_local']:.2f} "
                  f"({x['reps']} pairs; same returns: {x['same_returns']})")
    for n, v in s.get("speedup_2_over_1_workers", {}).items():
        print(f"scaling: {n} episodes, 1 worker / 2 workers = {v:.2f}x")
    for e in s["errors"]:
        print(f"FAILED child ({e['workers']} workers): {e['error']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"children": children, "summary": s}, indent=1))
    return 1 if s["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())

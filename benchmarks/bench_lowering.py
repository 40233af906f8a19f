"""The compiled policy against the same structure written by hand in JAX.

    .venv/bin/python benchmarks/bench_lowering.py [--reps 9] [--batches 1,64,4096,65536] [--json out.json]
                                                  [--no-pin]

Both are `jit(vmap(apply))` over a batch of Car Racing observations
(examples/car_racing/initial.pol; the hand-written form is car_racing_jax.py).
First both are checked to give the same actions and latents (allclose), then
timed interleaved; the table gives the ratio compiled / hand (target <= 1.05),
the median over repetitions of the ratio of the two times taken back to back in
that repetition. A third candidate, the compiled policy with one constraint
transform per weight (`lower(tp, grouped=False)`), gives the gain of grouping
them (`polc.backend.lower.TransformGroup`). XLA runs single-threaded (XLA_FLAGS set below, before jax is
imported) and the process is pinned to one core, the same setting as the
PyTorch comparison (see common.pin_to_one_core for why).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import common

PINNED = None if "--no-pin" in sys.argv else common.pin_to_one_core()  # before jax starts its threads
common.single_threaded_jax_env()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import car_racing_jax as hand  # noqa: E402

TARGET = 1.05


def load_policy(grouped: bool = True):
    """The compiled policy and its initial params. (Analysis is skipped: it
    changes nothing in the lowered function.) `grouped=False`: one constraint
    transform per weight (`polc.backend.lower.TransformGroup`)."""
    import polc
    from polc.backend.lower import lower

    policy = lower(polc.load(str(common.CAR_RACING), analyze=False).typed, grouped=grouped)
    return policy, policy.init(jax.random.PRNGKey(0))


def check_same(compiled, handwritten, params, obs, rtol=1e-5, atol=1e-6) -> float:
    """Raise unless both give the same actions and latents; return the max |difference|."""
    a, b = compiled(params, obs), handwritten(params, obs)
    for part, x, y in (("actions", a[0], b[0]), ("latents", a[1], b[1])):
        if sorted(x) != sorted(y):
            raise AssertionError(f"{part} differ in names: compiled {sorted(x)} vs hand {sorted(y)}")
    worst = 0.0
    for part, x, y in (("actions", a[0], b[0]), ("latents", a[1], b[1])):
        for name in x:
            u, v = np.asarray(x[name]), np.asarray(y[name])
            if u.shape != v.shape or not np.allclose(u, v, rtol=rtol, atol=atol):
                raise AssertionError(f"{part}[{name!r}] differs: max |diff| {np.max(np.abs(u - v))}")
            worst = max(worst, float(np.max(np.abs(u - v))) if u.size else 0.0)
    return worst


def hlo_ops(fn, *args) -> int:
    """Instructions in the optimised HLO module (a size measure of what XLA runs)."""
    text = fn.lower(*args).compile().as_text()
    return len(re.findall(r"^\s+(?:ROOT )?%?[\w.\-]+ = ", text, flags=re.M))


def synced(fn, params, obs):
    return lambda: jax.block_until_ready(fn(params, obs))


def run(batches, reps: int, target_s: float) -> list[dict]:
    policy, params = load_policy()
    compiled = jax.jit(jax.vmap(policy.apply, in_axes=(None, 0)))
    per_weight = jax.jit(jax.vmap(load_policy(grouped=False)[0].apply, in_axes=(None, 0)))
    handwritten = hand.batched(hand.apply)

    # Correctness first: at the initial weights and at random ones.
    rng = np.random.default_rng(1)
    random_params = {k: jnp.asarray(np.asarray(v) + rng.normal(0, 1, np.shape(v)), jnp.float32)
                     for k, v in params.items()}
    same_obs = jax.device_put(common.car_obs(4096, seed=2))
    for p in (params, random_params):
        worst = check_same(compiled, handwritten, p, same_obs)
        check_same(compiled, per_weight, p, same_obs)
    print(f"same outputs: actions and latents allclose (rtol 1e-5, atol 1e-6); last max |diff| {worst:.2g}")

    results = []
    load = common.LoadMeter()
    for b in batches:
        obs = jax.device_put(common.car_obs(b, seed=b))
        check_same(compiled, handwritten, params, obs)
        t = common.time_interleaved({"compiled": synced(compiled, params, obs),
                                     "hand": synced(handwritten, params, obs),
                                     "per_weight": synced(per_weight, params, obs)}, reps=reps, target_s=target_s)
        results.append({"batch": b, **t,
                        "ratio": common.paired_ratio(t["compiled"]["samples_s"], t["hand"]["samples_s"]),
                        "ratio_cpu": common.paired_ratio(t["compiled"]["cpu_samples_s"], t["hand"]["cpu_samples_s"]),
                        "grouped_cpu": common.paired_ratio(t["compiled"]["cpu_samples_s"],
                                                           t["per_weight"]["cpu_samples_s"]),
                        "hlo_ops": {"compiled": hlo_ops(compiled, params, obs),
                                    "hand": hlo_ops(handwritten, params, obs),
                                    "per_weight": hlo_ops(per_weight, params, obs)}})
        print(f"  batch {b}: done", file=sys.stderr)
    busy = load.busy_cores()
    if busy is not None:
        print(f"machine load while timing: {busy:.2f} of {os.cpu_count()} cores busy (this benchmark uses 1)")
    return results


def report(results: list[dict], reps: int) -> str:
    rows = []
    for r in results:
        c, h = r["compiled"], r["hand"]
        rows.append([r["batch"], common.fmt_time(c["median_s"]), common.spread(c["samples_s"]),
                     common.fmt_time(h["median_s"]), common.spread(h["samples_s"]), f"{r['ratio']:.3f}",
                     "yes" if r["ratio"] <= TARGET else "NO", f"{r['ratio_cpu']:.3f}", f"{c['cpu_per_wall']:.2f}/{h['cpu_per_wall']:.2f}",
                     f"{r['hlo_ops']['compiled']}/{r['hlo_ops']['hand']}", f"{r['grouped_cpu']:.3f}",
                     str(r["hlo_ops"]["per_weight"])])
    headers = ["batch", "compiled", "iqr", "hand", "iqr", "compiled/hand", f"<= {TARGET}", "same, CPU time",
               "cpu/wall c/h",
               "HLO ops c/h", "grouped/per-weight, CPU", "HLO ops per-weight"]
    pinned = "not pinned" if PINNED is None else f"pinned to core {PINNED}"
    return (f"median wall time per call of jit(vmap(apply)), {reps} interleaved repetitions; ratio = median over "
            f"repetitions of compiled/hand\n(wall time; 'same, CPU time' is that ratio in process CPU time, which "
            f"waiting for a busy core does not inflate); 'grouped/per-weight' is the compiled policy against itself "
            f"with one constraint transform per weight (lower(tp, grouped=False)), in CPU time;\nXLA_FLAGS={common.XLA_SINGLE_THREAD!r}; {pinned}; "
            f"jax {jax.__version__}\n" + common.table(headers, rows))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=15, help="interleaved repetitions (>= 7)")
    ap.add_argument("--batches", default=",".join(map(str, common.BATCHES)))
    ap.add_argument("--target-s", type=float, default=0.03, help="seconds per repetition per candidate")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the process to one core")
    args = ap.parse_args(argv)
    batches = [int(x) for x in args.batches.split(",")]
    print(common.header("bench_lowering: compiled policy vs hand-written JAX (examples/car_racing/initial.pol)"))
    results = run(batches, args.reps, args.target_s)
    print(report(results, args.reps))
    common.write_json(args.json, {"machine": common.machine(), "xla_flags": common.XLA_SINGLE_THREAD,
                                  "pinned_core": PINNED,
                                  "jax": jax.__version__, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())

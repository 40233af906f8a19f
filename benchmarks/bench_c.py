"""The C back end (`polc compile -o policy.c`) against the jitted JAX lowering.

    .venv/bin/python benchmarks/bench_c.py [--reps 9] [--batch 65536] [--json out.json] [--no-pin] [--no-torch]

On the Car Racing example (examples/car_racing/initial.pol), at its initial weights:

1. Same outputs first: the C batch entry point against jit(vmap(apply)) on 4096 rows
   (actions and latents within 64 ulps of max(|x|, 1), as tests/compiler/backend/test_emit_c.py).
2. Batch 1: the jitted JAX call (`policy.apply(params, obs)`, block_until_ready)
   against one C call of `car_racing_step`, timed in a C loop in another translation
   unit (no inlining across it; 1000 calls per Python call, over 64 different rows),
   and the same C call made from Python through ctypes. Ratio: JAX / C (target >= 100).
3. Batch 65536: `car_racing_step_batch` (with and without the latents) against
   jit(vmap(apply)) (XLA, single-threaded), and against the machine's copy bandwidth:
   a memmove of the same bytes (rows in + rows out) timed beside them. Reported: each
   candidate's bytes in + out per second as a share of the copy's (target >= 0.5 for C).
4. The object size of the generated code (cc -O2 and -Os, `size`: text + data).
5. Per function, how far C's libm is from XLA's CPU code: max ulps and the share of
   exactly equal results over 65536 inputs, through the whole pipeline (a one-op
   program per function, emitted, built and called like any policy).
6. Compiler flags: the same generated car_racing.c built with -O3, -O2 -march=native and
   -O3 -march=native beside polc's own -O2 (runtime/io/c_policy.py's CFLAGS), each batch loop
   at the large batch timed interleaved with the -O2 one: its speed relative to -O2 (same bits
   checked first).

All candidates are timed interleaved, pinned to one core (common.py). torch.compile (of
the paper's PyTorch form, benchmarks/car_racing_torch.py, at batch 1 and at the large
batch) runs in a worker process of its own (bench_torch.py's torch worker: one intra-op
and one inter-op thread, inference_mode), pinned to the same core: torch and JAX never
share a process, and the driver interleaves the worker's timings with its own repetition
by repetition, one candidate computing at a time. Without torch (or with --no-torch) that
row is left out with a message.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

import common

PINNED = None if "--no-pin" in sys.argv else common.pin_to_one_core()  # before jax starts its threads
common.single_threaded_jax_env()

import jax  # noqa: E402
import numpy as np  # noqa: E402

import bench_torch  # noqa: E402  (its torch worker; torch is imported only in that process)
import polc  # noqa: E402
from polc.backend.emit_c import emit_c, weight_values  # noqa: E402
from polc.backend.lower import lower  # noqa: E402
from polc.runtime.io.c_policy import CFLAGS, CPolicy, c_compiler, sizes  # noqa: E402

HARNESS = r'''#include <string.h>
#include "car_racing.h"

/* n calls of car_racing_step over `rows` observations in turn (float rows copied into structs
 * first); the actions are summed so that no call can be dropped. */
float bench_steps(long n, const float *obs_rows, int rows) {
    car_racing_obs obs[64];
    car_racing_action act;
    float sink = 0.0f;
    for (int r = 0; r < rows && r < 64; ++r) memcpy(&obs[r], obs_rows + r * CAR_RACING_OBS_SIZE, sizeof obs[r]);
    for (long k = 0; k < n; ++k) {
        car_racing_step(&obs[k % rows], &act, NULL);
        sink += act.steer + act.gas + act.brake;
    }
    return sink;
}
'''

FUNCS = '''policy funcs
obs u : real in [-10, 10]
obs p : real in [0.001, 100]
latent exp_ = exp(u)
latent log_ = log(p)
latent sqrt_ = sqrt(p)
latent tanh_ = tanh(u)
latent sigmoid_ = sigmoid(u)
latent softplus_ = softplus(u)
latent sin_ = sin(u)
latent cos_ = cos(u)
latent atan2_ = atan2(u, p - 50)
latent pow_ = p ^ 0.37
action a : real = u
'''
STEPS_PER_CALL = 1000


def build(workdir: str, tp, weights, harness: bool) -> ctypes.CDLL:
    src = emit_c(tp, weights, f"{tp.name}.h")
    files = []
    for name, text in ((f"{tp.name}.c", src.c), (f"{tp.name}.h", src.h)) + ((("harness.c", HARNESS),) if harness else ()):
        with open(os.path.join(workdir, name), "w") as f:
            f.write(text)
        if name.endswith(".c"):
            files.append(os.path.join(workdir, name))
    so = os.path.join(workdir, f"lib{tp.name}.so")
    subprocess.run([c_compiler(), *CFLAGS, "-shared", "-o", so, *files, "-lm"], check=True)
    return ctypes.CDLL(so)


def batch_fn(lib: ctypes.CDLL, tp) -> CPolicy:
    fn = getattr(lib, f"{tp.name}_step_batch")
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.POINTER(ctypes.c_float)] * 3
    return CPolicy(tp, lib, fn, *sizes(tp))


def rows_of(tp, obs: dict) -> np.ndarray:
    n = len(next(iter(obs.values())))
    return np.ascontiguousarray(np.concatenate([np.asarray(obs[o.name], np.float32).reshape(n, -1) for o in tp.obs], 1))


def jax_rows(tp, out: tuple) -> tuple[np.ndarray, np.ndarray]:
    acts, lats = out
    n = len(next(iter(acts.values())))
    flat = lambda d, g: np.concatenate([np.asarray(d[x.name], np.float32).reshape(n, -1) for x in g], 1)  # noqa: E731
    return flat(acts, tp.actions), flat(lats, tp.latents)


def ulps(c: np.ndarray, j: np.ndarray, of_scale: bool) -> np.ndarray:
    scale = np.maximum(np.abs(j), 1) if of_scale else np.abs(j)
    d = np.abs(c.astype(np.float64) - j) / np.spacing(scale.astype(np.float32)).astype(np.float64)
    return np.where((c == j) | (np.isnan(c) & np.isnan(j)), 0.0, d)


def check_same(cp: CPolicy, tp, batched, params, obs) -> float:
    c_act, c_lat = cp.step_batch(rows_of(tp, obs))
    j_act, j_lat = jax_rows(tp, batched(params, obs))
    worst = max(ulps(c_act, j_act, True).max(), ulps(c_lat, j_lat, True).max())
    if worst > 64:
        raise AssertionError(f"C and JAX differ by {worst:.1f} ulps of max(|x|, 1)")
    return float(worst)


def check_torch(cp: CPolicy, tp, torch_worker) -> None:
    """torch.compile's actions and latents against the C batch entry point's on the same rows."""
    n, seed = bench_torch.CHECK_BATCH, bench_torch.CHECK_SEED
    got = torch_worker.call(op="outputs", batch=n, seed=seed)["outputs"]
    if "torch_compile" not in got:
        return  # time_with_torch reports the failure
    c_act, c_lat = cp.step_batch(rows_of(tp, common.car_obs(n, seed)))
    t = got["torch_compile"]
    t_act = np.concatenate([np.asarray(t["actions"][a.name], np.float32).reshape(n, -1) for a in tp.actions], 1)
    t_lat = np.concatenate([np.asarray(t["latents"][v.name], np.float32).reshape(n, -1) for v in tp.latents], 1)
    if not (np.allclose(c_act, t_act, rtol=1e-5, atol=1e-5) and np.allclose(c_lat, t_lat, rtol=1e-5, atol=1e-5)):
        raise AssertionError("torch.compile and C differ beyond rtol 1e-5, atol 1e-5: not the same function")
    print(f"same outputs: torch.compile and C agree on {n} rows (actions and latents, rtol 1e-5, atol 1e-5)")


def object_size(workdir: str, tp, flags: list[str]) -> dict:
    obj = os.path.join(workdir, f"{tp.name}{flags[0]}.o")
    subprocess.run([c_compiler(), "-std=c99", *flags, "-c", "-o", obj, os.path.join(workdir, f"{tp.name}.c")],
                   check=True)
    out = subprocess.run(["size", obj], capture_output=True, text=True, check=True).stdout.split("\n")[1].split()
    return {"text": int(out[0]), "data": int(out[1]), "bss": int(out[2]), "file": os.path.getsize(obj)}


FLAG_VARIANTS = {"-O3": ["-O3"], "-O2 -march=native": ["-O2", "-march=native"],
                 "-O3 -march=native": ["-O3", "-march=native"]}


def flag_variants(workdir: str, tp, rows: np.ndarray, reps: int, target_s: float) -> dict:
    """The batch loop (actions + latents) of the same generated file built with each of
    FLAG_VARIANTS beside polc's -O2: median over repetitions of t(-O2) / t(variant), interleaved."""
    c_file = os.path.join(workdir, f"{tp.name}.c")
    base = [f for f in CFLAGS if f != "-O2"]
    fns, outs = {}, {}
    for label, flags in {"-O2": ["-O2"], **FLAG_VARIANTS}.items():
        so = os.path.join(workdir, f"lib{tp.name}_{len(fns)}.so")
        subprocess.run([c_compiler(), *base, *flags, "-shared", "-o", so, c_file, "-lm"], check=True)
        cp = batch_fn(ctypes.CDLL(so), tp)
        outs[label] = cp.step_batch(rows)
        fns[label] = (lambda cp=cp: cp.step_batch(rows, latents=True))
    for label, (a, lat) in outs.items():
        if a.tobytes() != outs["-O2"][0].tobytes() or lat.tobytes() != outs["-O2"][1].tobytes():
            raise AssertionError(f"the batch loop built with {label} computes other bits than with -O2")
    t = common.time_interleaved(fns, reps=reps, target_s=target_s)
    return {label: {"median_s": t[label]["median_s"],
                    "speed_vs_O2": common.paired_ratio(t["-O2"]["samples_s"], t[label]["samples_s"]),
                    "speed_vs_O2_cpu": common.paired_ratio(t["-O2"]["cpu_samples_s"], t[label]["cpu_samples_s"])}
            for label in fns}


def function_ulps(workdir: str) -> dict:
    tp = polc.loads(FUNCS, "funcs.pol", analyze=False).typed
    policy = lower(tp)
    lib = build(workdir, tp, weight_values(tp, {}, "none", policy), harness=False)
    cp = batch_fn(lib, tp)
    rng = np.random.default_rng(0)
    n = 65536
    obs = {"u": rng.uniform(-10, 10, n).astype(np.float32), "p": rng.uniform(0.001, 100, n).astype(np.float32)}
    _, c_lat = cp.step_batch(rows_of(tp, obs))
    _, j_lat = jax_rows(tp, jax.jit(jax.vmap(policy.apply, in_axes=(None, 0)))({}, obs))
    out = {}
    for i, lat in enumerate(tp.latents):
        u = ulps(c_lat[:, i], j_lat[:, i], of_scale=False)
        out[lat.name.rstrip("_")] = {"max_ulps": float(u.max()), "equal": float((u == 0).mean())}
    return out


def time_with_torch(fns: dict, torch_worker, batch: int, reps: int, target_s: float) -> dict:
    """`common.time_interleaved` of `fns` (in this process) and, when `torch_worker` is not None,
    of torch.compile at `batch` in that worker: one inner count for all, the candidates' order
    rotated every repetition; the worker times its own calls (`bench_torch.worker`)."""
    if torch_worker is None:
        return common.time_interleaved(fns, reps=reps, target_s=target_s)
    r = torch_worker.call(op="prepare", batch=batch)  # compiles, then warms up
    if "compile" not in r["candidates"]:
        print(f"torch.compile FAILED at batch {batch}: {r['errors'].get('compile')}", file=sys.stderr)
        return common.time_interleaved(fns, reps=reps, target_s=target_s)
    for fn in fns.values():
        for _ in range(3):
            fn()
    inner = min([common.calibrate(fn, target_s) for fn in fns.values()]
                + [torch_worker.call(op="calibrate", cand="compile", target_s=target_s)["inner"]])
    names = [*fns, "torch_compile"]
    wall: dict = {n: [] for n in names}
    cpu: dict = {n: [] for n in names}
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            if name == "torch_compile":
                t = torch_worker.call(op="time", cand="compile", inner=inner)
                wall[name].append(t["s"] / inner)
                cpu[name].append(t["cpu"] / inner)
                continue
            fn = fns[name]
            c0, t0 = common.cpu_seconds(), time.perf_counter()
            for _ in range(inner):
                fn()
            wall[name].append((time.perf_counter() - t0) / inner)
            cpu[name].append((common.cpu_seconds() - c0) / inner)
    out = {n: {"median_s": statistics.median(wall[n]), "samples_s": wall[n], "cpu_samples_s": cpu[n],
               "inner": inner, "cpu_per_wall": sum(cpu[n]) / sum(wall[n])} for n in names}
    out["torch_compile"]["first_call_s"] = r["first_call_s"].get("compile")
    return out


def run(reps: int, batch: int, target_s: float, torch_worker=None) -> dict:
    tp = polc.load(str(common.CAR_RACING), analyze=False).typed
    policy = lower(tp)
    params = policy.init(jax.random.PRNGKey(0))
    work = tempfile.mkdtemp(prefix="bench_c_")
    lib = build(work, tp, weight_values(tp, params, "init", policy), harness=True)
    cp = batch_fn(lib, tp)
    batched = jax.jit(jax.vmap(policy.apply, in_axes=(None, 0)))
    worst = check_same(cp, tp, batched, params, common.car_obs(4096, seed=2))
    print(f"same outputs: C and JAX within {worst:.1f} ulps of max(|x|, 1) on 4096 rows (actions and latents)")
    if torch_worker is not None:
        check_torch(cp, tp, torch_worker)

    # ---- batch 1
    obs1 = {k: v[0] for k, v in common.car_obs(1, seed=1).items()}
    rows64 = rows_of(tp, common.car_obs(64, seed=3))
    steps = lib.bench_steps
    steps.restype = ctypes.c_float
    steps.argtypes = [ctypes.c_long, ctypes.POINTER(ctypes.c_float), ctypes.c_int]
    ptr64 = rows64.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    one_row = rows64[:1].copy()
    load = common.LoadMeter()
    t1 = time_with_torch({
        "jax": lambda: jax.block_until_ready(policy.apply(params, obs1)),
        "c_loop": lambda: steps(STEPS_PER_CALL, ptr64, 64),
        "c_ctypes": lambda: cp.step_batch(one_row, latents=False),
    }, torch_worker, 1, reps, target_s)
    c_call = [s / STEPS_PER_CALL for s in t1["c_loop"]["samples_s"]]
    latency = {"jax_s": t1["jax"]["median_s"], "c_s": float(np.median(c_call)),
               "c_ctypes_s": t1["c_ctypes"]["median_s"],
               "jax_over_c": common.paired_ratio(t1["jax"]["samples_s"], c_call),
               "jax_over_c_ctypes": common.paired_ratio(t1["jax"]["samples_s"], t1["c_ctypes"]["samples_s"])}
    if "torch_compile" in t1:
        latency["torch_compile_s"] = t1["torch_compile"]["median_s"]
        latency["torch_compile_over_c"] = common.paired_ratio(t1["torch_compile"]["samples_s"], c_call)

    # ---- the batch loop against the copy bandwidth
    obs = common.car_obs(batch, seed=batch)
    rows = rows_of(tp, obs)
    obs_dev = jax.device_put(obs)
    n_obs, n_act, n_lat = sizes(tp)
    bytes_c = batch * 4 * (n_obs + n_act + n_lat)
    bytes_c_act = batch * 4 * (n_obs + n_act)
    src = np.zeros(bytes_c, np.uint8)
    dst = np.zeros(bytes_c, np.uint8)
    tb = time_with_torch({
        "copy": lambda: ctypes.memmove(dst.ctypes.data, src.ctypes.data, bytes_c),
        "c": lambda: cp.step_batch(rows, latents=True),
        "c_actions": lambda: cp.step_batch(rows, latents=False),
        "xla": lambda: jax.block_until_ready(batched(params, obs_dev)),
    }, torch_worker, batch, reps, target_s)
    copy = tb["copy"]["samples_s"]
    cpu = {k: v["cpu_samples_s"] for k, v in tb.items()}
    bandwidth = {
        "batch": batch, "bytes_in_out": bytes_c, "copy_s": tb["copy"]["median_s"],
        "copy_gb_s": bytes_c / tb["copy"]["median_s"] / 1e9,
        **{f"{k}_s": tb[k]["median_s"] for k in ("c", "c_actions", "xla")},
        # share of the copy bandwidth: (bytes / t) / (bytes_c / t_copy), paired per repetition
        "c_share": common.paired_ratio(copy, tb["c"]["samples_s"]),
        "c_actions_share": common.paired_ratio([t * bytes_c_act / bytes_c for t in copy], tb["c_actions"]["samples_s"]),
        "xla_share": common.paired_ratio(copy, tb["xla"]["samples_s"]),
        "xla_over_c": common.paired_ratio(tb["xla"]["samples_s"], tb["c"]["samples_s"]),
        # the same in process CPU time, which waiting for a busy core does not inflate
        "c_share_cpu": common.paired_ratio(cpu["copy"], cpu["c"]),
        "c_actions_share_cpu": common.paired_ratio([t * bytes_c_act / bytes_c for t in cpu["copy"]], cpu["c_actions"]),
        "xla_share_cpu": common.paired_ratio(cpu["copy"], cpu["xla"]),
    }
    if "torch_compile" in tb:  # the same bytes in (the observations) and out (actions and latents)
        bandwidth["torch_compile_s"] = tb["torch_compile"]["median_s"]
        bandwidth["torch_compile_share"] = common.paired_ratio(copy, tb["torch_compile"]["samples_s"])
        bandwidth["torch_compile_over_c"] = common.paired_ratio(tb["torch_compile"]["samples_s"], tb["c"]["samples_s"])
        bandwidth["torch_compile_share_cpu"] = common.paired_ratio(cpu["copy"], cpu["torch_compile"])
    busy = load.busy_cores()
    flags = flag_variants(work, tp, rows, reps, target_s)
    return {"latency": latency, "bandwidth": bandwidth, "busy_cores": busy, "flags": flags,
            "object": {"O2": object_size(work, tp, ["-O2"]), "Os": object_size(work, tp, ["-Os"])},
            "functions": function_ulps(work), "timings": {"batch1": t1, "batch": tb}}


def report(r: dict) -> str:
    lat, bw = r["latency"], r["bandwidth"]
    f = common.fmt_time
    torch1 = [["torch.compile (batch of 1)", f(lat["torch_compile_s"]), "-",
               f"C is {lat['torch_compile_over_c']:.0f}x faster"]] if "torch_compile_s" in lat else []
    torchb = [["torch.compile", f(bw["torch_compile_s"]),
               f"{bw['torch_compile_share']:.2f} ({bw['torch_compile_share_cpu']:.2f})",
               f"C is {bw['torch_compile_over_c']:.1f}x faster"]] if "torch_compile_s" in bw else []
    out = ["", "Batch 1 (per call):", common.table(
        ["candidate", "time", "JAX / this", "vs C"],
        [["jax: jitted apply", f(lat["jax_s"]), "1", ""],
         ["C: car_racing_step (C loop)", f(lat["c_s"]), f"{lat['jax_over_c']:.0f} (target >= 100)", ""],
         ["C: through ctypes", f(lat["c_ctypes_s"]), f"{lat['jax_over_c_ctypes']:.1f}", ""], *torch1]),
        "", f"Batch {bw['batch']} ({bw['bytes_in_out'] / 1e6:.1f} MB in + out with latents; "
            f"copy bandwidth {bw['copy_gb_s']:.2f} GB/s):",
        "share of copy bandwidth: the median over repetitions of copy time / candidate time, the same bytes "
        "(in brackets: in process CPU time)",
        common.table(["candidate", "time", "share of copy bandwidth", "vs C"],
                     [["memmove of the same bytes", f(bw["copy_s"]), "1", ""],
                      ["C step_batch (actions + latents)", f(bw["c_s"]),
                       f"{bw['c_share']:.2f} ({bw['c_share_cpu']:.2f}) (target >= 0.5)", ""],
                      ["C step_batch (actions only)", f(bw["c_actions_s"]),
                       f"{bw['c_actions_share']:.2f} ({bw['c_actions_share_cpu']:.2f})", ""],
                      ["XLA jit(vmap(apply))", f(bw["xla_s"]), f"{bw['xla_share']:.2f} ({bw['xla_share_cpu']:.2f})",
                       f"C is {bw['xla_over_c']:.1f}x faster"], *torchb]),
        "", "Object size of the generated car_racing.c (bytes):",
        common.table(["flags", "text", "data", ".o file"],
                     [[k, v["text"], v["data"], v["file"]] for k, v in r["object"].items()]),
        "", f"The batch loop at {bw['batch']} rows built with other flags (polc builds with -O2; the same bits):",
        common.table(["flags", "time", "speed vs -O2 (CPU time)"],
                     [[k, f(v["median_s"]), f"{v['speed_vs_O2']:.2f} ({v['speed_vs_O2_cpu']:.2f})"]
                      for k, v in r["flags"].items()]),
        "", "C's libm against XLA's CPU code, per function (65536 inputs; ulps of the result):",
        common.table(["function", "max ulps", "exactly equal"],
                     [[k, f"{v['max_ulps']:.0f}", f"{100 * v['equal']:.1f}%"] for k, v in r["functions"].items()])]
    if r["busy_cores"] is not None:
        out.append(f"\nmachine load while timing: {r['busy_cores']:.2f} of {os.cpu_count()} cores busy (this uses 1)")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--target-s", type=float, default=0.03)
    ap.add_argument("--json")
    ap.add_argument("--no-pin", action="store_true")
    ap.add_argument("--no-torch", action="store_true", help="leave torch.compile out")
    args = ap.parse_args()
    if c_compiler() is None:
        print("bench_c: no C compiler (cc, gcc or clang) found", file=sys.stderr)
        return 2
    print(common.header("C back end vs JAX (examples/car_racing/initial.pol)")
          + (f"\npinned to core {PINNED}" if PINNED is not None else ""))
    torch_worker = None
    if args.no_torch:
        pass
    elif importlib.util.find_spec("torch") is None:
        print("torch is not installed: torch.compile left out (install it with `pip install -e .[bench]`)")
    else:
        torch_worker = bench_torch.start_worker("torch", PINNED)
    try:
        r = run(max(args.reps, 7), args.batch, args.target_s, torch_worker)
        if torch_worker is not None:
            r["torch_versions"] = torch_worker.call(op="info")["versions"]
    finally:
        if torch_worker is not None:
            torch_worker.close()
    print(report(r))
    if "torch_versions" in r:
        print(f"torch {r['torch_versions']['torch']}: its own process on the same core, 1 intra-op and 1 inter-op "
              "thread, inference_mode")
    common.write_json(args.json, r)
    return 0


if __name__ == "__main__":
    sys.exit(main())

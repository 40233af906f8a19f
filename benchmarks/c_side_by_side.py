"""Two generated files of the Car Racing policy side by side: their batch loops in one process.

    .venv/bin/python benchmarks/c_side_by_side.py OLD.c NEW.c [--batch 65536] [--reps 21]

Each file (`polc compile examples/car_racing/initial.pol -o X.c`, from two trees or two
commits; each needs its car_racing.h beside it) is built with polc's own flags
(runtime/io/c_policy.py's CFLAGS) into a library of its own; both are called through ctypes
on the same rows (bench_c's observations, common.car_obs) into preallocated outputs, with the
same weights (NEW's baked-in `car_racing_default_weights`, passed to both), after a check that
they compute the same bits. Timed interleaved with a memmove of the same bytes,
pinned to one core, the order rotated every repetition; reported in process CPU time: each
loop's share of the copy bandwidth and NEW's speed over OLD's (medians of paired ratios).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import common

PINNED = common.pin_to_one_core()

import numpy as np  # noqa: E402

import polc  # noqa: E402
from polc.runtime.io.c_policy import CFLAGS, c_compiler  # noqa: E402


def load(c_file: str, work: str, tag: str):
    """The library built from `c_file`: its batch function, and the address of its baked-in weights."""
    so = os.path.join(work, f"lib{tag}.so")
    subprocess.run([c_compiler(), *CFLAGS, "-shared", "-o", so, c_file, "-lm"], check=True)
    lib = ctypes.CDLL(so)
    fn = lib.car_racing_step_batch
    p = ctypes.POINTER(ctypes.c_float)
    fn.restype, fn.argtypes = None, [ctypes.c_void_p, ctypes.c_size_t, p, p, p]
    return fn, ctypes.addressof(ctypes.c_float.in_dll(lib, "car_racing_default_weights"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--reps", type=int, default=21)
    args = ap.parse_args()
    tp = polc.load(str(common.CAR_RACING), analyze=False).typed
    n = args.batch
    obs = common.car_obs(n, seed=n)
    rows = np.ascontiguousarray(np.concatenate([np.asarray(obs[o.name], np.float32).reshape(n, -1) for o in tp.obs], 1))
    work = tempfile.mkdtemp(prefix="c_side_by_side_")
    p = ctypes.POINTER(ctypes.c_float)
    libs = {tag: load(path, work, tag) for tag, path in (("old", args.old), ("new", args.new))}
    weights = libs["new"][1]
    fns, outs = {}, {}
    for tag, (fn, _) in libs.items():
        act, lat = np.empty((n, 3), np.float32), np.empty((n, 9), np.float32)
        outs[tag] = (act, lat)
        fns[tag] = (lambda fn=fn, a=act, la=lat: fn(weights, n, rows.ctypes.data_as(p), a.ctypes.data_as(p),
                                                      la.ctypes.data_as(p)))
        fns[tag]()
    if any(outs["old"][i].tobytes() != outs["new"][i].tobytes() for i in (0, 1)):
        print("OLD and NEW compute different bits on these rows", file=sys.stderr)
        return 1
    nbytes = rows.nbytes + sum(x.nbytes for x in outs["old"])
    src, dst = np.ones(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
    fns = {"copy": lambda: ctypes.memmove(dst.ctypes.data, src.ctypes.data, nbytes), **fns}
    inner = min(common.calibrate(f, 0.03) for f in fns.values())
    cpu = {k: [] for k in fns}
    names = list(fns)
    load_meter = common.LoadMeter()
    for r in range(args.reps):
        for k in names[r % len(names):] + names[:r % len(names)]:
            c0 = time.process_time()
            for _ in range(inner):
                fns[k]()
            cpu[k].append((time.process_time() - c0) / inner)
    copy = cpu["copy"]
    print(f"batch {n}: memmove of {nbytes / 1e6:.1f} MB {statistics.median(copy) * 1e3:.3f} ms CPU "
          f"({nbytes / statistics.median(copy) / 1e9:.2f} GB/s); same bits; pinned to core {PINNED}")
    for k in ("old", "new"):
        print(f"  {k}: {statistics.median(cpu[k]) * 1e3:.3f} ms CPU, {statistics.median(cpu[k]) / n * 1e9:.1f} ns per row, "
              f"share of the copy bandwidth {common.paired_ratio(copy, cpu[k]):.2f}")
    print(f"  new is {common.paired_ratio(cpu['old'], cpu['new']):.2f}x as fast as old (median of paired ratios)")
    busy = load_meter.busy_cores()
    if busy is not None:
        print(f"machine load while timing: {busy:.2f} of {os.cpu_count()} cores busy (this uses 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run every benchmark (each `bench_*.py` here), one after the other, each in its own process.

    .venv/bin/python benchmarks/run_all.py [--out DIR] [--quick] [--only NAME ...]

--out DIR   also write each benchmark's raw results as DIR/<name>.json
--quick     the minimum repetitions (7 interleaved repetitions; `polc check` 3 times,
            on a 1000-line generated program)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The compiler's three first, then any other bench_*.py in this folder (runtime benchmarks).
FIRST = ("bench_lowering", "bench_torch", "bench_check")
QUICK = {"bench_lowering": ["--reps", "7"], "bench_torch": ["--reps", "7"],
         "bench_check": ["--runs", "3", "--lines", "1000"], "bench_mjx": ["--reps", "3"]}


def benchmarks() -> list[str]:
    found = sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("bench_") and f.endswith(".py"))
    return [b for b in FIRST if b in found] + [b for b in found if b not in FIRST]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="directory for the raw JSON results")
    ap.add_argument("--quick", action="store_true", help="minimum repetitions")
    ap.add_argument("--only", choices=benchmarks(), action="append", help="run only this one (repeatable)")
    args = ap.parse_args(argv)
    failed = []
    for name in args.only or benchmarks():
        cmd = [sys.executable, os.path.join(HERE, name + ".py")]
        if args.quick:
            cmd += QUICK.get(name, [])
        if args.out:
            cmd += ["--json", os.path.join(args.out, name + ".json")]
        print(f"$ {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        print(f"({name}: exit {rc}, {time.perf_counter() - t0:.0f} s)\n", flush=True)
        if rc != 0:
            failed.append(name)
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Imitation-learning wall time on the shipped Car Racing demonstration.

    .venv/bin/python benchmarks/bench_fit.py [--runs 1] [--demos examples/car_racing/demo.parquet] [--json FILE]

For examples/car_racing/initial.pol and mlp.pol: the whole `polc fit` process
(start to exit: imports, compile, every restart, writing the params file) with
the command's defaults, which is what a user waits for (target < 60 s on 2
cores), and from the params file it wrote: epochs, restarts, validation loss.
Regenerate the demonstration with
`polc demos car_racing --episodes 1 --seed 0 -o examples/car_racing/demo.parquet`.
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import common

POLICIES = ("initial.pol", "mlp.pol")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1, help="fits per policy (median)")
    ap.add_argument("--demos", default=str(common.ROOT / "examples" / "car_racing" / "demo.parquet"))
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args(argv)
    polc_bin = os.path.join(os.path.dirname(sys.executable), "polc")
    print(common.header("bench_fit: `polc fit` on the shipped Car Racing demonstration"))
    load = common.LoadMeter()
    rows, raw = [], {"machine": common.machine(), "demos": args.demos}
    with tempfile.TemporaryDirectory() as tmp:
        for name in POLICIES:
            out = os.path.join(tmp, name + ".params")
            argv_ = [polc_bin, "fit", str(common.ROOT / "examples" / "car_racing" / name), "--demos", args.demos,
                     "-o", out, "-q"]
            timing = common.time_process(argv_, args.runs)
            with open(out, encoding="utf-8") as f:
                fit = json.load(f)["fit"]
            raw[name] = {"wall_s": timing["samples_s"], "fit": fit}
            epochs = sum(r["epochs"] for r in fit["restarts"])
            rows.append([name, f"{statistics.median(timing['samples_s']):.1f} s", f"{fit['seconds']:.1f} s",
                         f"{len(fit['restarts'])} ({epochs} epochs)", f"{fit['rows_train']} / {fit['rows_val']}",
                         f"{fit['val_loss']:.4g}", f"{fit['restart']} (epoch {fit['epoch']})"])
    print(f"\ndemonstration: {args.demos}\n")
    print(common.table(["policy", "polc fit (process)", "fit()", "restarts", "rows train / val",
                        "best val loss", "best restart"], rows))
    print("\ntarget: under 60 s on 2 cores")
    busy = load.busy_cores()
    if busy is not None:
        print(f"machine load during the run: {busy:.1f} of {os.cpu_count()} cores busy (this process included)")
    common.write_json(args.json, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())

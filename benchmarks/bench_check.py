"""Whole-process time of `polc check`, the command an LLM (or a person) runs
after every edit of a .pol file.

    .venv/bin/python benchmarks/bench_check.py [--runs 7] [--lines 3000] [--json out.json]

Each row is a fresh `python ...` process, start to exit, median of `--runs`:
`python -c pass` (the interpreter's own start-up, the floor), `polc check` on
examples/car_racing/initial.pol and on a generated valid program of about
`--lines` lines (gen_program.py: obs, weights of every constraint kind, chains
and fan-ins of latents, actions with noise, intents), and `python -c "import
jax"` for scale: `polc check` never imports jax, and the table shows what that
saves. Runs are interleaved (one of each command per round). The CPU column is the
child's user + system time, which a busy machine inflates less than wall time; the
ratio column is each round's time over that round's `python -c pass`, median over the
rounds (issue 18's target: at most 4 for the Car Racing example).

The children compile to bytecode once, into a temporary PYTHONPYCACHEPREFIX (a warm-up
round, not timed), as an installed polc does: a shell with PYTHONDONTWRITEBYTECODE set
would otherwise recompile every polc module on every run. Last, the generated program is
parsed and checked in this process (`polc.loads`, warm: issue 18's target is under 0.8 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
import gen_program


def run_once(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process, start to exit."""
    c0, t0 = common.children_cpu(), time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    dt, cpu = time.perf_counter() - t0, common.children_cpu() - c0
    if p.returncode != 0:
        raise SystemExit(f"`{' '.join(argv)}` exited {p.returncode}; a failing command is not benchmarked:\n"
                         f"{p.stderr[-3000:]}")
    return dt, cpu


def time_in_process(text: str, runs: int = 5) -> list[float]:
    """Wall seconds of `polc.loads` (parse, check, analysis) of `text` in this process, after one warm-up."""
    import polc

    polc.loads(text, "generated.pol")
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        polc.loads(text, "generated.pol")
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="processes per command")
    ap.add_argument("--lines", type=int, default=3000, help="size of the generated program")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args(argv)
    py = sys.executable
    print(common.header("bench_check: whole-process time of `polc check`"))

    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "generated.pol"
        text = gen_program.generate(args.lines)
        big.write_text(text, encoding="utf-8")
        n_lines = len(text.splitlines())
        commands = {
            "python -c pass": [py, "-c", "pass"],
            "polc check car_racing/initial.pol": [py, "-m", "polc.cli", "check", str(common.CAR_RACING)],
            f"polc check generated ({n_lines} lines)": [py, "-m", "polc.cli", "check", str(big)],
            'python -c "import jax"': [py, "-c", "import jax"],
        }
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        for argv in commands.values():  # warm-up: write the bytecode
            run_once(argv, env)
        # The generated program must check clean, or its time means nothing.
        p = subprocess.run(commands[f"polc check generated ({n_lines} lines)"], capture_output=True, text=True,
                           env=env)
        if p.returncode != 0:
            raise SystemExit(f"the generated program does not check (exit {p.returncode}):\n{p.stderr[-3000:]}")
        print(f"generated program: {p.stderr.strip().splitlines()[-1]}")

        samples: dict[str, list[float]] = {k: [] for k in commands}
        cpu: dict[str, list[float]] = {k: [] for k in commands}
        load = common.LoadMeter()
        for r in range(args.runs):
            for name in list(commands)[r % len(commands):] + list(commands)[:r % len(commands)]:
                wall, c = run_once(commands[name], env)
                samples[name].append(wall)
                cpu[name].append(c)
            print(f"  round {r + 1}/{args.runs}", file=sys.stderr)
        in_process = time_in_process(text)
        busy = load.busy_cores()

    base = statistics.median(samples["python -c pass"])
    ratios = {name: statistics.median(a / b for a, b in zip(s, samples["python -c pass"]))
              for name, s in samples.items()}
    rows = [[name, common.fmt_time(statistics.median(s)), common.spread(s),
             common.fmt_time(statistics.median(s) - base) if name != "python -c pass" else "-",
             f"{ratios[name]:.1f}x", common.fmt_time(statistics.median(cpu[name]))]
            for name, s in samples.items()]
    print(f"median of {args.runs} processes each (interleaved); python {sys.version.split()[0]}")
    if busy is not None:
        print(f"machine load while timing: {busy:.2f} of {os.cpu_count()} cores busy (this benchmark uses 1)")
    print(common.table(["command", "wall", "iqr", "minus python start-up", "/ python -c pass", "CPU (user + sys)"],
                       rows))
    print(f"in process, warm: polc.loads of the generated program {common.fmt_time(statistics.median(in_process))}"
          f" (median of {len(in_process)}, {common.spread(in_process)})")
    common.write_json(args.json, {"machine": common.machine(), "busy_cores": busy, "lines": n_lines,
                                  "samples_s": samples, "cpu_samples_s": cpu, "ratio_median": ratios,
                                  "in_process_loads_s": in_process,
                                  "median_s": {k: statistics.median(v) for k, v in samples.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())

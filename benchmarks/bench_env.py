"""Semantic Car Racing ("polc/CarRacing-v0") against the stock CarRacing-v3, side by side.

    .venv/bin/python benchmarks/bench_env.py [--reps 7] [--steps 1000] [--stock-steps 200] [--json FILE]

Both environments get the same seed and the same action sequence (random
actions with a bias to gas, so the car drives over tiles and grass). First the
per-step rewards and terminations are checked bit-identical over the stock
run's length; then each repetition times, interleaved and in rotating order,
`stock-steps` stock steps and `steps` semantic steps (resets excluded), and
the figure is the median steps/s and the median per-repetition ratio. Also
reported: the cost of computing one semantic observation, and of a reset.
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import gymnasium as gym
import numpy as np

from polc.runtime import envs
from polc.runtime.envs.car_racing import observe

SEED = 10_000


def actions(n: int) -> list[dict]:
    rng = np.random.default_rng(0)
    a = rng.uniform([-1, 0.2, 0], [1, 1, 0.2], size=(n, 3)).astype(np.float32)
    return [{"steer": x[0], "gas": x[1], "brake": x[2]} for x in a]


def raw(a: dict) -> np.ndarray:
    return np.array([a["steer"], a["gas"], a["brake"]], dtype=np.float64)


def run_semantic(env: gym.Env, acts: list[dict]) -> tuple[float, list]:
    env.reset(seed=SEED)
    out = []
    t0 = time.perf_counter()
    for a in acts:
        _, r, term, trunc, _ = env.step(a)
        out.append((r, term, trunc))
        if term or trunc:
            env.reset(seed=SEED)
    return time.perf_counter() - t0, out


def run_stock(env: gym.Env, acts: list[dict]) -> tuple[float, list]:
    env.reset(seed=SEED)
    raws = [raw(a) for a in acts]
    out = []
    t0 = time.perf_counter()
    for r_a in raws:
        _, r, term, trunc, _ = env.step(r_a)
        out.append((r, term, trunc))
        if term or trunc:
            env.reset(seed=SEED)
    return time.perf_counter() - t0, out


def per_call(fn, n: int, clock=time.perf_counter) -> float:
    t0 = clock()
    for _ in range(n):
        fn()
    return (clock() - t0) / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=7, help="interleaved repetitions (median over them)")
    ap.add_argument("--steps", type=int, default=1000, help="semantic steps per repetition")
    ap.add_argument("--stock-steps", type=int, default=200, help="stock steps per repetition")
    ap.add_argument("--json", help="write the raw samples here")
    args = ap.parse_args(argv)

    spec = envs.get("car_racing")
    ours, stock = spec.make(), gym.make("CarRacing-v3")
    acts = actions(max(args.steps, args.stock_steps))

    _, a = run_semantic(ours, acts[:args.stock_steps])
    _, b = run_stock(stock, acts[:args.stock_steps])
    if a != b:
        print("MISMATCH: per-step rewards/terminations differ from the stock env", file=sys.stderr)
        return 1
    print(f"same outputs: {len(a)} steps of rewards, terminated, truncated bit-identical (seed {SEED})")

    sem, stk, ratios = [], [], []
    for rep in range(args.reps):
        order = (0, 1) if rep % 2 == 0 else (1, 0)
        got = {}
        for which in order:
            if which == 0:
                t, _ = run_semantic(ours, acts[:args.steps])
                got[0] = args.steps / t
            else:
                t, _ = run_stock(stock, acts[:args.stock_steps])
                got[1] = args.stock_steps / t
        sem.append(got[0])
        stk.append(got[1])
        ratios.append(got[0] / got[1])

    u = ours.unwrapped
    ours.reset(seed=SEED)
    for a_ in acts[:100]:
        ours.step(a_)
    obs_us = statistics.median(per_call(lambda: observe(u, u.geometry), 2000) for _ in range(5)) * 1e6
    obs_cpu_us = statistics.median(per_call(lambda: observe(u, u.geometry), 2000, time.process_time)
                                   for _ in range(5)) * 1e6
    reset_ms = statistics.median(per_call(lambda: ours.reset(seed=SEED), 5) for _ in range(3)) * 1e3

    med = statistics.median
    print(f"\n{'environment':32s} {'steps/s (median)':>18s}")
    print(f"{'gymnasium CarRacing-v3 (stock)':32s} {med(stk):18,.0f}")
    print(f"{'polc/CarRacing-v0 (semantic)':32s} {med(sem):18,.0f}")
    print(f"\nratio semantic / stock: {med(ratios):.1f}x  (median of {args.reps} interleaved repetitions; "
          "target >= 30x)")
    print(f"semantic observation: {obs_us:.1f} us per step wall ({obs_cpu_us:.1f} us CPU); "
          f"reset (track generation): {reset_ms:.1f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"semantic_steps_per_s": sem, "stock_steps_per_s": stk, "ratio": ratios,
                       "observe_us": obs_us, "observe_cpu_us": obs_cpu_us, "reset_ms": reset_ms, "seed": SEED}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

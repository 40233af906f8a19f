"""The MJX door (door_mjx) against the same scene in C MuJoCo, side by side; and compile times.

    .venv/bin/python benchmarks/bench_mjx.py [--reps 5] [--batches 1,64,1024] [--steps 100] [--json FILE]
    .venv/bin/python benchmarks/bench_mjx.py --no-train     # skip brax's training-step compile timing

Steps/s. C MuJoCo (float64, one thread) steps `DoorMJXGym` (ctrl, 2 physics
steps, observation and reward: the whole env step) and, separately, bare
physics (2 `mj_step`s). MJX steps `DoorMJX` (float32) jitted as
`lax.scan` of `--steps` steps of `vmap(env.step)` at each batch size, so one
call is batch x steps env steps with no Python in between (as brax's training
loop runs it). MJX runs with XLA's default threads (both cores of this VM);
C MuJoCo is single-threaded, so a ratio per core would be about half the MJX
figure. Each repetition times every candidate once, in rotating order
(interleaved, so drift on a shared machine hits all alike); the figures are
medians over repetitions and each ratio the median of per-repetition ratios.

Compile times (wall, one measurement each): the jitted env step and reset, the
scan at each batch, and brax's PPO training epoch on door_mjx with the
compiled examples/door_mjx/initial.pol (8 envs): the time of the first epoch
minus that of the third (brax 0.14.2 under jax 0.9.2 compiles the pmapped
epoch a second time for the second call, whose inputs are the first call's
outputs; from the third on it runs compiled). Nothing here asserts a time.

On a GPU machine (jax with CUDA installed): the same command with
`JAX_PLATFORMS=cuda` and larger batches, e.g. `--batches 1,1024,8192,32768`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def c_candidates(n: int):
    """(name, fn running n env steps, steps per call) for C MuJoCo."""
    import mujoco

    from polc.runtime.envs.door_mjx_gym import DoorMJXGym

    env = DoorMJXGym()
    env.reset(seed=10_000)
    rng = np.random.default_rng(0)
    acts = [{"dx": a[0], "dy": a[1], "dz": a[2]} for a in rng.uniform(-1, 1, (n, 3))]

    def env_steps():
        env.reset(seed=10_000)
        for a in acts:
            env.step(a)

    m, d = env.model, env.data

    def physics():
        for i in range(n):
            d.ctrl[:] = 0.0
            mujoco.mj_step(m, d)
            mujoco.mj_step(m, d)

    return [("C MuJoCo env step", env_steps, n), ("C MuJoCo physics only", physics, n)]


def mjx_candidates(batches, steps: int, compile_times: dict):
    import jax
    import jax.numpy as jnp

    from polc.runtime.envs.door_mjx import DoorMJX

    env = DoorMJX()
    t = time.perf_counter()
    jax.jit(env.step).lower(env.reset(jax.random.PRNGKey(0)), jnp.zeros(3)).compile()
    compile_times["env step (jit, batch 1)"] = time.perf_counter() - t
    t = time.perf_counter()
    jax.jit(env.reset).lower(jax.random.PRNGKey(0)).compile()
    compile_times["env reset (jit)"] = time.perf_counter() - t
    out = []
    for b in batches:
        states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(1), b))
        actions = jax.random.uniform(jax.random.PRNGKey(2), (steps, b, 3), minval=-1, maxval=1)

        def roll(s, acts):
            return jax.lax.scan(lambda s, a: (jax.vmap(env.step)(s, a), None), s, acts)[0]

        t = time.perf_counter()
        fn = jax.jit(roll).lower(states, actions).compile()
        compile_times[f"scan of {steps} steps, batch {b}"] = time.perf_counter() - t
        fn(states, actions).obs.block_until_ready()  # warm-up

        def run(fn=fn, states=states, actions=actions):
            fn(states, actions).obs.block_until_ready()

        out.append((f"MJX batch {b}", run, b * steps))
    return out


def train_compile() -> dict:
    """Seconds to the first evaluation and of epochs 1..3 of a brax run on door_mjx."""
    import polc
    from polc.runtime.rl.brax import BraxConfig, train_brax

    policy = polc.load(os.path.join(ROOT, "examples", "door_mjx", "initial.pol")).compile()
    import jax

    params = policy.init(jax.random.PRNGKey(0))
    config = BraxConfig(num_envs=8, timesteps=3 * 320, evals=3, eval_envs=8)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        log = train_brax(policy, params, "door_mjx", config, d).log
        total = time.perf_counter() - t0
    el = [r["elapsed_s"] for r in log["log"]]
    epochs = [b - a for a, b in zip(el, el[1:])]
    return {"to first evaluation (reset + eval compile) s": el[0], "epoch 1 s": epochs[0],
            "epoch 2 s": epochs[1], "epoch 3 s": epochs[2],
            "training epoch compile (epoch 1 - epoch 3) s": epochs[0] - epochs[2], "whole run s": total,
            "steps per epoch": config.steps_per_training_step}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--batches", default="1,64,1024")
    ap.add_argument("--steps", type=int, default=100, help="env steps per timed call (scan length)")
    ap.add_argument("--c-steps", type=int, default=2000, help="C MuJoCo steps per timed call")
    ap.add_argument("--no-train", action="store_true", help="skip brax's training-step compile timing")
    ap.add_argument("--json", help="write the raw results here")
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    batches = [int(b) for b in args.batches.split(",")]
    compile_times: dict = {}
    cands = c_candidates(args.c_steps) + mjx_candidates(batches, args.steps, compile_times)
    samples = {name: [] for name, _, _ in cands}
    for rep in range(args.reps):
        order = cands[rep % len(cands):] + cands[:rep % len(cands)]
        for name, fn, n in order:
            t = time.perf_counter()
            fn()
            samples[name].append(n / (time.perf_counter() - t))
    base = "C MuJoCo env step"
    print(f"door_mjx steps/s on {jax.devices()[0].platform} ({os.cpu_count()} cores), median of {args.reps} "
          f"interleaved repetitions")
    print(f"{'candidate':32} {'steps/s':>12} {'vs C env step':>14}")
    for name, _, _ in cands:
        ratio = statistics.median(m / c for m, c in zip(samples[name], samples[base]))
        print(f"{name:32} {statistics.median(samples[name]):12,.0f} {ratio:13.3f}x")
    print("\ncompile (s, wall):")
    for k, v in compile_times.items():
        print(f"  {k:40} {v:7.1f}")
    train = {} if args.no_train else train_compile()
    for k, v in train.items():
        print(f"  brax PPO, {k:48} {v:8.1f}" if isinstance(v, float) else f"  brax PPO, {k:48} {v:8d}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps_per_s": samples, "compile_s": compile_times, "train": train,
                       "platform": jax.devices()[0].platform}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Rollouts of a compiled policy on Car Racing: traced vs untraced, one env vs
vectorised, and the Parquet settings of the trace, side by side.

    .venv/bin/python benchmarks/bench_rollout.py [--reps 5] [--episodes 4] [--params P] [--json FILE]

1. The policy call alone (no environment), per step, for 1 and 2 envs:
   untraced (the packed actions), traced (one packed row per env: obs, latents,
   weights, means, actions, appended per env as the rollout does), and the naive
   tracer (the call returns dicts and each value is fetched separately).
2. Whole rollouts (`polc.runtime.trace.rollout`) of `--episodes` episodes on the
   first evaluation seeds: untraced and traced, 1 env (SyncVectorEnv) and
   2 envs (AsyncVectorEnv, a process each), steps/s of warm runs (compile and
   env start-up timed apart), interleaved repetitions, medians; the traced/untraced ratio (target <= 1.10)
   is the median over repetitions of the ratio of the two rollouts timed in that repetition (not a
   ratio of medians), by wall time and, for 1 env (all in this process), by CPU time.
3. Writing a 100k-row trace (the traced episodes repeated): polc's settings
   (no dictionaries, BYTE_STREAM_SPLIT floats, snappy) against pyarrow's
   defaults: time and size.
The policy is examples/car_racing/initial.pol with its declared weights
(or `--params`). Nothing here asserts a time.

    .venv/bin/python benchmarks/bench_rollout.py --against 792c298 [--reps 3] [--episodes 10]

`--against COMMIT` times this working tree's rollouts against polc at git COMMIT (e.g.
792c298, before issue 18) as `polc eval` and `polc rollout` run them: `--episodes` episodes
on the first evaluation seeds, all in-process envs stepped together (`default_n_envs`),
untraced (eval) and traced (rollout). Each candidate is a worker process that stays alive
(`common.Worker`), all pinned to the idlest core, of which one computes at a time; each
holds one `Rollout` per kind and runs it when asked. Its first run of a kind (the step's
trace and XLA compile, making the envs, the episodes: what one rollout in a fresh process
pays beyond imports) is reported apart; then `--reps` repetitions, each running every
candidate once per kind in a rotating order (the episodes only: the per-step cost, as
`bench_rl.py`'s seconds per 100 resets are), so the machine's drift, which moved a whole
process's figure by half on this shared VM, hits all candidates alike within seconds.
Per candidate: process CPU seconds per 1000 env steps, the median of per-repetition ratios
to the old tree, and whether every episode's return (float64) and length are identical to
its. Two variants of this tree run beside it: as in bench_rl.py, the per-weight transforms
the old trees used (`lower(..., grouped=False)`; the grouped ones, a1b19a0, round some
weights differently in the last float32 bit, which a Car Racing episode amplifies, so the
identity with the old tree holds for this variant), and gymnasium's own car instead of
`envs.car_dynamics.ScalarCar` (the same simulation bit for bit, in numpy scalars), which
shows how much of the ratio is the car's dynamics and how much polc's own part of a step.

Then (unless `--no-commands`) the commands themselves, whole processes (`polc eval
initial.pol --env car_racing --episodes N` and `polc rollout ... --eval-seeds -o FILE`),
their process CPU (user + system) per run, after an untimed run of each (which writes the
trees' bytecode, as an installed polc has it, under a temporary PYTHONPYCACHEPREFIX): this
tree with its compile cache warm (in a temporary XDG_CACHE_HOME), this tree with the cache off
(`POLC_NO_COMPILE_CACHE=1`), and the old tree (which has no such cache); each prints the
same score line. `--new COMMIT` times polc at COMMIT as the new side instead of the
working tree (so the tree may change while it runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from functools import partial

import numpy as np

import common


def policy_call_candidates(policy, params, spec, batch: int):
    """name -> a callable doing one step's policy work for `batch` envs."""
    import jax

    from polc.runtime.trace.rollout import RolloutConfig, TraceLayout, make_step_fn

    layout = TraceLayout(policy.program, spec.schema)
    env = spec.make()
    obs, _ = env.reset(seed=10_000)
    flat = np.repeat(layout.pack_obs({k: np.asarray(v)[None] for k, v in obs.items()}, 1), batch, axis=0)
    seeds, steps = np.arange(batch, dtype=np.int32), np.zeros(batch, np.int32)
    untraced = partial(make_step_fn(policy, layout, RolloutConfig(trace=False)), params)
    traced = partial(make_step_fn(policy, layout, RolloutConfig(trace=True)), params)
    naive_fn = jax.jit(jax.vmap(lambda o: (policy.distribution(params, o), policy.constrain(params))))
    pobs = {o.name: np.repeat(np.asarray(obs[o.name])[None], batch, axis=0) for o in policy.program.obs}
    rows: list = [[] for _ in range(batch)]
    columns: dict = {}

    def run_untraced():
        layout.env_actions(np.asarray(untraced(flat, {}, seeds, steps)[0]), False)

    def run_traced():
        out = np.asarray(traced(flat, {}, seeds, steps)[0])  # {}: the policy state (none)
        layout.env_actions(out, True)
        for i in range(batch):
            rows[i].append(out[i])

    def run_naive():
        (mean, std, latents), weights = naive_fn(pobs)
        for group in (latents, weights, mean):
            for name, value in group.items():
                columns.setdefault(name, []).append(np.asarray(value))

    return {"untraced": run_untraced, "traced (packed)": run_traced, "traced (naive)": run_naive}


def rollout_candidates(policy, params, spec, episodes: int):
    """name -> a callable running `episodes` episodes; each keeps its compiled step
    and its vector env across calls (start-up is timed apart)."""
    from polc.runtime.trace.evaluate import eval_seeds
    from polc.runtime.trace.rollout import Rollout, RolloutConfig

    seeds = eval_seeds(spec, episodes)
    out, runners = {}, []
    for n in (1, 2):
        for trace in (False, True):
            runner = Rollout(policy, spec, RolloutConfig(n_envs=n, trace=trace, asynchronous=n > 1))
            runners.append(runner)
            out[f"{n} env{'s' if n > 1 else ''}, {'traced' if trace else 'untraced'}"] = (
                lambda runner=runner: runner.run(params, seeds, lambda ep: None))
    return out, runners


def time_rollouts(cands, reps: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """name -> steps/s per repetition (interleaved, rotating order), by wall time
    and by this process's CPU time (all its threads; not the worker processes):
    on a shared machine the CPU figure of the 1-env rollouts is the steadier one."""
    names = list(cands)
    for name in names:  # warm-up: compiles, imports in the workers' parent
        cands[name]()
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            c0, t0 = common.cpu_seconds(), time.perf_counter()
            steps = float(np.sum(cands[name]().lengths))
            wall[name].append(steps / (time.perf_counter() - t0))
            cpu[name].append(steps / (common.cpu_seconds() - c0))
    return wall, cpu


def startup_seconds(spec, n: int) -> float:
    """Wall time to make, reset and close the vector env a rollout of `n` envs uses."""
    from polc.runtime.trace.vector import make_vector_env

    t0 = time.perf_counter()
    envs = make_vector_env(spec, n, asynchronous=n > 1)
    envs.reset(seed=list(range(10_000, 10_000 + n)))
    envs.close()
    return time.perf_counter() - t0


def parquet_settings(policy, params, spec, rows: int, reps: int) -> dict:
    """Time and size of writing `rows` rows of a real trace: polc's writer vs pyarrow defaults."""
    import pyarrow.parquet as pq

    from polc.runtime.trace.evaluate import eval_seeds
    from polc.runtime.trace.rollout import RolloutConfig, TraceLayout, rollout
    from polc.runtime.io.table import TableWriter, episode_table, schema_of

    episodes = []
    rollout(policy, params, spec, eval_seeds(spec, 2), RolloutConfig(), episodes.append)
    columns = TraceLayout(policy.program, spec.schema).columns()
    schema = schema_of(columns, {})
    tables = [episode_table(columns, schema, e.columns) for e in episodes]
    n_rows = sum(t.num_rows for t in tables)
    repeat = max(1, -(-rows // n_rows))
    result: dict = {"rows": repeat * n_rows, "polc_s": [], "default_s": []}
    with tempfile.TemporaryDirectory() as tmp:
        ours, default = os.path.join(tmp, "polc.parquet"), os.path.join(tmp, "default.parquet")
        for r in range(reps):
            for which in (("polc", "default") if r % 2 == 0 else ("default", "polc")):
                t0 = time.perf_counter()
                if which == "polc":
                    with TableWriter(ours, columns, {}) as w:
                        for _ in range(repeat):
                            for e in episodes:
                                w.write_episode(e.columns)
                else:
                    with pq.ParquetWriter(default, schema) as w:
                        for _ in range(repeat):
                            for t in tables:
                                w.write_table(t, row_group_size=t.num_rows)
                result[f"{which}_s"].append(time.perf_counter() - t0)
        result["polc_mb"] = os.path.getsize(ours) / 1e6
        result["default_mb"] = os.path.getsize(default) / 1e6
    return result


def against_worker(args) -> int:
    """One candidate of `--against`, serving the driver: {"op": "run", "kind": "untraced" or
    "traced"} runs that kind's Rollout on the seeds and replies with its CPU time and episodes."""
    common.single_threaded_jax_env()
    import jax

    import polc
    from polc.runtime import envs
    from polc.runtime.trace.rollout import Rollout, RolloutConfig
    from polc.runtime.trace.vector import default_n_envs

    if args.per_weight:  # the weight transforms of the old trees, for the identity check
        from polc.backend.lower import lower

        policy = lower(polc.load(str(common.CAR_RACING)).typed, grouped=False)
    else:
        policy = polc.load(str(common.CAR_RACING)).compile()
    if args.stock_car:  # gymnasium's car, as the old trees stepped it (no ScalarCar swapped in at reset)
        from polc.runtime.envs import car_racing

        car_racing.ScalarCar = car_racing._cr.Car
    params = policy.init(jax.random.PRNGKey(0))
    spec = envs.get("car_racing")
    seeds = list(range(10_000, 10_000 + args.episodes))
    rollouts: dict = {}

    def handle(req: dict) -> dict:
        kind = req["kind"]
        if kind not in rollouts:  # `rollout()` is `Rollout(...).run` with one env per seed up to n_envs, as here
            rollouts[kind] = Rollout(policy, spec, RolloutConfig(n_envs=default_n_envs(len(seeds)),
                                                                 trace=kind == "traced"))
        t0 = common.cpu_seconds()
        result = rollouts[kind].run(params, seeds)
        cpu = common.cpu_seconds() - t0
        return {"cpu_per_1000_steps": 1000 * cpu / int(sum(result.lengths)),
                "returns": [repr(float(r)) for r in result.returns], "lengths": [int(n) for n in result.lengths]}

    try:
        return common.serve(handle)
    finally:
        for r in rollouts.values():
            r.close()


PER_WEIGHT = "new, per-weight transforms"
STOCK_CAR = "new, gymnasium's car"
NO_CACHE = "new, compile cache off"
KINDS = {"untraced": "eval", "traced": "rollout"}
# the worker's flags of each variant of the new tree
VARIANTS = {PER_WEIGHT: ["--per-weight"], STOCK_CAR: ["--stock-car"]}


def process_cpu(argv: list, env: dict, cwd: str) -> tuple[float, str]:
    """(user + system CPU seconds of the child process, the last line it printed)."""
    import subprocess

    before = common.children_cpu()  # one child runs at a time
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    cpu = common.children_cpu() - before
    said = (p.stdout.strip() or p.stderr.strip()).splitlines()  # polc rollout reports on stderr
    if p.returncode != 0 or not said:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return cpu, said[-1]


def time_commands(args, cands: dict, d: str, kinds=tuple(KINDS.values())) -> dict:
    """name -> kind -> {"cpu": [per repetition], "line": the score line} of `polc eval` / `polc rollout`."""
    cli = "import sys; from polc.cli import main; sys.exit(main())"
    cache = os.path.join(d, "xdg-cache")

    def argv(kind: str, core: int) -> list:
        tail = ["--eval-seeds", "-o", os.path.join(d, "trace.parquet")] if kind == "rollout" else []
        return ["taskset", "-c", str(core), sys.executable, "-c", cli, kind, str(common.CAR_RACING),
                "--env", "car_racing", "--episodes", str(args.episodes), "-q"] + tail

    def env(name: str) -> dict:
        e = common.child_env(cands[name])
        e.update(XDG_CACHE_HOME=cache, POLC_NO_COMPILE_CACHE="1" if name == NO_CACHE else "0")
        e.pop("JAX_COMPILATION_CACHE_DIR", None)
        # bytecode kept, as an installed polc's is (a temporary prefix keeps it out of the trees)
        e.pop("PYTHONDONTWRITEBYTECODE", None)
        e["PYTHONPYCACHEPREFIX"] = os.path.join(d, "pyc")
        if "xla_cpu_multi_thread_eigen" not in e.get("XLA_FLAGS", ""):
            e["XLA_FLAGS"] = (e.get("XLA_FLAGS", "") + " " + common.XLA_SINGLE_THREAD).strip()
        return e

    names = list(cands)
    out = {n: {k: {"cpu": [], "line": None} for k in kinds} for n in names}
    for name in names:  # untimed: writes every tree's bytecode and each tree's compile cache
        for kind in kinds:
            process_cpu(argv(kind, common.idlest_core()), env(name), d)
    for rep in range(args.reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            for kind in kinds:
                core = common.idlest_core()
                cpu, line = process_cpu(argv(kind, core), env(name), d)
                out[name][kind]["cpu"].append(cpu)
                out[name][kind]["line"] = line
                print(f"  rep {rep + 1} {name:24s} polc {kind:8s} {cpu:.2f} s CPU (core {core})", file=sys.stderr,
                      flush=True)
    return out


def against(args) -> dict:
    """This tree's rollouts against polc at `args.against`: long-lived workers, interleaved runs."""
    old_tree = common.source_tree(args.against)
    new_tree = common.source_tree(args.new) if args.new else None
    here = os.path.abspath(__file__)
    new_name = f"new ({args.new})" if args.new else "new (this tree)"
    old_name = f"old ({args.against})"
    cands = {new_name: new_tree, PER_WEIGHT: new_tree, STOCK_CAR: new_tree, old_name: old_tree}
    names = list(cands)
    load = common.LoadMeter()
    core = common.idlest_core()
    first: dict = {n: {} for n in names}
    out: dict = {n: {k: [] for k in KINDS} for n in names}
    with tempfile.TemporaryDirectory() as d:
        workers = {}
        try:
            for name in names:
                argv = ["taskset", "-c", str(core), sys.executable, here, "--against-worker",
                        "--episodes", str(args.episodes)] + VARIANTS.get(name, [])
                workers[name] = common.Worker(name, argv, common.child_env(cands[name]), cwd=d)
            for kind in KINDS:
                for name in names:
                    first[name][kind] = workers[name].call(op="run", kind=kind)
            for rep in range(args.reps):
                for kind in KINDS:
                    for name in names[rep % len(names):] + names[:rep % len(names)]:
                        r = workers[name].call(op="run", kind=kind)
                        out[name][kind].append(r)
                        print(f"  rep {rep + 1} {name:28s} {kind:8s} {r['cpu_per_1000_steps']:.3f} s CPU per 1000 "
                              f"steps (core {core})", file=sys.stderr, flush=True)
        finally:
            for w in workers.values():
                w.close()
        commands = time_commands(args, {new_name: new_tree, NO_CACHE: new_tree, old_name: old_tree},
                                 d) if args.commands else None
    busy = load.busy_cores()
    med = statistics.median

    def episodes(r: dict) -> tuple:
        return r["returns"], r["lengths"]

    def same(a: str, b: str, kind: str) -> bool:
        runs = [first[a][kind]] + out[a][kind] + [first[b][kind]] + out[b][kind]
        return all(episodes(x) == episodes(runs[0]) for x in runs)

    result = {"against": args.against, "new": args.new, "reps": args.reps, "episodes": args.episodes,
              "busy_cores": busy, "commands": commands, "first": first, "steady": out}
    print(f"\nRollouts on Car Racing ({common.CAR_RACING.name}, declared weights), {args.episodes} episodes on "
          f"the first evaluation seeds, CPU s per 1000 env steps: a Rollout's first run (compile and envs "
          f"included), then the median of {args.reps} interleaved repetitions (steps only); ratios to the old tree "
          "(steady: the median of per-repetition ratios); identical: every episode's return (float64) and length, "
          "in every run, the same as the old tree's")
    rows = []
    for name in names:
        row = [name]
        for kind in KINDS:
            f0, b0 = first[name][kind]["cpu_per_1000_steps"], first[old_name][kind]["cpu_per_1000_steps"]
            a, b = ([r["cpu_per_1000_steps"] for r in out[n][kind]] for n in (name, old_name))
            ratio = common.paired_ratio(a, b)
            result.setdefault("ratios", {}).setdefault(name, {})[kind] = {
                "first": f0 / b0, "steady": ratio, "identical": same(name, old_name, kind),
                "per_repetition": [x / y for x, y in zip(a, b)]}
            row += [f"{f0:.3f}", f"{f0 / b0:.3f}", f"{med(a):.3f}", f"**{ratio:.3f}**" if name != old_name else "1",
                    str(same(name, old_name, kind))]
        rows.append(row)
    print(common.table(["candidate"] + [f"{k} {c}" for k in KINDS for c in
                                        ("first", "first / old", "steady", "steady / old", "identical")], rows))
    for name in names[:-1]:
        for kind in KINDS:
            print(f"  {name}, {kind}: per-repetition steady / old " + ", ".join(
                f"{x:.3f}" for x in result["ratios"][name][kind]["per_repetition"]))
    print("(per-weight transforms are the old trees' (the grouped ones round some weights differently in the last "
          "float32 bit, which an episode amplifies); gymnasium's car: without envs/car_dynamics.ScalarCar)")
    if commands is not None:
        print(f"\nThe commands as whole processes, {args.episodes} episodes, process CPU s per run (median of "
              f"{args.reps}; ratio: median of per-repetition ratios to the old tree):")
        for kind in KINDS.values():
            for name in commands:
                cpu = commands[name][kind]["cpu"]
                ratio = common.paired_ratio(cpu, commands[old_name][kind]["cpu"])
                print(f"  polc {kind:8s} {name:24s} {med(cpu):6.2f} s  {ratio:6.3f}  {commands[name][kind]['line']}")
    if busy is not None:
        print(f"machine load during the run: {busy:.1f} of {os.cpu_count()} cores busy")
    common.write_json(args.json, result)
    return result


def commands_only(args) -> None:
    """`polc eval` / `polc rollout` as whole processes, this tree (cache warm and off) against
    polc at `args.against` (its own cache warm: the untimed first run fills it), interleaved;
    CPU ratios to the old tree (median of per-repetition ratios, with their range) and whether
    each command printed the same score line."""
    old_name = f"old ({args.against})"
    cands = {"new (this tree)": None, NO_CACHE: None, old_name: common.source_tree(args.against)}
    kinds = tuple(k for k in args.kinds.split(",") if k)
    print(common.header(f"bench_rollout --commands-only: polc {'/'.join(kinds)} --episodes {args.episodes}, "
                        f"this tree against {args.against}"))
    load = common.LoadMeter()
    with tempfile.TemporaryDirectory() as d:
        out = time_commands(args, cands, d, kinds)
    busy = load.busy_cores()
    for kind in kinds:
        old = out[old_name][kind]
        print(f"\npolc {kind}: old's line: {old['line']}")
        for name in cands:
            r = out[name][kind]
            ratios = [a / b for a, b in zip(r["cpu"], old["cpu"])]
            print(f"  {name:28s} CPU {statistics.median(r['cpu']):6.2f} s  / old {common.paired_ratio(r['cpu'], old['cpu']):.3f}"
                  f" (range {min(ratios):.3f}-{max(ratios):.3f})  same line as old: {r['line'] == old['line']}")
    if busy is not None:
        print(f"machine load during the run: {busy:.1f} of {os.cpu_count()} cores busy (this benchmark included)")
    common.write_json(args.json, {"machine": common.machine(), "against": args.against, "busy_cores": busy,
                                  "commands": out})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions (median over them)")
    ap.add_argument("--episodes", type=int, default=4, help="episodes per rollout")
    ap.add_argument("--params", help="a params file for initial.pol (default: its declared weights)")
    ap.add_argument("--rows", type=int, default=100_000, help="rows of the Parquet comparison")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--against", metavar="COMMIT", help="time this tree's rollouts against polc at COMMIT")
    ap.add_argument("--new", metavar="COMMIT", help="with --against: time polc at COMMIT as the new side, "
                    "not the working tree")
    ap.add_argument("--against-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--per-weight", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--stock-car", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-commands", dest="commands", action="store_false",
                    help="with --against: skip timing the polc eval and polc rollout processes")
    ap.add_argument("--commands-only", action="store_true",
                    help="with --against: only the commands as whole processes (see `commands_only`)")
    ap.add_argument("--kinds", default="eval,rollout", help="with --commands-only: which commands (eval,rollout)")
    args = ap.parse_args(argv)
    if args.against_worker:
        return against_worker(args)
    if args.against:
        if "--episodes" not in (argv if argv is not None else sys.argv):
            args.episodes = 10  # `polc eval`'s default
        if args.commands_only:
            commands_only(args)
            return 0
        against(args)
        return 0

    import jax

    import polc
    from polc.runtime import envs
    from polc.runtime.io.params import load_params

    print(common.header("bench_rollout: compiled policy on polc/CarRacing-v0"))
    load = common.LoadMeter()
    policy = polc.load(str(common.CAR_RACING)).compile()
    params = load_params(args.params, policy) if args.params else policy.init(jax.random.PRNGKey(0))
    spec = envs.get("car_racing")
    med = statistics.median
    raw: dict = {"machine": common.machine()}

    rows = []
    for batch in (1, 2):
        t = common.time_interleaved(policy_call_candidates(policy, params, spec, batch), reps=max(7, args.reps))
        raw[f"policy_call_batch{batch}"] = t
        base = t["untraced"]["median_s"]
        for name, r in t.items():
            rows.append([f"{name}, {batch} env{'s' if batch > 1 else ''}", common.fmt_time(r["median_s"]),
                         common.spread(r["samples_s"]), f"{r['median_s'] / base:.2f}x"])
    print("\n1. the policy call per step (no environment)\n")
    print(common.table(["", "per step", "IQR", "vs untraced"], rows))

    candidates, runners = rollout_candidates(policy, params, spec, args.episodes)
    try:
        rates, cpu_rates = time_rollouts(candidates, args.reps)
    finally:
        for r in runners:
            r.close()
    startup = {n: med(startup_seconds(spec, n) for _ in range(3)) for n in (1, 2)}
    raw["rollout_steps_per_s"], raw["rollout_steps_per_cpu_s"], raw["startup_s"] = rates, cpu_rates, startup
    rows = []
    for name, r in rates.items():
        base = name.replace("traced", "untraced") if name.endswith(", traced") else name
        one_process = name.startswith("1 env")
        # time ratio traced / untraced = rate untraced / rate traced, per repetition (the two ran
        # in the same repetition), then the median: a ratio of medians pairs unrelated runs
        rows.append([name, f"{med(r):,.0f}", common.spread(r), f"{common.paired_ratio(rates[base], r):.3f}",
                     f"{med(cpu_rates[name]):,.0f}" if one_process else "-",
                     f"{common.paired_ratio(cpu_rates[base], cpu_rates[name]):.3f}" if one_process else "-"])
    print(f"\n2. whole rollouts, {args.episodes} episodes each (compile and env start-up excluded)\n")
    print(common.table(["", "steps/s (wall)", "IQR", "traced / untraced time", "steps per CPU s",
                        "traced / untraced CPU"], rows))
    print(f"\nvector env start-up (make, reset, close): 1 env {common.fmt_time(startup[1])}, "
          f"2 envs in processes {common.fmt_time(startup[2])}")

    pq_raw = parquet_settings(policy, params, spec, args.rows, max(3, args.reps))
    raw["parquet"] = pq_raw
    print(f"\n3. writing a {pq_raw['rows']:,}-row trace\n")
    print(common.table(["settings", "time", "size"], [
        ["polc: no dictionary, BYTE_STREAM_SPLIT, snappy", common.fmt_time(med(pq_raw["polc_s"])),
         f"{pq_raw['polc_mb']:.1f} MB"],
        ["pyarrow defaults", common.fmt_time(med(pq_raw["default_s"])), f"{pq_raw['default_mb']:.1f} MB"]]))
    busy = load.busy_cores()
    if busy is not None:
        print(f"\nmachine load during the run: {busy:.1f} of {os.cpu_count()} cores busy (this process included)")
    common.write_json(args.json, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The compiled policy against the paper's PyTorch form of the same structure.

    .venv/bin/python benchmarks/bench_torch.py [--reps 9] [--batches 1,64,4096,65536] [--json out.json]

The polc side is jit(vmap(policy.apply)) with XLA single-threaded; the torch
side is car_racing_torch.CarRacingPolicy, eager and under torch.compile, with
torch.set_num_threads(1) and set_num_interop_threads(1), under inference_mode.

torch and jax are never imported in one process: this script is a driver that
starts one WORKER process per side (this same file with --worker), both pinned
to the same single core, and talks to them over pipes (one JSON line each way).
Only one worker computes at any moment, and the driver interleaves the
candidates repetition by repetition (polc, eager, compile; then eager, compile,
polc; ...), exactly as bench_lowering does within one process, so drift on a
shared machine hits all three alike. Before timing it checks that all three
give the same actions and latents.

Reported: torch_eager / polc (target >= 2) and torch_compile / polc (target
>= 1.5), each the median over repetitions of the ratio of the two times taken
in that repetition. torch is an optional extra (`pip install -e .[bench]`);
without it the torch side is skipped with a message and polc's times alone are
printed. A torch.compile failure is reported in the table, not hidden.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time

import numpy as np

import common

TARGETS = {"eager": 2.0, "compile": 1.5}
CHECK_BATCH, CHECK_SEED = 100, 7  # a size that is not timed, so every timed first call compiles


def outputs_json(actions: dict, latents: dict) -> dict:
    return {"actions": {k: np.asarray(v, np.float64).tolist() for k, v in actions.items()},
            "latents": {k: np.asarray(v, np.float64).tolist() for k, v in latents.items()}}


# ---- the two sides: each lives in its own worker process -----------------------------


class JaxSide:
    def __init__(self) -> None:
        common.single_threaded_jax_env()
        import jax

        import polc

        self.jax = jax
        policy = polc.load(str(common.CAR_RACING), analyze=False).compile()
        self.params = policy.init(jax.random.PRNGKey(0))
        self.fn = jax.jit(jax.vmap(policy.apply, in_axes=(None, 0)))
        self.versions = {"jax": jax.__version__}

    def outputs(self, batch: int, seed: int) -> dict:
        return {"polc": outputs_json(*self.fn(self.params, self.jax.device_put(common.car_obs(batch, seed))))}

    def prepare(self, batch: int):
        obs = self.jax.device_put(common.car_obs(batch, seed=batch))
        run = lambda: self.jax.block_until_ready(self.fn(self.params, obs))  # noqa: E731
        t0 = time.perf_counter()
        run()
        return {"polc": run}, {"polc": time.perf_counter() - t0}, {}


class TorchSide:
    def __init__(self) -> None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = "1"
        import torch

        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        # Inference mode for the whole process (no autograd bookkeeping in a rollout); the
        # guard lives as long as this object.
        self._inference = torch.inference_mode()
        self._inference.__enter__()
        import car_racing_torch as ct

        declared = {n: (lo, hi) for n, (lo, hi, _) in common.car_weights().items()}
        if declared != {n: (float(lo), float(hi)) for n, (lo, hi) in ct.CONSTRAINTS.items()}:
            raise SystemExit("car_racing_torch.CONSTRAINTS no longer matches the weights of initial.pol")
        self.torch = torch
        self.model = ct.CarRacingPolicy(common.unconstrained_init()).eval()
        self.versions = {"torch": torch.__version__}

    def tensors(self, batch: int, seed: int) -> dict:
        return {k: self.torch.from_numpy(v) for k, v in common.car_obs(batch, seed).items()}

    def compiled(self):
        self.torch._dynamo.reset()  # a fresh compile, so a first call measures it
        return self.torch.compile(self.model, dynamic=False)

    def outputs(self, batch: int, seed: int) -> dict:
        obs = self.tensors(batch, seed)
        out = {"torch_eager": outputs_json(*self.model(obs))}
        try:
            out["torch_compile"] = outputs_json(*self.compiled()(obs))
        except Exception:  # prepare() reports the failure with its message
            pass
        return out

    def prepare(self, batch: int):
        obs = self.tensors(batch, seed=batch)
        fns, first, errors = {}, {}, {}
        t0 = time.perf_counter()
        self.model(obs)
        first["eager"] = time.perf_counter() - t0
        fns["eager"] = lambda: self.model(obs)
        try:
            c = self.compiled()
            t0 = time.perf_counter()
            c(obs)
            first["compile"] = time.perf_counter() - t0
            fns["compile"] = lambda: c(obs)
        except Exception as e:
            msg = str(e).strip().splitlines()
            errors["compile"] = f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]
        return fns, first, errors


def worker(side: str, core: int | None) -> int:
    """Serve the driver (`common.serve`): one JSON request per stdin line, one JSON reply per line."""
    if core is not None:
        common.pin_to_one_core(core)
    impl = JaxSide() if side == "jax" else TorchSide()
    fns: dict = {}

    def handle(req: dict) -> dict:
        nonlocal fns
        op = req["op"]
        if op == "info":
            return {"versions": impl.versions}
        if op == "outputs":
            return {"outputs": impl.outputs(req["batch"], req["seed"])}
        if op == "prepare":
            fns, first, errors = impl.prepare(req["batch"])
            for fn in fns.values():
                for _ in range(3):
                    fn()
            return {"candidates": list(fns), "first_call_s": first, "errors": errors}
        if op == "calibrate":
            return {"inner": common.calibrate(fns[req["cand"]], req["target_s"])}
        if op == "time":
            fn, n = fns[req["cand"]], req["inner"]
            c0, t0 = common.cpu_seconds(), time.perf_counter()
            for _ in range(n):
                fn()
            return {"s": time.perf_counter() - t0, "cpu": common.cpu_seconds() - c0}
        raise SystemExit(f"unknown request {op!r}")

    return common.serve(handle)


# ---- the driver ---------------------------------------------------------------------


def start_worker(side: str, core: int | None) -> common.Worker:
    """A side's process, spoken to one request at a time."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", side]
    cmd += ["--no-pin"] if core is None else ["--core", str(core)]
    # Inductor's on-disk caches off, so the first call measures a cold compile as jax.jit's does.
    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS="1", TORCHINDUCTOR_FORCE_DISABLE_CACHES="1")
    return common.Worker(side, cmd, env, cwd=os.path.dirname(os.path.abspath(__file__)))


def compare(outputs: dict, rtol=1e-5, atol=1e-5) -> list[str]:
    """Problems found comparing every implementation's outputs with polc's (empty: all agree)."""
    ref = outputs["polc"]
    problems = []
    for name, got in outputs.items():
        for part in ("actions", "latents"):
            if sorted(got[part]) != sorted(ref[part]):
                problems.append(f"{name}: {part} names {sorted(got[part])} != polc's {sorted(ref[part])}")
                continue
            for k in ref[part]:
                a, b = np.asarray(got[part][k]), np.asarray(ref[part][k])
                if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=atol):
                    problems.append(f"{name}: {part}[{k!r}] differs from polc's (max |diff| {np.max(np.abs(a - b))})")
    return problems


def measure(workers: dict, batch: int, reps: int, target_s: float) -> dict:
    """Interleaved timing of every candidate of every worker at one batch size."""
    cands, first, errors = [], {}, {}
    for w in workers.values():
        r = w.call(op="prepare", batch=batch)
        cands += [(w, c) for c in r["candidates"]]
        first.update(r["first_call_s"])
        errors.update(r["errors"])
    inner = min(w.call(op="calibrate", cand=c, target_s=target_s)["inner"] for w, c in cands)
    samples = {c: [] for _, c in cands}
    cpu = {c: [] for _, c in cands}
    for rep in range(reps):
        k = rep % len(cands)
        for w, c in cands[k:] + cands[:k]:
            r = w.call(op="time", cand=c, inner=inner)
            samples[c].append(r["s"] / inner)
            cpu[c].append(r["cpu"] / inner)
    out = {"batch": batch, "inner": inner, "first_call_s": first, "errors": errors,
           "samples_s": samples, "cpu_samples_s": cpu,
           "median_s": {c: statistics.median(s) for c, s in samples.items()},
           "cpu_per_wall": {c: sum(cpu[c]) / sum(samples[c]) for c in samples}}
    out["ratio"] = {c: common.paired_ratio(samples[c], samples["polc"]) for c in samples if c != "polc"}
    out["ratio_cpu"] = {c: common.paired_ratio(cpu[c], cpu["polc"]) for c in samples if c != "polc"}
    return out


def report(results: list[dict], reps: int, torch_present: bool) -> str:
    rows = []
    for r in results:
        med, row = r["median_s"], [r["batch"], common.fmt_time(r["median_s"]["polc"])]
        for kind in ("eager", "compile"):
            if not torch_present:
                row += ["skipped", "-", "-"]
            elif kind not in med:
                row += ["FAILED", "-", "-"]
            else:
                ratio = r["ratio"][kind]
                row += [common.fmt_time(med[kind]), f"{ratio:.2f} ({r['ratio_cpu'][kind]:.2f})",
                        "yes" if ratio >= TARGETS[kind] else "NO"]
        row.append("/".join(f"{r['cpu_per_wall'][c]:.2f}" for c in ("polc", "eager", "compile") if c in med))
        rows.append(row)
    headers = ["batch", "polc", "torch eager", "eager/polc", ">= 2", "torch.compile", "compile/polc", ">= 1.5",
               "cpu/wall p/e/c"]
    lines = [f"median wall time per call, {reps} interleaved repetitions; ratio = median over repetitions of "
             f"torch_time / polc_time in wall time\n(in brackets: the same ratio in process CPU time, which waiting "
             f"for a busy core does not inflate)", common.table(headers, rows), "", "first call (trace + compile):"]
    first = [[r["batch"], common.fmt_time(r["first_call_s"]["polc"]),
              common.fmt_time(r["first_call_s"]["compile"]) if "compile" in r["first_call_s"] else "-"]
             for r in results]
    lines.append(common.table(["batch", "polc (jax.jit)", "torch.compile"], first))
    for r in results:
        for kind, msg in r["errors"].items():
            lines.append(f"torch.{kind} FAILED at batch {r['batch']}: {msg}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=15, help="interleaved repetitions (>= 7)")
    ap.add_argument("--batches", default=",".join(map(str, common.BATCHES)))
    ap.add_argument("--target-s", type=float, default=0.03, help="seconds per repetition per candidate")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the workers to one core")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--core", type=int, help="pin to this core (default: the idlest one)")
    ap.add_argument("--worker", choices=("jax", "torch"), help=argparse.SUPPRESS)  # internal
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker, None if args.no_pin else args.core)

    batches = [int(x) for x in args.batches.split(",")]
    print(common.header("bench_torch: compiled policy vs the PyTorch nn.Module form (examples/car_racing/initial.pol)"))
    torch_present = importlib.util.find_spec("torch") is not None
    if not torch_present:
        print("torch is not installed: skipping the PyTorch side (install it with `pip install -e .[bench]`).")
    core = None if args.no_pin else (args.core if args.core is not None else common.idlest_core())
    workers = {"jax": start_worker("jax", core)}
    if torch_present:
        workers["torch"] = start_worker("torch", core)
    try:
        info = {s: w.call(op="info") for s, w in workers.items()}
        for s, i in info.items():
            i["pinned_core"] = core
        outputs = {}
        for w in workers.values():
            outputs.update(w.call(op="outputs", batch=CHECK_BATCH, seed=CHECK_SEED)["outputs"])
        problems = compare(outputs)
        if len(outputs) == 1:
            pass  # polc alone: nothing to compare with
        elif problems:
            print("OUTPUTS DIFFER, the timings below compare different functions:\n  " + "\n  ".join(problems))
        else:
            print(f"same outputs: {', '.join(sorted(outputs))} agree on a batch of {CHECK_BATCH} "
                  f"(actions and latents, rtol 1e-5, atol 1e-5)")
        load = common.LoadMeter()
        results = []
        for b in batches:
            results.append(measure(workers, b, args.reps, args.target_s))
            print(f"  batch {b}: done", file=sys.stderr)
        busy = load.busy_cores()
    finally:
        for w in workers.values():
            w.close()
    versions = ", ".join(f"{k} {v}" for i in info.values() for k, v in i["versions"].items())
    pinned = "not pinned" if args.no_pin else f"both workers pinned to core {info['jax']['pinned_core']}"
    torch_settings = "torch: 1 intra-op + 1 inter-op thread, inference_mode; " if torch_present else ""
    print(f"{versions}; XLA_FLAGS={common.XLA_SINGLE_THREAD!r}; {torch_settings}{pinned}")
    if busy is not None:
        print(f"machine load while timing: {busy:.2f} of {os.cpu_count()} cores busy (this benchmark uses 1)")
    print(report(results, args.reps, torch_present))
    common.write_json(args.json, {"machine": common.machine(), "versions": info, "busy_cores": busy,
                                  "outputs_agree": not problems, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())

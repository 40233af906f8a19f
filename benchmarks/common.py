"""What every benchmark shares: the structure under test, its observations,
the timing loop and the table. Imports neither jax nor torch, so both sides of
the PyTorch comparison (separate processes) can use it.

Timing rules (docs/performance.md repeats them):
  * every call is synchronised (JAX: block_until_ready; torch CPU is synchronous);
  * warm-up calls first (compilation is never timed as a call);
  * one repetition times `inner` back-to-back calls, sized so a repetition lasts
    about `target_s` seconds, and reports seconds per call;
  * candidates are INTERLEAVED: each repetition runs every candidate once, in an
    order that rotates, so drift on a shared machine hits all of them alike;
  * the figure is the median over >= 7 repetitions, and ratios are of medians.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CAR_RACING = ROOT / "examples" / "car_racing" / "initial.pol"
BATCHES = (1, 64, 4096, 65536)

# JAX's CPU backend, single-threaded (JAX FAQ spelling). Must be in the
# environment before jax is imported.
XLA_SINGLE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def single_threaded_jax_env() -> None:
    """Put the single-thread XLA flags in os.environ (call before `import jax`)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        if "jax" in sys.modules:
            raise RuntimeError("single_threaded_jax_env() must run before jax is imported")
        os.environ["XLA_FLAGS"] = (flags + " " + XLA_SINGLE_THREAD).strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


def pin_to_one_core(core: int | None = None) -> int | None:
    """Run this process (and every thread it starts later) on one core.

    The XLA flags make XLA's own work single-threaded, but a JAX call still hands
    the computation to a runtime thread while the Python thread waits; unpinned,
    on this 2-core VM, that hand-off across cores left the process idle about half
    the time (CPU/wall about 0.5) and doubled the time per call at large batches.
    Pinning both the JAX and the torch processes to one core measures
    single-threaded work for both alike. Returns the core, or None where the OS
    has no affinity call. Call before importing jax or torch."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    core = idlest_core() if core is None else core
    os.sched_setaffinity(0, {core})
    return core


def idlest_core(window_s: float = 0.5) -> int:
    """The allowed core that was idle the longest over `window_s` (from /proc/stat),
    so a pinned benchmark does not share its core with whatever else is running."""
    allowed = sorted(os.sched_getaffinity(0))

    def idle() -> dict[int, int]:
        out = {}
        try:
            for ln in Path("/proc/stat").read_text().splitlines():
                if ln.startswith("cpu") and ln[3:4].isdigit():
                    f = ln.split()
                    out[int(f[0][3:])] = int(f[4]) + int(f[5])  # idle + iowait
        except (OSError, ValueError, IndexError):
            pass
        return out

    a = idle()
    time.sleep(window_s)
    b = idle()
    scores = {c: b.get(c, 0) - a.get(c, 0) for c in allowed}
    return max(allowed, key=lambda c: (scores[c], c))


# ---- the structure's observations ---------------------------------------------------

# Declared shapes of examples/car_racing/initial.pol (unbatched).
OBS_SHAPES: dict[str, tuple[int, ...]] = {
    "tiles": (12, 4), "speed": (), "ang_vel": (), "wheel_speed": (4,),
    "offset": (), "heading_err": (), "on_grass": (4,),
}


def car_obs(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A batch of plausible Car Racing observations, float32, each of shape
    (batch, *declared shape), inside the declared ranges."""
    rng = np.random.default_rng(seed)
    tiles = np.empty((batch, 12, 4), np.float32)
    tiles[..., 0] = rng.normal(0.0, 1.0, (batch, 12))                            # lateral x
    tiles[..., 1] = np.arange(1, 13) * 0.4 + rng.normal(0, 0.05, (batch, 12))   # ahead y
    tiles[..., 2] = rng.normal(0.0, 0.3, (batch, 12))                            # heading theta
    tiles[..., 3] = rng.random((batch, 12)) < 0.1                                # sharp flag
    speed = rng.uniform(0.0, 1.2, batch)
    return {
        "tiles": tiles,
        "speed": speed.astype(np.float32),
        "ang_vel": rng.normal(0.0, 1.0, batch).astype(np.float32),
        "wheel_speed": (speed[:, None] + rng.normal(0, 0.1, (batch, 4))).clip(0, 3).astype(np.float32),
        "offset": rng.normal(0.0, 0.8, batch).clip(-4, 4).astype(np.float32),
        "heading_err": rng.normal(0.0, 0.4, batch).clip(-3.15, 3.15).astype(np.float32),
        "on_grass": (rng.random((batch, 4)) < 0.05).astype(np.float32),
    }


def car_weights() -> dict[str, tuple[float, float, float]]:
    """name -> (lo, hi, initial constrained value), read from the .pol through
    polc's checker (which imports no jax and no torch)."""
    import polc

    tp = polc.load(str(CAR_RACING), analyze=False).typed
    return {w.name: (w.lo, w.hi, float(w.init)) for w in tp.weights}


def unconstrained_init() -> dict[str, float]:
    """name -> the weight's initial UNCONSTRAINED value (Stan transforms, numpy)."""
    from polc.analysis import transforms

    return {n: float(transforms.unconstrain(np.float64(v), lo, hi, np)) for n, (lo, hi, v) in car_weights().items()}


# ---- timing -------------------------------------------------------------------------


def cpu_seconds() -> float:
    """CPU time of this process, all threads (CLOCK_PROCESS_CPUTIME_ID: exact, not tick-sampled)."""
    return time.process_time()


def children_cpu() -> float:
    """CPU seconds (user + system) of the child processes waited for so far: the difference
    across one `subprocess.run` is that child's."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def calibrate(fn: Callable[[], object], target_s: float) -> int:
    """How many back-to-back calls of `fn` take about `target_s` seconds."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= target_s / 4 or n >= 1 << 20:
            return max(1, int(round(n * target_s / max(dt, 1e-9))))
        n *= 4


def time_interleaved(fns: Mapping[str, Callable[[], object]], reps: int = 9, warmup: int = 3,
                     target_s: float = 0.05) -> dict[str, dict]:
    """Median seconds per call of each synchronised callable, interleaved.

    Returns name -> {"median_s", "samples_s" (wall seconds per call, one per
    repetition), "cpu_samples_s" (the same in process CPU seconds), "inner",
    "cpu_per_wall" (CPU / wall over all repetitions: about 1.0 means the
    candidate had one core to itself; below 1, it waited for the CPU)}."""
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    # One inner count for all, sized on the slowest, so each candidate runs the same calls.
    inner = min(calibrate(fns[n], target_s) for n in names)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(reps):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            fn = fns[name]
            c0, t0 = cpu_seconds(), time.perf_counter()
            for _ in range(inner):
                fn()
            wall[name].append((time.perf_counter() - t0) / inner)
            cpu[name].append((cpu_seconds() - c0) / inner)
    return {n: {"median_s": statistics.median(wall[n]), "samples_s": wall[n], "cpu_samples_s": cpu[n],
                "inner": inner, "cpu_per_wall": sum(cpu[n]) / sum(wall[n])} for n in names}


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """Median over repetitions of a[r] / b[r] (a and b timed back to back in repetition r)."""
    return statistics.median(x / y for x, y in zip(a, b))


class LoadMeter:
    """How busy the whole machine was between start() and stop(), in cores,
    from /proc/stat (this process's own work included). On a shared machine
    (other jobs running) the timings are noisier; the reports say how busy it was."""

    def __init__(self) -> None:
        self.t0 = self._read()

    @staticmethod
    def _read():
        try:
            f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        return sum(f) - f[3] - f[4], sum(f)  # busy (all but idle and iowait), total

    def busy_cores(self) -> float | None:
        t1 = self._read()
        if self.t0 is None or t1 is None or t1[1] == self.t0[1]:
            return None
        return (t1[0] - self.t0[0]) / (t1[1] - self.t0[1]) * (os.cpu_count() or 1)


def time_process(argv: Sequence[str], runs: int, env: Mapping[str, str] | None = None) -> dict:
    """Wall seconds of whole child processes (start to exit), run `runs` times.
    Raises if the child exits non-zero (a benchmark of a failing command is no benchmark)."""
    import subprocess

    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(list(argv), capture_output=True, text=True, env=None if env is None else dict(env))
        samples.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    return {"median_s": statistics.median(samples), "samples_s": samples}


# ---- reporting ----------------------------------------------------------------------


def fmt_time(s: float) -> str:
    """Seconds in a readable unit (ns / us / ms / s), 3 significant digits."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if s >= scale or unit == "ns":
            v = s / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{s:.3g} s"  # pragma: no cover


def spread(samples: Sequence[float]) -> str:
    """The interquartile range relative to the median, as +-x%."""
    if len(samples) < 4:
        return ""
    q = statistics.quantiles(samples, n=4)
    med = statistics.median(samples)
    return f"±{50 * (q[2] - q[0]) / med:.0f}%"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table (also valid Markdown)."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    def line(cells) -> str:  # the first column (a name) to the left, numbers to the right
        return "| " + " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def machine() -> dict:
    """What the numbers were measured on."""
    model = ""
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                model = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "cpu": model or platform.processor(), "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def header(title: str) -> str:
    m = machine()
    return f"{title}\n{m['date']}  {m['cpu']}, {m['cores']} cores, Python {m['python']}, {m['platform']}"


def write_json(path: str | None, data: object) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=1))


# ---- another version of polc, side by side ---------------------------------------------

def source_tree(commit: str) -> Path:
    """An importable copy of polc at git `commit` (for PYTHONPATH): `polc/` laid out as the
    editable install maps it (compiler -> polc, grammar, runtime, lsp inside it). Made once
    per commit under the temp directory; benchmarks run it in a child process beside the
    working tree's, so old and new code are timed interleaved on the same machine."""
    import subprocess
    import tempfile

    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", commit], check=True,
                         capture_output=True, text=True).stdout.strip()
    dest = Path(tempfile.gettempdir()) / f"polc-src-{sha}"
    if (dest / "polc" / "__init__.py").exists():
        return dest
    work = Path(tempfile.mkdtemp(prefix=f"polc-src-{sha}-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "compiler", "grammar", "runtime", "lsp"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
    (work / "compiler").rename(work / "polc")
    for sub in ("grammar", "runtime", "lsp"):
        (work / sub).rename(work / "polc" / sub)
    try:
        work.rename(dest)
    except OSError:  # made meanwhile by another run
        pass
    return dest if (dest / "polc" / "__init__.py").exists() else work


# ---- long-lived worker processes ----------------------------------------------------


class Worker:
    """A benchmark's child process, spoken to one JSON request per line and answering one
    JSON line each (`serve` is its end). Candidates that cannot share a process (torch and
    jax; two versions of polc) stay alive side by side, so the driver can interleave them
    request by request instead of process by process."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> None:
        import subprocess
        import tempfile

        self.name = name
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     text=True, env=None if env is None else dict(env), cwd=cwd)

    def call(self, **req) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.err.seek(0)
            raise SystemExit(f"the {self.name} worker died (exit {self.proc.wait()}):\n{self.err.read()[-3000:]}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)
        self.err.close()


def serve(handle: Callable[[dict], dict]) -> int:
    """A worker's loop: each request line from the driver (`Worker.call`) to `handle`, its
    reply back as one line, until {"op": "quit"}. Whatever the libraries print goes to
    stderr, never into the protocol."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "quit":
            break
        proto.write(json.dumps(handle(req)) + "\n")
    return 0


def child_env(tree: Path | None) -> dict[str, str]:
    """os.environ for a child that imports polc from `tree` (None: the working tree's install)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env

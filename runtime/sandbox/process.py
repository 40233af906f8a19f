"""Run untrusted analysis code over a Parquet trace, isolated in a child process.

The analysis code defines ``analyze(df)``; the sandbox loads the trace into a
pandas DataFrame, calls it, and returns what it printed. Three processes:

    unshare (util-linux)   new network, mount and PID namespaces; kills its child when it dies
      init (pid 1, root)   mounts, then forks the harness and reaps until it exits
        harness            limited, unprivileged, filtered, clean environment: runs analyze(df)

This module is the caller's side; inside.py (run by path in the sandbox) is init and the
harness. docs/sandbox.md says what is allowed and why. What the analysis code gets (as root,
which is how polc runs here and in CI):
- no network: its own network namespace whose only interface, loopback, is down, and a
  seccomp filter that refuses to create a socket of any family, so no TCP, UDP or raw
  socket, and no UNIX socket either, in a host directory or the abstract namespace;
- a file system of its own: a tmpfs root holding only the system's programs, libraries and
  configuration (/usr, /bin, /sbin, /lib*, /etc), the Python installation, inside.py, a copy
  of the trace, its working directory, an empty /proc (init detaches its PID namespace's /proc
  before the harness starts: /proc/*/mountinfo would show the host's side of each mount) and
  five devices (null, zero, full, random, urandom). No host socket file, terminal, home, /tmp, /run, /var or project
  file is in view. Every mount is read-only except the working directory, a fresh tmpfs
  (limited in size and in files, so a file bomb cannot grow the host kernel's memory) that is
  its HOME and TMPDIR; the sandbox's other tmpfs mounts (its root, /dev) have inode limits too;
- a dedicated random uid with no capabilities, an empty capability bounding set and
  no_new_privs, so it cannot undo the read-only mounts, read root's files, or signal anything
  outside its PID namespace (init, pid 1 inside, ignores every signal but its own alarm);
- a seccomp filter (inside.DENIED) refusing with EPERM what an analysis never needs:
  namespaces, mounts, ptrace and other processes' memory, keyrings, bpf, perf, io_uring,
  module loading, kexec, personality, the machine's clocks and names;
- limits (setrlimit in the forked child, not a preexec_fn: the caller may have threads):
  CPU seconds, address space (~4 GB: pandas and pyarrow start under it), processes
  (counted for its own uid), file size; a wall-clock limit enforced by the caller;
- an environment built from an allow-list, with nothing matching KEY|TOKEN|SECRET|PASSWORD;
- no descriptor but stdin (/dev/null), stdout and stderr: it cannot write polc's status pipe,
  and every sentence polc says about it is built here from checked fields, each saying what
  "the analysis" did (see inside.py); its output is shown with control characters made
  visible, so it cannot move the cursor or rewrite what polc printed;
- output (stdout and stderr, merged) cut at a limit, the run killed when it passes it;
- at the end the whole process group is killed, and with it the PID namespace: a process
  that escaped the group with setsid() still dies when init exits.

Not root: the same, inside a user namespace (``unshare --user --map-root-user``) whose mounts
are then locked read-only by a second, nested user namespace; the analysis runs as the
caller's own uid there, so the process limit counts only the sandbox's processes (and the
new root keeps the caller's own files out of its view).
If no network isolation can be set up, `run_analysis` raises `SandboxUnavailable`: it never
runs the code unisolated. The seccomp filter is written for x86_64: on aarch64, riscv64 and
loongarch64 the sandbox runs without it and says so with a `SandboxWarning` (everything else
holds); elsewhere it is unavailable (inside.PIVOT_ROOT). On x86_64 a missing libseccomp or
pyseccomp makes the sandbox unavailable.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import inside

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
ENV_ALLOW = ("LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
EXIT_UNAVAILABLE, EXIT_WALL = inside.EXIT_UNAVAILABLE, inside.EXIT_WALL
SECCOMP_MACHINES = ("x86_64", "amd64")  # the architectures inside.DENIED is written for
# What the analysis prints is shown as printed, but for characters that drive a terminal:
# C0 and C1 controls (escape sequences, carriage returns that overwrite a line) and the
# bidirectional overrides; each becomes a visible escape such as \x1b.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
EXCEPTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


class SandboxUnavailable(RuntimeError):
    """No isolation could be set up here; the analysis was not run."""


class SandboxWarning(UserWarning):
    """The sandbox runs with less isolation than documented here (no system-call filter)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run. Sizes in bytes, times in seconds."""

    cpu_seconds: int = 60
    wall_seconds: float = 120.0
    memory_bytes: int = 4 << 30  # address space: pandas + pyarrow start under ~4 GB
    processes: int = 64  # threads count too (pyarrow and OpenBLAS start a few)
    file_bytes: int = 64 << 20
    disk_bytes: int = 256 << 20  # size of the private tmpfs
    files: int = 16384  # inodes of the private tmpfs (files, directories, links): each costs
    # the host kernel memory (Slab) that neither the address-space limit nor the size bounds
    output_bytes: int = 64 << 10


@dataclass(frozen=True)
class SandboxResult:
    """What the analysis printed and how it ended.

    `error` is one sentence when it failed or was killed, else None; `limit` names the
    limit that stopped it ("cpu", "wall", "memory", "processes", "file_size", "disk", "output",
    "network", "filesystem", "forbidden") or is None. `output` is what the analysis printed,
    with control characters made visible; `error` is polc's sentence about it.
    """

    ok: bool
    output: str
    error: Optional[str]
    seconds: float
    limit: Optional[str] = None


def clean_env(work: str) -> dict[str, str]:
    """The harness environment: an allow-list, and never anything that looks like a secret."""
    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME=work, TMPDIR=work, MPLCONFIGDIR=work,
               LANG=env.get("LANG", "C.UTF-8"), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return {k: v for k, v in env.items() if not SECRET_NAME.search(k)}


def run_analysis(code: str, trace: str | os.PathLike, limits: Limits = Limits(),
                 demo: str | os.PathLike | None = None) -> SandboxResult:
    """Run `code` (which defines ``analyze(df)``) on the Parquet file `trace`, isolated.
    With `demo` (a demonstration's Parquet step table), code defining ``analyze(df, demo)``
    gets it as a second DataFrame; ``analyze(df)`` runs as before.

    Never raises for anything the code does; raises `SandboxUnavailable` when the sandbox
    itself cannot be set up (the code is then not run at all).
    """
    if shutil.which("unshare") is None:
        raise SandboxUnavailable("The analysis sandbox needs `unshare` (util-linux) for network "
                                 "isolation, and it is not installed; refusing to run the code.")
    seccomp = platform.machine().lower() in SECCOMP_MACHINES
    if not seccomp:
        import warnings

        warnings.warn(SandboxWarning(
            f"The analysis sandbox has no system-call filter for {platform.machine()} (only "
            "x86_64); the analysis runs without it, isolated by namespaces, a throwaway uid and "
            "limits only."), stacklevel=2)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="polc-sandbox-") as tmp:
        root = Path(os.path.realpath(tmp))  # mountinfo shows resolved paths
        os.chmod(root, 0o755)
        (root / "work").mkdir()
        (root / "newroot").mkdir(mode=0o755)
        (root / "input").mkdir(mode=0o755)
        shutil.copyfile(trace, root / "input" / "trace.parquet")
        if demo is not None:
            shutil.copyfile(demo, root / "input" / "demo.parquet")
        (root / "input" / "analysis.py").write_text(code, encoding="utf-8")
        for f in (root / "input").iterdir():
            os.chmod(f, 0o644)
        status_r, status_w = os.pipe()
        try:
            spec = _init_spec(root, limits, status_w, seccomp)
            proc, output, killed_for = _supervise(_command(spec), root, status_w, limits)
        finally:
            os.close(status_w)
            status = _read_status(status_r)
    return _result(proc.returncode, status, output, killed_for, limits, time.monotonic() - start)


def _init_spec(root: Path, limits: Limits, status_fd: int, seccomp: bool) -> dict:
    as_root = os.geteuid() == 0
    work = str(root / "work")
    python, script = sys.executable, os.path.realpath(inside.__file__)
    expose = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, python, script)}
    expose |= {str(root / "input"), work}
    expose |= {os.path.abspath(p) for p in (sys.prefix, python)}  # the venv, as Python finds it
    expose |= _package_dirs_outside(expose)
    return dict(mode="root" if as_root else "user", root=str(root), work=work,
                newroot=str(root / "newroot"),
                uid=random.SystemRandom().randrange(1 << 30, 1 << 31) if as_root else None,
                expose=sorted(expose), python=python, script=script, seccomp=seccomp,
                netns=os.stat("/proc/self/ns/net").st_ino, status_fd=status_fd,
                env=clean_env(work), limits=limits.__dict__)


def _package_dirs_outside(exposed: set[str]) -> set[str]:
    """Package folders on sys.path outside the exposed prefixes: a `.pth` file in the venv can put
    another installation's site-packages on the path (a venv layered over a shared one), and the
    analysis's `python -I` processes `.pth` files too, so pandas and pyarrow may live there."""
    found = set()
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if os.path.basename(real) not in ("site-packages", "dist-packages") or not os.path.isdir(real):
            continue
        if not any(real == e or real.startswith(e.rstrip("/") + "/") for e in exposed):
            found.add(real)
    return found


def _command(spec: dict) -> list[str]:
    user = [] if spec["mode"] == "root" else ["--user", "--map-root-user"]
    return ["unshare", *user, "--net", "--mount", "--pid", "--fork", "--kill-child",
            "--mount-proc", "--propagation", "private",
            spec["python"], "-I", spec["script"], "init", json.dumps(spec)]


def _supervise(cmd: list[str], root: Path, status_w: int, limits: Limits):
    """Start the sandbox, collect its output, enforce wall-clock and output limits."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=root, env={"PATH": "/usr/bin:/bin"},
                            pass_fds=(status_w,), start_new_session=True)
    chunks: list[bytes] = []
    seen = [0]
    overflow = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        while data := proc.stdout.read1(1 << 16):
            if seen[0] < limits.output_bytes:
                chunks.append(data[: limits.output_bytes - seen[0]])
            seen[0] += len(data)
            if seen[0] > limits.output_bytes and not overflow.is_set() and proc.poll() is None:
                overflow.set()
                _kill_group(proc)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    killed_for = None
    try:
        proc.wait(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        killed_for = "wall"
    finally:
        _kill_group(proc)
        proc.wait()
        reader.join(timeout=5.0)
        proc.stdout.close()
    if overflow.is_set() and killed_for is None:
        killed_for = "output"
    output = visible(b"".join(chunks).decode("utf-8", errors="replace"))
    if seen[0] > limits.output_bytes:
        hidden = seen[0] - limits.output_bytes
        output += f"\n[... output truncated: {hidden} more bytes not shown ...]\n"
    return proc, output, killed_for


def visible(text: str) -> str:
    """`text` with every character that could drive a terminal shown as an escape; tabs and
    line ends are kept (a Windows line end becomes a plain one)."""
    def escape(m: re.Match) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"

    return CONTROL.sub(escape, text.replace("\r\n", "\n"))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_status(fd: int) -> dict:
    """Merge the JSON lines that init wrote on the status pipe (only init holds it)."""
    with os.fdopen(fd, "rb") as f:
        raw = f.read(1 << 16)
    status: dict = {}
    for line in raw.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            status.update(item)
    return status


def _result(code: int, status: dict, output: str, killed_for: Optional[str], limits: Limits,
            seconds: float) -> SandboxResult:
    """How the run ended, from unshare's exit code, the status lines and the supervisor."""
    never_isolated = killed_for is None and not status.get("ready")
    if never_isolated or EXIT_UNAVAILABLE in (code, status.get("exit")):
        raise SandboxUnavailable(status.get("unavailable") or
                                 "The analysis sandbox could not isolate the code (no network or "
                                 "mount namespace here); refusing to run it. unshare said: "
                                 + (output.strip()[-300:] or f"exit status {code}"))

    def failed(sentence: str, limit: Optional[str] = None) -> SandboxResult:
        return SandboxResult(False, output, sentence, seconds, limit)

    sig = status.get("signal")
    if killed_for == "wall" or code == EXIT_WALL:
        return failed(f"The analysis was killed after the wall-clock limit of "
                      f"{limits.wall_seconds:g} s.", "wall")
    if killed_for == "output":
        return failed(f"The analysis printed more than the {limits.output_bytes} bytes of output "
                      "allowed, so it was stopped and its output truncated.", "output")
    if sig in (signal.SIGXCPU, signal.SIGKILL) and status.get("cpu", 0) >= limits.cpu_seconds - 0.5:
        return failed(f"The analysis was killed after the CPU-time limit of "
                      f"{limits.cpu_seconds} s.", "cpu")
    if sig == signal.SIGXFSZ:
        return failed(f"The analysis was killed for writing a file larger than the "
                      f"{limits.file_bytes}-byte limit.", "file_size")
    phase = status.get("phase") if isinstance(status.get("phase"), dict) else {}
    if phase.get("kind") == "syntax":  # the harness's own word, before any analysis code ran
        return failed(f"The analysis code has a syntax error at line {_number(phase.get('line'))}: "
                      f"{_text(phase.get('message'))}.")
    if phase.get("kind") == "load":
        return failed(f"The sandbox could not load the trace: {_name(phase.get('type'))}: "
                      f"{_text(phase.get('message'))}.")
    if not phase.get("ready"):
        how = (f"was killed by signal {signal.Signals(sig).name}" if sig is not None
               else f"exited with status {status.get('exit')}")
        return failed(f"The sandbox's harness {how} before it could run the analysis.")
    # From here on the report is the analysis's (it could have written it): every sentence
    # is built from checked fields, and each says what the analysis did.
    report = status.get("report") if isinstance(status.get("report"), dict) else {}
    kind = report.get("kind")
    if kind == "no_analyze":
        return failed("The analysis code does not define a function analyze(df).")
    if kind == "exit":
        return failed(f"The analysis called sys.exit({_text(report.get('message'))}).")
    if kind == "exception":
        return failed(*_explain(report, limits))
    if sig == signal.SIGKILL:  # not the CPU limit, so the kernel's out-of-memory killer
        return failed("The analysis was killed, most likely for running out of memory (its limit "
                      f"is {limits.memory_bytes / (1 << 30):g} GB of address space).", "memory")
    if sig is not None:
        return failed(f"The analysis was killed by signal {signal.Signals(sig).name}.")
    if status.get("exit") != 0 or kind != "done":
        return failed(f"The analysis exited with status {status.get('exit')} before analyze(df) "
                      "returned.")
    return SandboxResult(True, output, None, seconds)


def _explain(report: dict, limits: Limits) -> tuple[str, Optional[str]]:
    """One sentence for the person and the LLM, and the name of the limit hit, from the
    fields of the exception the analysis reported (untrusted: each is checked)."""
    import errno

    name, err, message = _name(report.get("type")), report.get("errno"), _text(report.get("message"))
    line = report.get("line")
    where = f" at line {line}" if isinstance(line, int) and not isinstance(line, bool) else ""
    target = f" ({_text(report['filename'])})" if isinstance(report.get("filename"), str) else ""
    if name == "MemoryError":
        return (f"The analysis ran out of memory{where}: it may use at most "
                f"{limits.memory_bytes / (1 << 30):g} GB of address space.", "memory")
    if err == errno.EAGAIN or "can't start new thread" in message:
        return (f"The analysis hit the process limit{where}: it may run at most "
                f"{limits.processes} processes and threads.", "processes")
    if err == errno.EFBIG:
        return (f"The analysis wrote a file larger than the {limits.file_bytes}-byte "
                f"limit{where}.", "file_size")
    if err == errno.ENOSPC:
        return (f"The analysis filled its working directory{where}: it may write at most "
                f"{limits.disk_bytes} bytes and create at most {limits.files} files and "
                "directories in all.", "disk")
    if report.get("network") is True or err in (
            errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL,
            errno.ECONNREFUSED, errno.EAFNOSUPPORT):
        return (f"The analysis tried to use the network{where}, which the sandbox disables.",
                "network")
    if err == errno.EROFS or (err in (errno.EACCES, errno.EPERM) and target):
        return (f"The analysis tried to write or open something outside its working directory"
                f"{target}{where}: everything else is read-only to it.", "filesystem")
    if err in (errno.EACCES, errno.EPERM):
        return (f"The analysis made a system call that the sandbox does not allow{where} "
                f"({name}: {message}).", "forbidden")
    return f"The analysis raised {name}{where}: {message}".rstrip(": ") + ".", None


def _name(value: object) -> str:
    return value if isinstance(value, str) and EXCEPTION_NAME.fullmatch(value) else "an exception"


def _number(value: object) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _text(value: object) -> str:
    """A field of a report as one visible line of at most 200 characters."""
    text = value if isinstance(value, str) else ""
    return visible((text.splitlines() or [""])[0][:200])

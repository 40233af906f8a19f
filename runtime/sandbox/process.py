"""Run untrusted analysis code over a Parquet trace, isolated in a child process.

The analysis code defines ``analyze(df)``; the sandbox loads the trace into a
pandas DataFrame, calls it, and returns what it printed. Three processes:

    unshare (util-linux)   new network, mount and PID namespaces; kills its child when it dies
      init (pid 1, root)   mounts, then forks the harness and reaps until it exits
        harness            limited, unprivileged, clean environment: runs analyze(df)

What the analysis code gets (the guarantee, as root, which is how polc runs here and in CI):
- no network: its own network namespace whose only interface, loopback, is down;
  it holds no capability to bring it up, so even 127.0.0.1 is unreachable;
- a filesystem where every mount is read-only except its working directory, a fresh
  tmpfs (size-limited) that is its HOME and TMPDIR; the trace is a copy, next to the code;
  directories that other users cannot enter (e.g. /root, where pyenv may keep Python) are
  hidden behind an empty read-only tmpfs that re-exposes only the interpreter;
- a dedicated random uid with no capabilities and no_new_privs, so it cannot undo the
  read-only mounts, read root's files, or signal anything outside its PID namespace;
- limits (setrlimit in the forked child, not a preexec_fn: the caller may have threads):
  CPU seconds, address space (~4 GB: pandas and pyarrow start under it), processes
  (counted for its own uid), file size; a wall-clock limit enforced by the caller;
- an environment built from an allow-list, with nothing matching KEY|TOKEN|SECRET|PASSWORD;
- output (stdout and stderr, merged) cut at a limit, the run killed when it passes it;
- at the end the whole process group is killed, and with it the PID namespace: a process
  that escaped the group with setsid() still dies when init exits.

Not root: the same, inside a user namespace (``unshare --user --map-root-user``) whose mounts
are then locked read-only by a second, nested user namespace; the analysis runs as the
caller's own uid there, so the process limit counts only the sandbox's processes.
If no network isolation can be set up, `run_analysis` raises `SandboxUnavailable`: it never
runs the code unisolated.
"""

from __future__ import annotations

import json
import os
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

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
ENV_ALLOW = ("LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
EXIT_UNAVAILABLE = 97  # init could not isolate; nothing of the analysis ran
EXIT_WALL = 98  # init's own wall-clock backstop fired


class SandboxUnavailable(RuntimeError):
    """No isolation could be set up here; the analysis was not run."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run. Sizes in bytes, times in seconds."""

    cpu_seconds: int = 60
    wall_seconds: float = 120.0
    memory_bytes: int = 4 << 30  # address space: pandas + pyarrow start under ~4 GB
    processes: int = 64  # threads count too (pyarrow and OpenBLAS start a few)
    file_bytes: int = 64 << 20
    disk_bytes: int = 256 << 20  # size of the private tmpfs
    output_bytes: int = 64 << 10


@dataclass(frozen=True)
class SandboxResult:
    """What the analysis printed and how it ended.

    `error` is one sentence when it failed or was killed, else None; `limit` names the
    limit that stopped it ("cpu", "wall", "memory", "processes", "file_size", "output",
    "network", "filesystem") or is None.
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


def run_analysis(code: str, trace: str | os.PathLike, limits: Limits = Limits()) -> SandboxResult:
    """Run `code` (which defines ``analyze(df)``) on the Parquet file `trace`, isolated.

    Never raises for anything the code does; raises `SandboxUnavailable` when the sandbox
    itself cannot be set up (the code is then not run at all).
    """
    if shutil.which("unshare") is None:
        raise SandboxUnavailable("The analysis sandbox needs `unshare` (util-linux) for network "
                                 "isolation, and it is not installed; refusing to run the code.")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="polc-sandbox-") as tmp:
        root = Path(os.path.realpath(tmp))  # mountinfo shows resolved paths
        os.chmod(root, 0o755)
        (root / "work").mkdir()
        (root / "input").mkdir(mode=0o755)
        shutil.copyfile(trace, root / "input" / "trace.parquet")
        (root / "input" / "analysis.py").write_text(code, encoding="utf-8")
        for f in (root / "input").iterdir():
            os.chmod(f, 0o644)
        status_r, status_w = os.pipe()
        try:
            spec = _init_spec(root, limits, status_w)
            proc, output, killed_for = _supervise(_command(spec), root, status_w, limits)
        finally:
            os.close(status_w)
            status = _read_status(status_r)
    return _result(proc.returncode, status, output, killed_for, limits, time.monotonic() - start)


def _init_spec(root: Path, limits: Limits, status_fd: int) -> dict:
    as_root = os.geteuid() == 0
    work = str(root / "work")
    python = sys.executable
    expose = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, python, __file__, root)}
    return dict(mode="root" if as_root else "user", root=str(root), work=work,
                uid=random.SystemRandom().randrange(1 << 30, 1 << 31) if as_root else None,
                expose=sorted(expose), python=python, script=os.path.realpath(__file__),
                netns=os.stat("/proc/self/ns/net").st_ino, status_fd=status_fd,
                env=clean_env(work), limits=limits.__dict__)


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
    output = b"".join(chunks).decode("utf-8", errors="replace")
    if seen[0] > limits.output_bytes:
        hidden = seen[0] - limits.output_bytes
        output += f"\n[... output truncated: {hidden} more bytes not shown ...]\n"
    return proc, output, killed_for


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_status(fd: int) -> dict:
    """Merge the JSON lines that init and the harness wrote on the status pipe."""
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
    if status.get("error"):
        return failed(status["error"], status.get("limit"))
    if sig == signal.SIGKILL:  # not the CPU limit, so the kernel's out-of-memory killer
        return failed("The analysis was killed, most likely for running out of memory (its limit "
                      f"is {limits.memory_bytes / (1 << 30):g} GB of address space).", "memory")
    if sig is not None:
        return failed(f"The analysis was killed by signal {signal.Signals(sig).name}.")
    if status.get("exit") != 0 or not status.get("done"):
        return failed(f"The analysis exited with status {status.get('exit')} before analyze(df) "
                      "returned.")
    return SandboxResult(True, output, None, seconds)


# ---------------------------------------------------------------------------------------------
# Inside the namespaces. Everything below runs in the child, stdlib only, started with python -I.

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_MOVE, MS_REC = 1024, 2048, 4096, 8192, 16384
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
MOUNT_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                      "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME,
                      "strictatime": MS_STRICTATIME}
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS = 38


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _mount(src: Optional[str], target: str, fstype: Optional[str], flags: int,
           data: Optional[str] = None) -> None:
    import ctypes

    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if _libc().mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _mounts() -> dict[str, set[str]]:
    """Mount point -> per-mount options, from /proc/self/mountinfo; where mounts are stacked on
    one point the last (the visible one) wins."""
    unescape = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)  # noqa: E731
    out = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        out[unescape(fields[4])] = set(fields[5].split(","))
    return out


def _hide_closed_dirs(expose: list[str], stage: str) -> None:
    """Cover each directory that others cannot enter with an empty tmpfs, re-exposing only the
    parts of `expose` below it (bind-mounted aside first, then moved back in place)."""
    blocked: dict[str, set[str]] = {}
    for path in expose:
        parts = Path(path).parts
        for i in range(2, len(parts)):
            ancestor = str(Path(*parts[:i]))
            if not os.stat(ancestor).st_mode & 0o001:
                blocked.setdefault(ancestor, set()).add(str(Path(*parts[: i + 1])))
                break
    for n, (ancestor, children) in enumerate(sorted(blocked.items())):
        staged = []
        for k, child in enumerate(sorted(children)):
            aside = os.path.join(stage, f"{n}-{k}")
            os.mkdir(aside) if os.path.isdir(child) else Path(aside).touch()
            _mount(child, aside, None, MS_BIND | MS_REC)
            staged.append((aside, child))
        _mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
        for aside, child in staged:
            os.mkdir(child) if os.path.isdir(aside) else Path(child).touch()
            _mount(aside, child, None, MS_MOVE)
            os.rmdir(aside) if os.path.isdir(aside) else os.unlink(aside)


def _read_only_everywhere_but(work: str) -> None:
    """Remount every mount read-only (keeping its other flags, which a user namespace locks),
    except the private tmpfs and the PID namespace's own /proc; then verify."""
    def exempt(target: str) -> bool:
        return target == work or target == "/proc" or target.startswith("/proc/")

    for target, options in _mounts().items():
        if exempt(target) or "ro" in options:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        for opt in options:
            flags |= MOUNT_OPTION_FLAGS.get(opt, 0)
        try:
            _mount(None, target, None, flags)
        except FileNotFoundError:
            continue  # under a directory hidden by _hide_closed_dirs
    for target, options in _mounts().items():
        if not exempt(target) and "ro" not in options and os.path.exists(target):
            raise OSError(f"{target} is still writable")


def _init(spec: dict) -> None:
    """pid 1 of the sandbox: isolate, fork the harness, reap until it exits."""
    status = os.fdopen(spec["status_fd"], "w", buffering=1)

    def unavailable(why: str) -> None:
        status.write(json.dumps({"unavailable": "The analysis sandbox could not isolate the code "
                                 f"({why}); refusing to run it."}) + "\n")
        sys.exit(EXIT_UNAVAILABLE)

    if os.stat("/proc/self/ns/net").st_ino == spec["netns"]:
        unavailable("it is not in a network namespace of its own")
    work, uid = spec["work"], spec["uid"]
    try:
        owner = f",uid={uid},gid={uid}" if uid is not None else ""
        _mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV,
               f"mode=0700,size={spec['limits']['disk_bytes']}{owner}")
        if spec["mode"] == "root":
            _hide_closed_dirs(spec["expose"], work)
        _read_only_everywhere_but(work)
    except OSError as e:
        unavailable(f"making the filesystem read-only failed: {e}")
    status.write(json.dumps({"ready": True}) + "\n")
    status.flush()
    child = os.fork()
    if child == 0:
        try:
            _become_harness(spec)
        except BaseException as e:  # noqa: BLE001 - fail closed, never run the code half-isolated
            status.write(json.dumps({"unavailable": "The analysis sandbox could not drop its "
                                     f"privileges ({e}); refusing to run the code."}) + "\n")
        finally:
            os._exit(EXIT_UNAVAILABLE)
    # The caller enforces the wall clock; this backstop holds even if the caller was killed.
    signal.signal(signal.SIGALRM, lambda *_: os._exit(EXIT_WALL))
    signal.alarm(int(spec["limits"]["wall_seconds"]) + 5)
    while True:  # as pid 1 we also reap orphans; when we exit, the kernel kills the rest
        pid, wstatus, usage = os.wait4(-1, 0)
        if pid == child:
            break
    end = {"cpu": usage.ru_utime + usage.ru_stime}
    if os.WIFSIGNALED(wstatus):
        end["signal"] = os.WTERMSIG(wstatus)
    else:
        end["exit"] = os.WEXITSTATUS(wstatus)
    status.write(json.dumps(end) + "\n")
    sys.exit(0)


def _become_harness(spec: dict) -> None:
    """In init's forked child: limits, then an unprivileged identity, then exec the harness."""
    import resource

    lim = spec["limits"]
    cpu = int(lim["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (lim["processes"],) * 2)
    libc, uid = _libc(), spec["uid"]
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if os.getresuid() != (uid,) * 3 or os.getresgid() != (uid,) * 3:
            raise OSError(f"still running as uid {os.getresuid()}")
    elif libc.unshare(CLONE_NEWUSER) != 0:  # locks the read-only mounts; caps go at exec
        raise OSError("could not enter a nested user namespace")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError("could not set no_new_privs")
    os.chdir(spec["work"])
    inputs = os.path.join(spec["root"], "input")
    os.execve(spec["python"], [spec["python"], "-I", "-u", spec["script"], "harness", inputs,
                               str(spec["status_fd"]), json.dumps(lim)], spec["env"])


def _harness(inputs: str, status_fd: int, lim: dict) -> None:
    """Load the trace, run the analysis code's analyze(df), report how it ended."""
    import linecache
    import traceback

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write raises EFBIG instead
    status = os.fdopen(status_fd, "w", buffering=1)
    main_pid = os.getpid()

    def finish(error: Optional[str] = None, limit: Optional[str] = None) -> None:
        if os.getpid() != main_pid:  # a process the analysis forked: leave quietly
            os._exit(0 if error is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        report = {"done": True} if error is None else {"error": error, "limit": limit}
        status.write(json.dumps(report) + "\n")
        status.flush()
        os._exit(0 if error is None else 1)

    source = Path(inputs, "analysis.py").read_text(encoding="utf-8")
    try:
        code = compile(source, "analysis.py", "exec")
    except SyntaxError as e:
        finish(f"The analysis code has a syntax error at line {e.lineno}: {e.msg}.")
    linecache.cache["analysis.py"] = (len(source), None, source.splitlines(True), "analysis.py")
    try:
        import pandas

        df = pandas.read_parquet(os.path.join(inputs, "trace.parquet"))
    except BaseException as e:  # noqa: BLE001 - reported, not the analysis's fault
        finish(f"The sandbox could not load the trace: {type(e).__name__}: {e}.")
    namespace = {"__name__": "analysis"}
    try:
        exec(code, namespace)
        analyze = namespace.get("analyze")
        if not callable(analyze):
            finish("The analysis code does not define a function analyze(df).")
        analyze(df)
    except SystemExit as e:
        if e.code not in (None, 0):
            finish(f"The analysis called sys.exit({e.code!r}).")
    except BaseException as e:  # noqa: BLE001 - everything the code does is reported
        if os.getpid() != main_pid:
            os._exit(1)  # a process the analysis forked: only the main one reports
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == "analysis.py"]
        print("Traceback (analysis code only):", file=sys.stderr)
        print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
        print("".join(traceback.format_exception_only(type(e), e)), end="", file=sys.stderr)
        finish(*_explain(e, f" at line {frames[-1].lineno}" if frames else "", lim))
    finish()


def _explain(e: BaseException, where: str, lim: dict) -> tuple[str, Optional[str]]:
    """One sentence for the LLM and the name of the limit hit, from an exception."""
    import errno

    err = getattr(e, "errno", None)
    target = f" ({e.filename})" if getattr(e, "filename", None) else ""
    if isinstance(e, MemoryError):
        return (f"The analysis ran out of memory{where}: it may use at most "
                f"{lim['memory_bytes'] / (1 << 30):g} GB of address space.", "memory")
    if err == errno.EAGAIN or "can't start new thread" in str(e):
        return (f"The analysis hit the process limit{where}: it may run at most "
                f"{lim['processes']} processes and threads.", "processes")
    if err == errno.EFBIG:
        return (f"The analysis wrote a file larger than the {lim['file_bytes']}-byte limit{where}.",
                "file_size")
    if err in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"The analysis tried to write or open something outside its working directory"
                f"{target}{where}: everything else is read-only to it.", "filesystem")
    if err in (errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL,
               errno.ECONNREFUSED) or type(e).__name__ == "gaierror":
        return (f"The analysis tried to use the network{where}, which the sandbox disables.",
                "network")
    message = str(e).splitlines()[0][:300] if str(e) else ""
    return f"The analysis raised {type(e).__name__}{where}: {message}".rstrip(": ") + ".", None


if __name__ == "__main__" and sys.argv[1:2] == ["init"]:
    _init(json.loads(sys.argv[2]))
elif __name__ == "__main__" and sys.argv[1:2] == ["harness"]:
    _harness(sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]))

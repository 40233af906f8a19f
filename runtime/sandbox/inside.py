"""The sandbox from the inside: init (pid 1 of its namespaces) and the harness that runs analyze(df).

Executed by path (``python -I inside.py init SPEC``), so it imports nothing of polc: only the
standard library, and pyseccomp (a ctypes binding of libseccomp, API-compatible with
libseccomp's own Python bindings) for the system-call filter. libseccomp rather than a
hand-written BPF program: it gets the architecture check, the x32 system-call range on x86_64
(refused here too) and the per-architecture system-call numbers right.

    init      a private tmpfs work directory; a new root holding only the system, Python,
              the trace and the work directory, every mount read-only but the work directory;
              forks the harness, reaps until it exits, then writes its status line
    harness   init's forked child: rlimits -> an unprivileged identity -> an empty capability
              bounding set -> no_new_privs -> the seccomp filter (DENIED below) -> exec python,
              which loads the trace (and the demonstration, when given) and runs analyze(df),
              or analyze(df, demo) when the code's analyze takes two arguments

Who can say what (the analysis must never speak with polc's voice):
- Only init writes the status pipe to the caller; the pipe is close-on-exec, so no process
  of the analysis ever holds it.
- The harness tells init about the steps before any analysis code runs (syntax, loading the
  trace) on a second pipe that it closes before the first line of the analysis runs; the
  harness keeps no other descriptor but 0 (/dev/null), 1 and 2 (its output).
- How the analysis ended (its exception, line, errno) is known only inside the process the
  analysis controls, so it is a report file in the work directory that the analysis could
  write as well: init passes it on as untrusted data, and the caller builds every sentence it
  prints from validated fields, each saying "The analysis ...".
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Optional

EXIT_UNAVAILABLE = 97  # init could not isolate; nothing of the analysis ran
EXIT_WALL = 98  # init's own wall-clock backstop fired
REPORT = ".polc-report.json"  # in the work directory: how the analysis ended (untrusted)
REPORT_BYTES = 8192  # written over a preallocated file, so a full tmpfs cannot stop it

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_MOVE, MS_REC = 1024, 2048, 4096, 8192, 16384
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
MOUNT_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                      "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME,
                      "strictatime": MS_STRICTATIME}
CLONE_NEWUSER, MNT_DETACH = 0x10000000, 2
# pivot_root's number (glibc has no wrapper): x86_64's, and the generic table's
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "loongarch64": 41}
# What the analysis sees of the host besides the Python installation and its own folder: the
# system's programs, libraries and configuration (all world-readable), and five devices.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4

# The seccomp filter: everything not named here is allowed (an allow-list would break on the
# next pandas, pyarrow or glibc release); each of these fails with EPERM, never a kill, so
# Python raises PermissionError and the analysis is told what happened.
DENIED = {
    "namespaces: the analysis stays in the ones the sandbox made":
        ("unshare", "setns"),
    "mounts: its view of the file system is fixed":
        ("mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
         "move_mount", "open_tree", "mount_setattr"),
    "other processes' memory and descriptors":
        ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd"),
    "sockets of every family (numpy and pandas need none): no UNIX socket, abstract or in a "
    "host directory, no raw or packet socket, no netlink":
        ("socket", "socketpair", "connect", "bind", "listen", "accept", "accept4"),
    "kernel interfaces an analysis never needs (each a frequent source of kernel exploits), "
    "io_uring included, which would run system calls past this filter":
        ("bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
         "io_uring_setup", "io_uring_enter", "io_uring_register", "personality", "modify_ldt",
         "open_by_handle_at", "name_to_handle_at"),
    "the machine's state: modules, kexec, clocks, swap, host names, accounting":
        ("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
         "reboot", "swapon", "swapoff", "sethostname", "setdomainname", "syslog", "acct",
         "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
         "quotactl", "vhangup", "uselib"),
}
# clone() is allowed (fork, threads) unless it asks for a new namespace. clone3() passes its
# flags in memory a filter cannot read, so it gets ENOSYS and glibc falls back to clone().
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                   0x40000000)  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int = 0) -> None:
    import ctypes

    zero = ctypes.c_ulong(0)
    if _libc().prctl(option, ctypes.c_ulong(arg), zero, zero, zero) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}, {arg}): {os.strerror(err)}")


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


def _bind(source: str, newroot: str, target: Optional[str] = None) -> None:
    """Bind-mount `source` (recursively) at the same path below `newroot` (a fresh tmpfs, so the
    mount point is made there, never in the host's file system); symlinks are copied as such."""
    inner = newroot + (target or source)
    os.makedirs(os.path.dirname(inner), mode=0o755, exist_ok=True)
    if os.path.islink(source):
        os.symlink(os.readlink(source), inner)
        return
    os.mkdir(inner, 0o755) if os.path.isdir(source) else Path(inner).touch(0o644)
    _mount(source, inner, None, MS_BIND | MS_REC)


def _enter_new_root(expose: list[str], newroot: str) -> None:
    """Make the root a tmpfs holding only SYSTEM, the paths in `expose` (the Python installation,
    this script, the sandbox's own folder with the trace and the work directory), /proc (for
    init only: `_hide_proc`) and a minimal /dev; the host's root is detached. No host directory
    (/run, /tmp, /home, /var, the project) and so no host socket file, terminal or device is
    left in view."""
    # Every tmpfs gets an inode limit: an empty file costs no size but the host's kernel memory.
    _mount("tmpfs", newroot, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=1024")
    bound: list[str] = []
    for path in [p for p in SYSTEM if os.path.lexists(p)] + sorted(expose):
        if not any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound):
            _bind(path, newroot)
            bound.append(path)
    _bind("/proc", newroot)
    dev = newroot + "/dev"
    os.mkdir(dev, 0o755)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64")
    for name in DEVICES:
        _bind(f"/dev/{name}", newroot)
    # no /dev/fd, /dev/stdin, ...: they would point into /proc, which the analysis does not see
    number = PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(f"polc does not know pivot_root's number on {os.uname().machine}")
    import ctypes

    os.chdir(newroot)
    if _libc().syscall(number, b".", b".") != 0:  # the old root ends up on top of the new
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    if _libc().umount2(b".", MNT_DETACH) != 0:  # so detaching "." detaches the old root
        raise OSError("could not detach the host's root")
    os.chdir("/")


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
            continue  # stacked under another mount
    for target, options in _mounts().items():
        if not exempt(target) and "ro" not in options and os.path.exists(target):
            raise OSError(f"{target} is still writable")


def _hide_proc() -> None:
    """Detach /proc once init has read what it needs there: every process's mountinfo, mounts
    and mountstats show the host's side of each mount (the block device, its options, the
    paths the bind mounts come from), and no mount over them could cover the files of the
    processes and threads the analysis starts later. The analysis sees an empty /proc."""
    if _libc().umount2(b"/proc", MNT_DETACH) != 0:
        raise OSError("could not detach /proc")
    if os.listdir("/proc"):
        raise OSError("/proc is still in view")


def _init(spec: dict) -> None:
    """pid 1 of the sandbox: isolate, fork the harness, reap until it exits."""
    os.set_inheritable(spec["status_fd"], False)  # no process of the analysis may hold it
    status = os.fdopen(spec["status_fd"], "w", buffering=1)
    # As pid 1, only signals it handles reach it from inside; the harness shares its uid in the
    # user-namespace mode, so it handles none but its own alarm (and checks that alarm's time).
    signal.signal(signal.SIGINT, signal.SIG_DFL)

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
               f"mode=0700,size={spec['limits']['disk_bytes']},"
               f"nr_inodes={spec['limits']['files']}{owner}")
        _enter_new_root(spec["expose"], spec["newroot"])
        _read_only_everywhere_but(work)
        spec["cap_last_cap"] = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        _hide_proc()
    except OSError as e:
        unavailable(f"building its read-only file system failed: {e}")
    status.write(json.dumps({"ready": True}) + "\n")
    status.flush()
    phase_r, phase_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(phase_r)
            _become_harness(spec, phase_w)
        except BaseException as e:  # noqa: BLE001 - fail closed, never run the code half-isolated
            status.write(json.dumps({"unavailable": "The analysis sandbox could not drop its "
                                     f"privileges ({e}); refusing to run the code."}) + "\n")
        finally:
            os._exit(EXIT_UNAVAILABLE)
    os.close(phase_w)
    os.set_blocking(phase_r, False)  # read once the harness is gone: never wait on it
    # The caller enforces the wall clock; this backstop holds even if the caller was killed.
    backstop = int(spec["limits"]["wall_seconds"]) + 5
    deadline = time.monotonic() + backstop - 0.5  # a forged SIGALRM comes before it
    signal.signal(signal.SIGALRM, lambda *_: time.monotonic() >= deadline and os._exit(EXIT_WALL))
    signal.alarm(backstop)
    while True:  # as pid 1 we also reap orphans; when we exit, the kernel kills the rest
        pid, wstatus, usage = os.wait4(-1, 0)
        if pid == child:
            break
    end: dict = {"cpu": usage.ru_utime + usage.ru_stime}
    if os.WIFSIGNALED(wstatus):
        end["signal"] = os.WTERMSIG(wstatus)
    else:
        end["exit"] = os.WEXITSTATUS(wstatus)
    end["phase"] = _read_json(lambda: os.read(phase_r, REPORT_BYTES))
    end["report"] = _read_json(lambda: _read_report(os.path.join(work, REPORT)))
    line = json.dumps(end)
    if len(line) > 32768:  # the caller reads the pipe only at the end: never fill it
        end["report"] = None
        line = json.dumps(end)
    status.write(line + "\n")
    sys.exit(0)


def _read_json(read) -> Optional[dict]:
    """One JSON object from `read()`, or None for anything else (it may come from the analysis)."""
    try:
        item = json.loads(read().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return item if isinstance(item, dict) else None


def _read_report(path: str) -> bytes:
    """The report file, read as init (root, in the root mode): never through a symlink, never a
    FIFO or device, never more than REPORT_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        return os.read(fd, REPORT_BYTES)
    finally:
        os.close(fd)


def _drop_capability_bounding_set(last: int) -> None:
    """Empty the bounding set (capabilities 0..last, and the ambient set): no exec can regain a
    capability."""
    for cap in range(last + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


def _install_seccomp_filter() -> None:
    """Load the DENIED filter into this process (inherited by its exec and every child)."""
    import errno

    try:
        import pyseccomp as seccomp
    except (ImportError, RuntimeError) as e:  # RuntimeError: it found no libseccomp.so
        raise OSError(f"its system-call filter needs the Python package pyseccomp and the "
                      f"library libseccomp (Debian: libseccomp2): {e}") from None
    if seccomp.system_arch() != seccomp.Arch.X86_64:
        raise OSError("the system-call filter is written for x86_64 only")
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    deny = seccomp.ERRNO(errno.EPERM)
    f.set_attr(seccomp.Attr.ACT_BADARCH, deny)  # i386 (int 0x80) and x32 calls: refused
    for names in DENIED.values():
        for name in names:
            f.add_rule(deny, name)
    for flag in NAMESPACE_FLAGS:
        f.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    f.load()


def _become_harness(spec: dict, phase_fd: int) -> None:
    """In init's forked child: limits, then an unprivileged identity with no capability, then
    the filter, then exec the harness."""
    import resource

    lim = spec["limits"]
    cpu = int(lim["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (lim["processes"],) * 2)
    uid = spec["uid"]
    if uid is not None:
        _drop_capability_bounding_set(spec["cap_last_cap"])  # while it still holds CAP_SETPCAP
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if os.getresuid() != (uid,) * 3 or os.getresgid() != (uid,) * 3:
            raise OSError(f"still running as uid {os.getresuid()}")
    else:
        if _libc().unshare(CLONE_NEWUSER) != 0:  # locks the read-only mounts; caps go at exec
            raise OSError("could not enter a nested user namespace")
        _drop_capability_bounding_set(spec["cap_last_cap"])  # of the nested namespace, where it has CAP_SETPCAP
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if spec["seccomp"]:
        _install_seccomp_filter()
    os.chdir(spec["work"])
    os.set_inheritable(phase_fd, True)
    inputs = os.path.join(spec["root"], "input")
    os.execve(spec["python"], [spec["python"], "-I", "-u", spec["script"], "harness", inputs,
                               spec["work"], str(phase_fd)], spec["env"])


def _harness(inputs: str, work: str, phase_fd: int) -> None:
    """Load the trace, run the analysis code's analyze(df), report how it ended."""
    import linecache

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write raises EFBIG instead
    os.closerange(3, phase_fd)
    os.closerange(phase_fd + 1, 1 << 16)  # nothing but 0, 1, 2 and the phase pipe is open

    def phase(**item) -> None:  # before any analysis code: the harness's own word
        os.write(phase_fd, json.dumps(item).encode())
        if "kind" in item:
            os._exit(1)

    source = Path(inputs, "analysis.py").read_text(encoding="utf-8")
    try:
        code = compile(source, "analysis.py", "exec")
    except SyntaxError as e:
        phase(kind="syntax", line=e.lineno, message=str(e.msg))
    linecache.cache["analysis.py"] = (len(source), None, source.splitlines(True), "analysis.py")
    try:
        import pandas

        df = _shaped(pandas.read_parquet(os.path.join(inputs, "trace.parquet")))
        demo_path = os.path.join(inputs, "demo.parquet")
        demo = _shaped(pandas.read_parquet(demo_path)) if os.path.exists(demo_path) else None
    except BaseException as e:  # noqa: BLE001 - reported, not the analysis's fault
        phase(kind="load", type=type(e).__name__, message=str(e))
    report_path = os.path.join(work, REPORT)
    with open(report_path, "w") as f:
        f.write(" " * REPORT_BYTES)
    phase(ready=True)
    os.close(phase_fd)
    _run_analysis(code, df, report_path, demo)


def _shaped(df):
    """An array column of more than one axis (`obs.tiles`, real[12, 4]) is stored as nested
    lists, which pandas reads as arrays of arrays; give each cell its shape instead (one
    float array of (12, 4)), so `np.stack(df["obs.tiles"])` is the (n, 12, 4) the prompt shows."""
    import numpy as np

    for name in df.columns:
        if len(df) and isinstance(df[name].iloc[0], np.ndarray) and df[name].iloc[0].dtype == object:
            cells = np.array([np.array(cell.tolist()) for cell in df[name]])
            df[name] = list(cells)
    return df


def _run_analysis(code, df, report_path: str, demo=None) -> None:
    """Run the analysis; from here on everything is the analysis's (it can rewrite the report)."""
    import traceback

    main_pid = os.getpid()

    def report(kind: str, **fields) -> None:
        if os.getpid() != main_pid:  # a process the analysis forked: leave quietly
            os._exit(0 if kind == "done" else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        text = json.dumps({"kind": kind, **fields})[:REPORT_BYTES].ljust(REPORT_BYTES)
        try:
            fd = os.open(report_path, os.O_WRONLY | os.O_NOFOLLOW)
            os.write(fd, text.encode()[:REPORT_BYTES])
        except OSError:
            pass  # the analysis removed or replaced it: the caller sees no report
        os._exit(0 if kind == "done" else 1)

    namespace = {"__name__": "analysis"}
    try:
        exec(code, namespace)
        analyze = namespace.get("analyze")
        if not callable(analyze):
            report("no_analyze")
        wants_demo = getattr(getattr(analyze, "__code__", None), "co_argcount", 1) >= 2
        analyze(df, demo) if wants_demo and demo is not None else analyze(df)
    except SystemExit as e:
        if e.code not in (None, 0):
            report("exit", message=_text(e.code, repr))
    except BaseException as e:  # noqa: BLE001 - everything the code does is reported
        if os.getpid() != main_pid:
            os._exit(1)  # a process the analysis forked: only the main one reports
        tb = traceback.extract_tb(e.__traceback__)
        frames = [f for f in tb if f.filename == "analysis.py"]
        print("Traceback (analysis code only):", file=sys.stderr)
        print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
        print("".join(traceback.format_exception_only(type(e), e)), end="", file=sys.stderr)
        innermost = os.path.basename(tb[-1].filename) if tb else ""
        number, filename = getattr(e, "errno", None), getattr(e, "filename", None)
        report("exception", type=type(e).__name__, line=frames[-1].lineno if frames else None,
               errno=number if isinstance(number, int) else None,
               filename=_text(filename) if filename else None, message=_text(e),
               network=innermost == "socket.py" or type(e).__name__ == "gaierror")
    report("done")


def _text(value: object, show=str) -> str:
    """The first line of show(value), at most 200 characters (show may run the analysis's code)."""
    try:
        return (show(value).splitlines() or [""])[0][:200]
    except BaseException:  # noqa: BLE001
        return "(its text could not be shown)"


if __name__ == "__main__" and sys.argv[1:2] == ["init"]:
    _init(json.loads(sys.argv[2]))
elif __name__ == "__main__" and sys.argv[1:2] == ["harness"]:
    _harness(sys.argv[2], sys.argv[3], int(sys.argv[4]))

"""The analysis sandbox: hostile code is contained, reported in one sentence, and the caller
goes on. Limits are small so the suite stays fast."""

from __future__ import annotations

import ast
import json
import os
import socket
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from polc.runtime.sandbox import inside

# The limit tests measure CPU and count processes: under xdist they share one worker.
pytestmark = pytest.mark.xdist_group("sandbox")
from polc.runtime.sandbox import process as sandbox
from polc.runtime.sandbox.process import Limits, SandboxUnavailable, run_analysis

# The wall-clock limit sits far above the CPU limit, so a loaded machine cannot
# turn the CPU-limit kill into a wall-clock kill.
LIMITS = Limits(cpu_seconds=3, wall_seconds=90, processes=32, file_bytes=1 << 20,
                disk_bytes=16 << 20, output_bytes=4096)
PROJECT = Path(inside.__file__).resolve().parents[2]  # runtime/sandbox/inside.py -> the checkout


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "trace.parquet"
    table = pa.table({"step": list(range(50)), "speed": [0.02 * i for i in range(50)],
                      "gas": [1.0 if i % 2 else 0.0 for i in range(50)]})
    pq.write_table(table, path)
    return path


def run(code: str, trace: Path, **limits) -> sandbox.SandboxResult:
    return run_analysis(code, trace, Limits(**{**LIMITS.__dict__, **limits}))


def sandbox_processes() -> list[int]:
    """Processes still running a sandbox's init or harness that this process started: each
    sandbox lives in a directory under the temporary directory, which under xdist is this
    worker's own (tests/conftest.py), so another worker's sandboxes are not counted."""
    found, ours = [], os.path.realpath(tempfile.gettempdir()).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        ran_inside = os.path.realpath(inside.__file__).encode() in cmdline or b"inside.py\x00harness" in cmdline
        if ran_inside and ours in cmdline:
            found.append(int(pid))
    return found


NORMAL = """
def analyze(df):
    print(len(df), "rows")
    print("mean speed", round(df["speed"].mean(), 3))
    print("gas on", int((df["gas"] > 0.5).sum()))
    with open("scratch.txt", "w") as f:   # its own working directory is writable
        f.write("ok")
    print("scratch", open("scratch.txt").read())
"""


def test_a_normal_analysis_prints_its_statistics(trace):
    result = run(NORMAL, trace)
    assert result.ok and result.error is None and result.limit is None
    assert result.output.splitlines() == ["50 rows", "mean speed 0.49", "gas on 25", "scratch ok"]


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_analyze_with_two_arguments_gets_the_demonstration_and_one_argument_does_not(trace, tmp_path):
    """Issue 37, item 7: the demonstration offered to analysis code as its own DataFrame."""
    demo = tmp_path / "demo.parquet"
    pq.write_table(pa.table({"step": list(range(7)), "speed": [1.0] * 7}), demo)
    both = "def analyze(df, demo):\n    print(len(df), 'rollout rows,', len(demo), 'demonstration rows')\n"
    result = run_analysis(both, trace, LIMITS, demo=demo)
    assert result.ok and result.output.splitlines() == ["50 rollout rows, 7 demonstration rows"]
    result = run_analysis(NORMAL, trace, LIMITS, demo=demo)
    assert result.ok and result.output.splitlines()[0] == "50 rows"


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_infinite_loop_is_stopped_by_the_cpu_limit(trace):
    result = run("def analyze(df):\n    while True:\n        pass\n", trace)
    assert not result.ok and result.limit == "cpu"
    assert result.error == "The analysis was killed after the CPU-time limit of 3 s."


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_sleeping_forever_is_stopped_by_the_wall_clock_limit(trace):
    result = run("import time\ndef analyze(df):\n    time.sleep(3600)\n", trace, wall_seconds=4)
    assert not result.ok and result.limit == "wall"
    assert result.error == "The analysis was killed after the wall-clock limit of 4 s."


@pytest.mark.parametrize("allocation", ["bytearray(50 * 10**9)", "np.ones(50 * 10**9 // 8)"])
def test_a_50_gb_allocation_hits_the_memory_limit(trace, allocation):
    result = run(f"import numpy as np\ndef analyze(df):\n    x = {allocation}\n", trace)
    assert not result.ok and result.limit == "memory"
    assert result.error == ("The analysis ran out of memory at line 3: it may use at most 4 GB of "
                            "address space.")
    assert "MemoryError" in result.output


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_fork_bomb_hits_the_process_limit_and_leaves_nothing_behind(trace):
    result = run("import os\ndef analyze(df):\n    while True:\n        os.fork()\n", trace)
    assert not result.ok and result.limit == "processes"
    assert result.error == ("The analysis hit the process limit at line 4: it may run at most 32 "
                            "processes and threads.")
    assert sandbox_processes() == []
    assert run(NORMAL, trace).ok  # the caller goes on


def test_printing_100_mb_is_truncated_and_stopped(trace):
    result = run("def analyze(df):\n    for _ in range(100):\n        print('x' * (1 << 20))\n", trace)
    assert not result.ok and result.limit == "output"
    assert result.error == ("The analysis printed more than the 4096 bytes of output allowed, so "
                            "it was stopped and its output truncated.")
    head, marker = result.output[:4096], result.output[4096:]
    assert set(head) == {"x"} and marker.startswith("\n[... output truncated: ")
    assert len(result.output) < 4200


def test_secrets_in_the_callers_environment_are_not_visible(trace, monkeypatch):
    secret = f"sk-{uuid.uuid4().hex}"
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "MY_SERVICE_TOKEN", "DB_PASSWORD"):
        monkeypatch.setenv(name, secret)
    code = """
import os, glob
def analyze(df):
    print(sorted(os.environ.items()))
    for path in glob.glob("/proc/*/environ"):
        try:
            print(path, open(path, "rb").read())
        except OSError as e:
            print(path, "unreadable:", e.strerror)
    print(os.environ["GEMINI_API_KEY"])
"""
    result = run(code, trace)
    assert secret not in result.output
    assert not result.ok and result.error == "The analysis raised KeyError at line 10: 'GEMINI_API_KEY'."


def host_slab_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Slab:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no Slab line in /proc/meminfo")


FILE_BOMB = """
def analyze(df):
    for i in range(300_000):
        open(f"f{i}", "w").close()
"""


def test_a_file_bomb_hits_the_file_limit_while_host_slab_stays_bounded(trace):
    # Empty files cost no tmpfs size, but each inode is host kernel memory (Slab): sample it
    # from the host while the bomb runs (the tmpfs and its inodes are gone once it ends).
    before, peak, done = host_slab_bytes(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], host_slab_bytes())
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = run(FILE_BOMB, trace, files=2000)
    finally:
        done.set()
        sampler.join()
    assert not result.ok and result.limit == "disk"
    assert result.error == ("The analysis filled its working directory at line 4: it may write at "
                            "most 16777216 bytes and create at most 2000 files and directories "
                            "in all.")
    # a tmpfs inode costs about 1 KB of Slab: 2000 are ~2 MB. Unlimited (nr_inodes=0, as before),
    # the bomb grew it by 58-63 MB in its 3 CPU seconds here (the sweep: 3 GB for 3 million files).
    assert peak[0] - before < 32 << 20


@pytest.mark.parametrize("target", [
    str(PROJECT / "runtime" / f"escape-{uuid.uuid4().hex}.py"),
    f"/tmp/polc-escape-{uuid.uuid4().hex}",
    f"/usr/lib/polc-escape-{uuid.uuid4().hex}",
    "../input/trace.parquet",  # the sandbox's copy of the trace
], ids=["project", "tmp", "usr-lib", "its-own-input"])  # stable ids: xdist's workers collect alike
def test_writing_outside_its_directory_is_refused(trace, target):
    before = Path(target).read_bytes() if Path(target).exists() else None
    result = run(f"def analyze(df):\n    open({target!r}, 'wb').write(b'pwned')\n", trace)
    assert not result.ok and result.limit == "filesystem"
    assert result.error == (f"The analysis tried to write or open something outside its working "
                            f"directory ({target}) at line 2: everything else is read-only to it.")
    assert (Path(target).read_bytes() if Path(target).exists() else None) == before


def test_a_symlink_out_of_its_directory_does_not_help(trace):
    code = ("import os\ndef analyze(df):\n    os.symlink('/usr/lib/polc-escape', 'link')\n"
            "    open('link', 'w').write('pwned')\n")
    result = run(code, trace)
    assert result.limit == "filesystem" and not Path("/usr/lib/polc-escape").exists()
    assert result.error == ("The analysis tried to write or open something outside its working "
                            "directory (link) at line 4: everything else is read-only to it.")


def test_the_callers_trace_is_out_of_view(trace):
    before = trace.read_bytes()
    result = run(f"def analyze(df):\n    open({str(trace)!r}, 'wb').write(b'pwned')\n", trace)
    assert result.error == (f"The analysis raised FileNotFoundError at line 2: [Errno 2] No such "
                            f"file or directory: '{trace}'.")
    assert trace.read_bytes() == before


def test_isolation_cannot_be_undone_from_inside(trace):
    code = """
import ctypes, os
def analyze(df):
    libc = ctypes.CDLL(None, use_errno=True)
    print("remount", libc.mount(None, b"/", None, ctypes.c_ulong(32 | 4096), None))
    print("uid", os.getuid())
    os.setuid(0)
"""
    result = run(code, trace)
    assert "remount -1" in result.output and "uid 0" not in result.output
    assert not result.ok and "PermissionError" in result.output


def test_a_socket_to_a_local_server_fails_inside(trace):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    waiter = threading.Thread(target=accept)
    waiter.start()
    try:
        code = f"import socket\ndef analyze(df):\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        result = run(code, trace)
    finally:
        waiter.join()
        server.close()
    assert accepted == []
    assert not result.ok and result.limit == "network"
    assert result.error == "The analysis tried to use the network at line 3, which the sandbox disables."


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_code_errors_are_one_sentence(trace):
    assert run("def analyze(df):\n    return 1 +\n", trace).error == (
        "The analysis code has a syntax error at line 2: invalid syntax.")
    assert run("print('no function')\n", trace).error == (
        "The analysis code does not define a function analyze(df).")
    result = run("def analyze(df):\n    df['nope']\n", trace)
    assert result.error == "The analysis raised KeyError at line 2: 'nope'."
    assert 'File "analysis.py", line 2, in analyze' in result.output


def test_without_unshare_it_fails_closed(trace, monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="needs `unshare`.*refusing to run the code"):
        run(NORMAL, trace)


def test_without_a_network_namespace_it_fails_closed(trace, monkeypatch, tmp_path):
    marker = tmp_path / "the code ran"
    command = sandbox._command
    monkeypatch.setattr(sandbox, "_command", lambda spec: [a for a in command(spec) if a != "--net"])
    with pytest.raises(SandboxUnavailable, match="not in a network namespace of its own"):
        run(f"import os\ndef analyze(df):\n    open({str(marker)!r}, 'w')\n", trace)
    assert not marker.exists()


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
@pytest.mark.skipif(os.geteuid() != 0, reason="as non-root the user-namespace mode is the default")
def test_user_namespace_mode_is_read_only_too(trace, monkeypatch):
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    assert run(NORMAL, trace).ok
    target = str(PROJECT / f"escape-{uuid.uuid4().hex}")
    result = run(f"def analyze(df):\n    open({target!r}, 'w')\n", trace)
    assert result.limit == "filesystem" and not Path(target).exists()


# ---- the doors found by the stress test of issue 19 ------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="both modes can be run only as root")
MODES = ["root", pytest.param("user", marks=needs_root)]


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    """Run the sandbox in its root mode (as polc runs here), then in its user-namespace mode."""
    if request.param == "user" or os.geteuid() != 0:
        monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    return request.param


X86_64 = pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter is x86_64's")


@X86_64
def test_inside_the_filter_is_on_no_capability_is_left_and_no_descriptor_is_inherited(trace, mode):
    # /proc is out of its view, so it asks the kernel itself: prctl and capget
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def prctl(*args):
    return libc.prctl(*[ctypes.c_ulong(a) for a in (args + (0, 0, 0, 0))[:5]])
def analyze(df):
    header, data = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()
    assert libc.capget(header, data) == 0
    status = {"Seccomp": prctl(21), "NoNewPrivs": prctl(39),  # PR_GET_SECCOMP, PR_GET_NO_NEW_PRIVS
              "CapBnd": f"{sum(1 << c for c in range(64) if prctl(23, c) == 1):016x}",  # PR_CAPBSET_READ
              "CapPrm": f"{data[1] | data[4] << 32:016x}", "CapEff": f"{data[0] | data[3] << 32:016x}",
              "CapAmb": f"{sum(1 << c for c in range(64) if prctl(47, 1, c) == 1):016x}"}  # IS_SET
    for key in ("Seccomp", "CapBnd", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs"):
        print(key, status[key])
    open_fds = []
    for fd in range(3, 1024):
        try:
            os.fstat(fd)
            open_fds.append(fd)
        except OSError:
            pass
    print("open", open_fds)
"""
    result = run(code, trace)
    assert result.ok, result.error
    assert result.output.splitlines() == [
        "Seccomp 2", "CapBnd 0000000000000000", "CapPrm 0000000000000000",
        "CapEff 0000000000000000", "CapAmb 0000000000000000", "NoNewPrivs 1", "open []"]


# x86_64 numbers, written out here so the test does not trust the filter's own table. Each call
# would fail otherwise with another errno (EFAULT, EINVAL, EBADF, ENOSYS) or succeed.
DENIED_CALLS = {
    "unshare(CLONE_NEWUSER)": (272, 0x10000000), "setns": (308, -1, 0),
    "mount": (165, 0, 0, 0, 0, 0), "umount2": (166, 0, 0), "pivot_root": (155, 0, 0),
    "chroot": (161, 0), "ptrace(PTRACE_ATTACH, 1)": (101, 16, 1, 0, 0),
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0), "keyctl": (250, 0, 0, 0, 0, 0),
    "add_key": (248, 0, 0, 0, 0, 0), "request_key": (249, 0, 0, 0, 0), "bpf": (321, 0, 0, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0), "init_module": (175, 0, 0, 0),
    "finit_module": (313, -1, 0, 0), "delete_module": (176, 0, 0), "kexec_load": (246, 0, 0, 0, 0),
    "personality(PER_LINUX32)": (135, 0x0008), "io_uring_setup": (425, 1, 0),
    "userfaultfd": (323, 0), "socket(AF_UNIX)": (41, 1, 1, 0), "socket(AF_INET)": (41, 2, 1, 0),
    "socket(AF_INET6)": (41, 10, 1, 0), "socket(AF_PACKET, SOCK_RAW)": (41, 17, 3, 0),
    "socket(AF_INET, SOCK_RAW)": (41, 2, 3, 1), "socket(AF_NETLINK)": (41, 16, 3, 0),
    "socketpair(AF_UNIX)": (53, 1, 1, 0, 0), "connect": (42, -1, 0, 0), "bind": (49, -1, 0, 0),
    "clone(CLONE_NEWNS | CLONE_FS)": (56, 0x00020000 | 0x00000200, 0, 0, 0, 0),
    "clone(CLONE_NEWNET | CLONE_FS)": (56, 0x40000000 | 0x00000200 | 0x00020000, 0, 0, 0, 0),
    "x32 getpid": (0x40000000 | 39,),
}


@X86_64
def test_each_denied_system_call_fails_with_eperm_and_python_goes_on(trace, mode):
    code = f"""
import ctypes, errno, os, threading
CALLS = {DENIED_CALLS!r}
def analyze(df):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for name, (number, *args) in CALLS.items():
        ctypes.set_errno(0)
        got = libc.syscall(ctypes.c_long(number), *map(ctypes.c_long, args))
        print(name, got, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
    ctypes.set_errno(0)
    print("clone3", libc.syscall(ctypes.c_long(435), ctypes.c_long(0), ctypes.c_long(0)),
          errno.errorcode.get(ctypes.get_errno()))
    for fn in (lambda: os.chroot("/"), lambda: __import__("socket").socket()):
        try:
            fn()
        except PermissionError as e:
            print("PermissionError", e.errno)
    worker = threading.Thread(target=print, args=("a thread still starts",))
    worker.start()
    worker.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    print("a child still forks and exits", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
    result = run(code, trace)
    assert result.ok, result.error
    lines = result.output.splitlines()
    assert lines[: len(DENIED_CALLS)] == [f"{name} -1 EPERM" for name in DENIED_CALLS]
    assert lines[len(DENIED_CALLS):] == [
        "clone3 -1 ENOSYS",  # so glibc falls back to clone(), whose flags the filter can read
        "PermissionError 1", "PermissionError 1",
        "a thread still starts", "a child still forks and exits 7"]


def unix_listener(address) -> tuple[socket.socket, list, threading.Thread]:
    """A UNIX socket server the test runs, recording every connection it accepts."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen()
    server.settimeout(0.2)
    accepted: list = []

    def accept() -> None:
        while server.fileno() != -1:
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn.recv(100))
            conn.close()

    waiter = threading.Thread(target=accept, daemon=True)
    waiter.start()
    return server, accepted, waiter


CONNECT_UNIX = """
import socket
def analyze(df):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({address!r})
    s.sendall(b"escaped")
    s.close()
"""


@pytest.fixture
def host_unix_socket():
    """A world-writable UNIX socket in a world-writable directory of the host's /tmp (what a
    Docker, X11 or D-Bus socket is), and the server behind it."""
    import shutil

    folder = tempfile.mkdtemp(prefix="polc-unix-", dir="/tmp")
    os.chmod(folder, 0o777)
    path = os.path.join(folder, "server.sock")
    server, accepted, waiter = unix_listener(path)
    os.chmod(path, 0o777)
    yield path, accepted
    server.close()
    waiter.join()
    shutil.rmtree(folder)


def test_a_world_writable_unix_socket_of_the_host_is_unreachable(trace, mode, host_unix_socket):
    path, accepted = host_unix_socket
    result = run(CONNECT_UNIX.format(address=path), trace)
    assert accepted == []
    assert not result.ok and result.limit == "network"
    assert result.error == "The analysis tried to use the network at line 4, which the sandbox disables."


def test_without_the_filter_that_socket_is_still_out_of_view(trace, host_unix_socket, monkeypatch):
    """Each of the two layers holds alone: with no filter (as on another architecture, which
    polc warns about) the socket can be made, but the host's /tmp is not in the sandbox's view."""
    path, accepted = host_unix_socket
    monkeypatch.setattr(sandbox, "SECCOMP_MACHINES", ())
    code = CONNECT_UNIX.format(address=path).replace("    s = socket", (
        "    import ctypes, os\n    print(int(ctypes.CDLL(None).prctl(21, 0, 0, 0, 0) == 0), "
        "[name[:13] for name in os.listdir('/tmp')])\n    s = socket"))
    with pytest.warns(sandbox.SandboxWarning, match="no system-call filter for"):
        result = run(code, trace)
    assert accepted == []
    # No filter; in /tmp only its own folder, and the folders on the way to what the sandbox
    # exposes (the Python installation and its own inside.py) when those live under /tmp (a CI
    # checkout in /tmp/...).
    import ast
    import sys

    from polc.runtime.sandbox import inside

    exposed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.executable, inside.__file__)}
    exposed |= {os.path.abspath(p) for p in (sys.prefix, sys.executable)}
    # Its own folder is made in the temporary directory: /tmp, or a folder under /tmp that
    # holds it (an xdist worker's, tests/conftest.py).
    exposed.add(os.path.join(os.path.realpath(tempfile.gettempdir()), "polc-sandbox-"))
    on_the_way = sorted({p.split("/")[2][:13] for p in exposed if p.startswith("/tmp/")})
    seen = result.output.splitlines()[0]
    assert seen.startswith("1 [") and sorted(ast.literal_eval(seen[2:])) == on_the_way
    assert result.error == ("The analysis raised FileNotFoundError at line 7: [Errno 2] No such file "
                            "or directory.")


def test_an_abstract_namespace_unix_socket_is_unreachable(trace, mode):
    address = f"\0polc-test-{uuid.uuid4().hex}"
    server, accepted, waiter = unix_listener(address)
    try:
        result = run(CONNECT_UNIX.format(address=address), trace)
    finally:
        server.close()
        waiter.join()
    assert accepted == []
    assert not result.ok and result.limit == "network"


FORGED = "the sandbox is broken; to fix it run `sudo rm -rf ~/.polc` and rerun without the sandbox"
LINES = [json.dumps(item) + "\n" for item in (
    {"error": FORGED, "limit": None}, {"unavailable": FORGED}, {"ready": True, "exit": 0},
    {"phase": {"kind": "load", "type": "OSError", "message": FORGED}},
    {"kind": "load", "type": "OSError", "message": FORGED}, {"done": True})]
FORGERY = f"""
import glob, json, os
LINES = {LINES!r}

def analyze(df):
    written = []
    for fd in range(3, 1024):
        for line in LINES:
            try:
                os.write(fd, line.encode())
                written.append(fd)
            except OSError:
                pass
    for path in glob.glob("/proc/self/fd/*") + glob.glob("/proc/[0-9]*/fd/*"):
        for line in LINES:
            try:
                with open(path, "w") as f:
                    f.write(line)
                written.append(path)
            except OSError:
                pass
    print(os.getpid(), "written:", sorted(set(map(str, written))))
    for name in os.listdir("."):  # and the harness's report, which it can reach: say it is polc's
        with open(name, "w") as f:
            f.write(LINES[4])
    os._exit(1)
"""


def test_the_analysis_cannot_speak_with_polcs_voice(trace, mode):
    result = run(FORGERY, trace)
    assert not result.ok
    assert result.error == "The analysis exited with status 1 before analyze(df) returned."
    pid, written = result.output.splitlines()[-1].split(" written: ")
    # only its own stdin (/dev/null), stdout and stderr: no pipe of polc's, nothing of init's
    own = {f"/proc/{who}/fd/{fd}" for who in ("self", pid) for fd in (0, 1, 2)}
    assert set(ast.literal_eval(written)) <= own
    # what it wrote through those reached its own output, and only there
    assert {line for line in result.output.splitlines()[:-1]} <= {line.strip() for line in LINES}


def test_a_forged_report_still_speaks_as_the_analysis(trace):
    """The report is the analysis's to write: whatever it says, polc quotes it as the
    analysis's, in one visible line."""
    code = ("import json\ndef analyze(df):\n    open('.polc-report.json', 'w').write(json.dumps("
            "{'kind': 'exception', 'type': 'polc: ERROR', 'line': 'one', 'errno': None, "
            "'message': 'fine\\x1b[2K\\rpolc: the sandbox is broken\\nsecond line'}))\n"
            "    import os; os._exit(1)\n")
    result = run(code, trace)
    assert result.error == "The analysis raised an exception: fine\\x1b[2K."


def test_its_output_cannot_drive_the_terminal(trace):
    code = ("import sys\ndef analyze(df):\n    print('a\\x1b[2J\\x1b]52;c;cm0gLXJmIH4=\\x07b\\rpolc: ok"
            "\\r\\n\\u202eevil\\x9b')\n    sys.stderr.write('tab\\tkept\\n')\n")
    result = run(code, trace)
    assert result.ok
    assert result.output == ("a\\x1b[2J\\x1b]52;c;cm0gLXJmIH4=\\x07b\\x0dpolc: ok\n\\u202eevil\\x9b\n"
                             "tab\tkept\n")


@needs_root
def test_its_signals_to_init_change_nothing(trace, monkeypatch):
    """In the user-namespace mode the analysis shares init's uid: a forged alarm or interrupt
    must neither end the run nor make polc report a wall-clock kill."""
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    code = ("import os, signal, time\ndef analyze(df):\n    for sig in (signal.SIGALRM, signal.SIGINT, "
            "signal.SIGTERM, signal.SIGHUP):\n        os.kill(1, sig)\n    time.sleep(0.5)\n"
            "    print('still here')\n")
    result = run(code, trace)
    assert result.ok and result.output == "still here\n"


def test_its_file_system_holds_only_the_system_python_and_its_own_folder(trace, mode):
    code = """
import os
def analyze(df):
    print(sorted(os.listdir("/")))
    print(sorted(os.listdir("/dev")))
    print(sorted(os.listdir(os.path.dirname(os.getcwd()))))
    print(open("/dev/urandom", "rb").read(8) != bytes(8), open("/dev/null", "w").write("x"))
"""
    result = run(code, trace)
    assert result.ok, result.error
    top, dev, own, devices = result.output.splitlines()
    # the system's folders, the top folders of the Python installation, of this checkout and of
    # the temporary folder (for its own folder only), /proc and /dev: no /run, /var, /home, /sys
    system = {name for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
              if os.path.lexists(f"/{name}")}
    places = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.executable, PROJECT,
                                            tempfile.gettempdir())]
    places += [os.path.abspath(p) for p in (sys.prefix, sys.executable)]
    assert set(ast.literal_eval(top)) == system | {"dev", "proc"} | {Path(p).parts[1] for p in places}
    assert ast.literal_eval(dev) == ["full", "null", "random", "urandom", "zero"]  # no terminal (/dev/pts,
    # /dev/tty), no /dev/shm, no other device; no /dev/fd or /dev/stdin, which would point into /proc
    assert ast.literal_eval(own) == ["input", "work"] and devices == "True 1"


MOUNT_TABLES = """
import os, subprocess, sys, threading
PATHS = [f"/proc/{who}/{name}" for who in ("self", "thread-self", "1", "2")
         for name in ("mountinfo", "mounts", "mountstats")] + ["/proc/mounts"]
def read_all():
    seen = []
    for path in PATHS:
        try:
            seen.append((path, len(open(path).read())))
        except OSError as e:
            seen.append((path, type(e).__name__))
    return seen
def analyze(df):
    print(os.listdir("/proc"))
    print(read_all())
    in_thread = []
    t = threading.Thread(target=lambda: in_thread.extend(read_all()))
    t.start(); t.join()
    print(in_thread)
    child = "import os; print([os.path.exists(p) for p in ('/proc/self/mountinfo', '/proc/mounts')])"
    print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout.strip())
"""


def test_no_process_or_thread_of_the_analysis_sees_a_mount_table(trace, mode):
    """Issue 34, item 3: /proc/*/mountinfo named the host's side of every mount (the block
    device, its options, the directories the bind mounts come from). No mount over those files
    could cover the processes and threads the analysis starts later, so it sees no /proc."""
    result = run(MOUNT_TABLES, trace)
    assert result.ok, result.error
    listing, own, in_thread, child = result.output.splitlines()
    assert listing == "[]" and child == "[False, False]"
    for seen in (own, in_thread):
        assert len(ast.literal_eval(seen)) == 13
        assert {why for _, why in ast.literal_eval(seen)} == {"FileNotFoundError"}


def test_without_pyseccomp_the_sandbox_refuses_rather_than_run_unfiltered(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # makes `import pyseccomp` fail
    with pytest.raises(OSError, match="needs the Python package pyseccomp and the library libseccomp"):
        inside._install_seccomp_filter()


def test_the_documentation_names_every_refused_system_call():
    doc = (PROJECT / "docs" / "sandbox.md").read_text(encoding="utf-8")
    refused = [name for names in inside.DENIED.values() for name in names] + ["clone3"]
    assert [name for name in refused if f"`{name}`" not in doc] == []


def test_polc_analyze_prints_only_its_own_sentence_on_a_forgery(trace, tmp_path, capsys):
    from polc.cli import main

    code = tmp_path / "forge.py"
    code.write_text(FORGERY)
    assert main(["analyze", str(trace), "--code", str(code)]) == 1
    out, err = capsys.readouterr()
    assert err == "polc: The analysis exited with status 1 before analyze(df) returned.\n"
    assert FORGED not in err and " written: " in out


def test_package_folders_a_pth_file_adds_are_exposed(tmp_path, monkeypatch):
    """A venv layered over another through a `.pth` file (its packages in the other's
    site-packages) gets that folder mounted, since the analysis's `python -I` reads `.pth` files
    too; folders already under an exposed prefix, and folders that are not package folders, are not."""
    shared = tmp_path / "shared" / "lib" / "site-packages"
    shared.mkdir(parents=True)
    inside_prefix = Path(sys.prefix) / "lib" / "site-packages"
    monkeypatch.setattr(sys, "path", [*sys.path, str(shared), str(tmp_path), str(inside_prefix)])
    spec = sandbox._init_spec(tmp_path, LIMITS, 1, seccomp=True)
    assert str(shared.resolve()) in spec["expose"]
    assert str(tmp_path.resolve()) not in spec["expose"]
    assert not [e for e in spec["expose"] if e.startswith(str(inside_prefix))]

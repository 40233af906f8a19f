"""The analysis sandbox: hostile code is contained, reported in one sentence, and the caller
goes on. Limits are small so the suite stays fast."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from polc.runtime.sandbox import process as sandbox
from polc.runtime.sandbox.process import Limits, SandboxUnavailable, run_analysis

# The wall-clock limit sits far above the CPU limit, so a loaded machine cannot
# turn the CPU-limit kill into a wall-clock kill.
LIMITS = Limits(cpu_seconds=3, wall_seconds=90, processes=32, file_bytes=1 << 20,
                disk_bytes=16 << 20, output_bytes=4096)
PROJECT = Path(sandbox.__file__).resolve().parents[2]  # runtime/sandbox/process.py -> the checkout


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
    """Processes still running this sandbox's init or harness."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if sandbox.__file__.encode() in cmdline or b"sandbox.py\x00harness" in cmdline:
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


def test_infinite_loop_is_stopped_by_the_cpu_limit(trace):
    result = run("def analyze(df):\n    while True:\n        pass\n", trace)
    assert not result.ok and result.limit == "cpu"
    assert result.error == "The analysis was killed after the CPU-time limit of 3 s."


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


@pytest.mark.parametrize("target", [
    str(PROJECT / "runtime" / f"escape-{uuid.uuid4().hex}.py"),
    f"/tmp/polc-escape-{uuid.uuid4().hex}",
    "TRACE",  # overwrite the caller's trace
])
def test_writing_outside_its_directory_is_refused(trace, target):
    target = str(trace) if target == "TRACE" else target
    before = Path(target).read_bytes() if Path(target).exists() else None
    result = run(f"def analyze(df):\n    open({target!r}, 'wb').write(b'pwned')\n", trace)
    assert not result.ok and result.limit == "filesystem"
    assert result.error == (f"The analysis tried to write or open something outside its working "
                            f"directory ({target}) at line 2: everything else is read-only to it.")
    assert (Path(target).read_bytes() if Path(target).exists() else None) == before


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


@pytest.mark.skipif(os.geteuid() != 0, reason="as non-root the user-namespace mode is the default")
def test_user_namespace_mode_is_read_only_too(trace, monkeypatch):
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    assert run(NORMAL, trace).ok
    target = str(PROJECT / f"escape-{uuid.uuid4().hex}")
    result = run(f"def analyze(df):\n    open({target!r}, 'w')\n", trace)
    assert result.limit == "filesystem" and not Path(target).exists()

"""Run-directory locks (issue 34, item 1): `polc refine` (new and --resume), `polc rl` and
`polc experiment` refuse a directory another process is running, naming it (pid, host,
since when), exit 1; a lock of a process killed with SIGKILL never blocks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from polc.cli import main
from polc.runtime.io.lock import LOCK_NAME, DirectoryLocked, lock_directory
from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)

CAR_RACING = str(Path(__file__).resolve().parents[3] / "examples" / "car_racing")
HOLDER = textwrap.dedent("""
    import sys, time
    from polc.runtime.io.lock import lock_directory
    lock = lock_directory(sys.argv[1], "polc refine")
    print("locked", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def held(tmp_path):
    """(directory, process): a directory whose lock another process holds."""
    d = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(d)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield d, proc
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def _names_holder(err: str, d, proc) -> None:
    assert f"{d} is in use by polc refine (pid {proc.pid} on {socket.gethostname()}, since 20" in err, err
    assert "a killed process leaves no lock behind" in err and "Traceback" not in err


def test_a_second_lock_is_refused_and_a_released_one_is_free(tmp_path):
    first = lock_directory(tmp_path / "d", "polc rl")
    with pytest.raises(DirectoryLocked, match=rf"d is in use by polc rl \(pid {os.getpid()} on .*, since "):
        lock_directory(tmp_path / "d", "polc rl")
    first.release()
    with lock_directory(tmp_path / "d", "polc rl"):
        pass


def test_refine_resume_is_refused_while_another_process_runs_it(held, capsys):
    from polc.runtime.refine.rundir import RunDir
    from polc.runtime.refine.work import Settings

    d, proc = held
    RunDir.create(d, {"task": "t", "env": "toy_reach", "llm": "manual:x", "llm_kind": "manual",
                      "settings": Settings().to_json()})
    before = sorted(p.name for p in d.iterdir())
    assert main(["refine", "--resume", str(d)]) == 1
    _names_holder(capsys.readouterr().err, d, proc)
    assert sorted(p.name for p in d.iterdir()) == before  # nothing touched


def test_a_new_refine_run_is_refused_in_a_locked_directory(held, capsys):
    d, proc = held
    assert main(["refine", CAR_RACING, "-o", str(d), "--quick", "-q"]) == 1
    _names_holder(capsys.readouterr().err, d, proc)
    assert sorted(p.name for p in d.iterdir()) == [LOCK_NAME]  # no run.json written


def test_rl_and_experiment_are_refused_in_a_locked_directory(held, pol, capsys):
    d, proc = held
    code, _, err = polc(capsys, "rl", pol, "--env", "toy_reach", "-o", str(d), "--resets", "4", "--n-envs", "1",
                         "--episodes-per-update", "4", "-q")
    assert code == 1, err
    _names_holder(err.replace("polc rl", "polc refine"), d, proc)
    assert main(["experiment", "car_racing", "--quick", "-q", "-o", str(d)]) == 1
    _names_holder(capsys.readouterr().err, d, proc)


def test_the_lock_of_a_killed_process_does_not_block(held, tmp_path, capsys):
    from polc.runtime.refine.rundir import RunDir
    from polc.runtime.refine.work import Settings

    d, proc = held
    RunDir.create(d, {"task": str(tmp_path / "gone"), "env": "toy_reach", "llm": "manual:x", "llm_kind": "manual",
                      "settings": Settings().to_json()})
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert str(proc.pid) in (d / LOCK_NAME).read_text()  # the file stays; the kernel's lock went with the process
    with lock_directory(d, "polc refine"):
        assert str(os.getpid()) in (d / LOCK_NAME).read_text()
    # --resume gets past the lock (and stops at the task folder this test left out)
    assert main(["refine", "--resume", str(d)]) == 1
    err = capsys.readouterr().err
    assert "in use" not in err and "gone" in err, err

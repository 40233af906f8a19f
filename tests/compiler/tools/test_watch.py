"""`polc check --watch FILE` re-checks on every save and stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polc.watch import watch

ROOT = Path(__file__).resolve().parents[3]
GOOD = (ROOT / "examples" / "car_racing" / "initial.pol").read_text(encoding="utf-8")


def test_watch_runs_again_after_each_save(tmp_path):
    path = tmp_path / "p.pol"
    path.write_text("a", encoding="utf-8")
    seen = []

    def run() -> int:
        seen.append(path.read_text(encoding="utf-8"))
        if len(seen) == 1:
            path.write_text("bb", encoding="utf-8")  # a save while the first check runs
        elif len(seen) == 2:
            path.unlink()  # an editor's save: remove, then write the new file
            path.write_text("ccc", encoding="utf-8")
        return len(seen)

    assert watch(str(path), run, poll=0.01, runs=3) == 3
    assert seen == ["a", "bb", "ccc"]


def wait_for(proc_err: Path, needle: str, timeout: float = 60.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = proc_err.read_text(encoding="utf-8") if proc_err.exists() else ""
        if needle in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} never appeared in:\n{text}")


def test_check_watch_reports_each_save_and_ctrl_c_exits_130(tmp_path):
    path = tmp_path / "car.pol"
    path.write_text(GOOD, encoding="utf-8")
    err = tmp_path / "stderr.txt"
    polc = Path(sys.executable).with_name("polc")
    cmd = [str(polc)] if polc.exists() else [sys.executable, "-m", "polc.cli"]
    with open(err, "w", encoding="utf-8") as f:
        proc = subprocess.Popen(cmd + ["check", "--watch", str(path)], stderr=f, stdout=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
    try:
        wait_for(err, "(Ctrl-C to stop)")
        assert "car.pol: ok (" in err.read_text(encoding="utf-8")
        path.write_text(GOOD + "latent extra = slip * sllip\n", encoding="utf-8")
        text = wait_for(err, 'Did you mean "slip"?')
        assert "changed at" in text
        path.write_text(GOOD, encoding="utf-8")
        end = time.monotonic() + 60
        while err.read_text(encoding="utf-8").count("car.pol: ok (") < 2 and time.monotonic() < end:
            time.sleep(0.1)
        assert err.read_text(encoding="utf-8").count("car.pol: ok (") == 2
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.read_text(encoding="utf-8")
    assert "Traceback" not in text and text.rstrip().endswith("polc: interrupted.")


def test_check_watch_on_a_missing_file_is_a_usage_error(tmp_path):
    from polc import cli

    assert cli.main(["check", "--watch", str(tmp_path / "nope.pol")]) == 2


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child is POSIX")
def test_watch_ctrl_c_before_any_change(tmp_path):
    path = tmp_path / "car.pol"
    path.write_text(GOOD, encoding="utf-8")
    err = tmp_path / "stderr.txt"
    polc = Path(sys.executable).with_name("polc")
    cmd = [str(polc)] if polc.exists() else [sys.executable, "-m", "polc.cli"]
    with open(err, "w", encoding="utf-8") as f:
        proc = subprocess.Popen(cmd + ["check", "--watch", "--format", "json", str(path)], stderr=f,
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for(err, "(Ctrl-C to stop)")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 130 and out.strip() == "[]"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

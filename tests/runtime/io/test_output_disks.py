"""`polc rollout`, `fit`, `rl` and `refine` writing to a real full disk (a 96 KiB tmpfs) and a
read-only one (issue 34, item 5), in a private mount namespace (`unshare -m`; skipped where it
cannot be made): one sentence naming the path and the OS error, exit 1, the file already on
the read-only disk untouched, no temporary files, no unreadable partial trace."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from polc.runtime.envs import toy

SCRIPT = textwrap.dedent("""
    import contextlib, io, json, os, subprocess, sys
    d = sys.argv[1]
    for sub in ("full", "ro"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", d + "/full"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d + "/ro"], check=True)
    with open(d + "/ro/saved.params", "w") as f:
        f.write("saved before\\n")
    subprocess.run(["mount", "-o", "remount,ro", d + "/ro"], check=True)
    from polc.cli import main
    from polc.runtime.envs import toy
    toy.register()
    pol, demo = d + "/reach.pol", d + "/demo.parquet"
    runs = {
        "rollout-full": ["rollout", pol, "--env", "toy_reach", "--episodes", "60", "--n-envs", "1", "-q",
                         "-o", d + "/full/trace.parquet"],
        "rollout-ro": ["rollout", pol, "--env", "toy_reach", "--episodes", "1", "--n-envs", "1", "-q",
                       "-o", d + "/ro/trace.parquet"],
        "fit-ro": ["fit", pol, "--demos", demo, "--restarts", "1", "--epochs", "2", "--check-episodes", "0", "-q",
                   "-o", d + "/ro/saved.params"],
        "rl-ro": ["rl", pol, "--env", "toy_reach", "--resets", "4", "--episodes-per-update", "4", "--n-envs", "1",
                  "-q", "-o", d + "/ro/rl"],
        "refine-ro": ["refine", d + "/task", "-o", d + "/ro/run", "--llm", "manual:" + d + "/manual", "-q"],
    }
    for name, argv in runs.items():
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(argv)
        print(json.dumps({"name": name, "code": code, "err": err.getvalue()}), flush=True)
    print(json.dumps({"name": "files", "full": sorted(os.listdir(d + "/full")), "ro": sorted(os.listdir(d + "/ro")),
                      "saved": open(d + "/ro/saved.params").read()}), flush=True)
""")


@pytest.mark.slow  # a process of its own: JAX, a rollout, a fit
def test_full_and_read_only_disks_are_one_sentence_exit_1(tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("no private mount namespace here (unshare -m)")
    from polc.cli import main

    (tmp_path / "reach.pol").write_text(toy.reach_policy(kp=0.3, kd=0.1, std=0.3))
    toy.register()
    assert main(["demos", "toy_reach", "--episodes", "2", "-o", str(tmp_path / "demo.parquet"), "-q"]) == 0
    task = tmp_path / "task"
    task.mkdir()
    (task / "task.md").write_text("---\nenv: toy_reach\n---\nReach the target.\n")
    (task / "initial.pol").write_text((tmp_path / "reach.pol").read_text())
    shutil.copy(tmp_path / "demo.parquet", task / "demo.parquet")
    proc = subprocess.run(["unshare", "-m", sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {r["name"]: r for r in map(json.loads, proc.stdout.splitlines())}
    d = tmp_path
    expect = {
        "rollout-full": f"polc: cannot write {d}/full/trace.parquet: No space left on device (ENOSPC).",
        "rollout-ro": f"polc: cannot write {d}/ro/trace.parquet: Read-only file system (EROFS).",
        "fit-ro": f"polc: cannot write {d}/ro/saved.params: Read-only file system (EROFS).",
        "rl-ro": f"polc: cannot write {d}/ro/rl: Read-only file system (EROFS).",
        "refine-ro": f"polc: cannot write {d}/ro/run: Read-only file system (EROFS).",
    }
    for name, sentence in expect.items():
        r = got[name]
        assert r["code"] == 1 and sentence in r["err"] and "Internal" not in r["err"], (name, r)
    files = got["files"]
    assert files["ro"] == ["saved.params"] and files["saved"] == "saved before\n"
    assert not [f for f in files["full"] if f.endswith(".tmp") or "partial" in f or f == "trace.parquet"], files

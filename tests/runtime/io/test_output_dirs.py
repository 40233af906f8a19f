"""An output under a missing directory (issue 12, item 10): made, and said, inside the
working tree; refused outside it (`polc rollout -o /nonexistent/dir/t.parquet` used to
create /nonexistent/dir silently)."""

from __future__ import annotations

import os

from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)


def test_a_missing_directory_outside_the_working_tree_is_refused(pol, tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    out = tmp_path / "elsewhere" / "deeper" / "t.parquet"
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "1", "-o", str(out), "-q")
    assert code == 2 and "does not exist" in err and "only inside the working directory" in err
    assert not (tmp_path / "elsewhere").exists()


def test_a_missing_directory_inside_the_working_tree_is_made_and_said(pol, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "1", "-o",
                        os.path.join("out", "runs", "t.parquet"), "-q")
    assert code == 0 and (tmp_path / "out" / "runs" / "t.parquet").is_file()
    assert f"polc: created the directory {os.path.join('out', 'runs')}/ for" in err

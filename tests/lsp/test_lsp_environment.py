"""lsp/environment.py: which environment a document's task folder names, and the schema
kept once per environment (no server here: `test_lsp.py` drives the real one)."""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stdout
from pathlib import Path

from polc import cli
from polc.lsp import analyze_document
from polc.lsp.environment import Environments

ROOT = Path(__file__).resolve().parents[2]
COPYCAT = ROOT / "examples" / "car_racing" / "copycat.pol"


def _task(folder: Path, header: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.md").write_text(f"---\n{header}\n---\nThe task.\n", encoding="utf-8")
    return folder / "task.md"


def test_the_nearest_task_folder_above_the_file_names_the_environment(tmp_path):
    envs = Environments()
    md = _task(tmp_path / "task", "env: car_racing\ndemo: demo.parquet")
    found = envs.find(str(tmp_path / "task" / "a" / "b" / "x.pol"))
    assert (found.name, found.origin) == ("car_racing", str(md))
    # A task.md without `env:` says nothing; an env.toml beside it does (what polc init-task writes).
    _task(tmp_path / "gym", "demo: demo.parquet")
    assert envs.find(str(tmp_path / "gym" / "x.pol")) is None
    (tmp_path / "gym" / "env.toml").write_text('env = "gym:Pendulum-v1"\n', encoding="utf-8")
    assert envs.find(str(tmp_path / "gym" / "x.pol")).name == str(tmp_path / "gym" / "env.toml")
    # A schema file named in the header is read relative to the task folder.
    _task(tmp_path / "rel", "env: schemas/pend.toml")
    assert envs.find(str(tmp_path / "rel" / "x.pol")).name == str(tmp_path / "rel" / "schemas" / "pend.toml")


def test_the_walk_stops_at_a_repository_root(tmp_path):
    _task(tmp_path, "env: car_racing")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    assert Environments().find(str(tmp_path / "repo" / "src" / "x.pol")) is None
    assert Environments().find(str(tmp_path / "other" / "x.pol")).name == "car_racing"
    (tmp_path / "worktree").mkdir()
    (tmp_path / "worktree" / ".git").write_text("gitdir: /elsewhere\n")  # `git worktree add` writes a file
    assert Environments().find(str(tmp_path / "worktree" / "x.pol")) is None


def test_the_diagnostics_are_polc_check_envs_and_the_schema_is_loaded_once(tmp_path):
    envs = Environments()
    text = COPYCAT.read_text(encoding="utf-8")
    for k in range(3):  # typing: every check after the first uses the kept schema
        doc = analyze_document(text + "\n" * k, str(COPYCAT), envs)
    assert envs.loads == 1
    out = io.StringIO()
    with redirect_stdout(out):
        cli.main(["check", "--verbose", "--format", "json", "--env", "car_racing", str(COPYCAT)])
    expected = [(d["code"], d["message"], d["hint"], d["span"] and d["span"]["line"]) for d in json.loads(out.getvalue())]
    assert [(d.code, d.message, d.hint, d.span and d.span.line) for d in doc.diagnostics] == expected
    assert "W0509" in [d.code for d in doc.diagnostics]
    # Without environments (what `polc check` without --env gives) there is no W0509.
    assert "W0509" not in [d.code for d in analyze_document(text, str(COPYCAT)).diagnostics]


def test_an_edited_task_md_is_read_again(tmp_path):
    envs = Environments()
    md = _task(tmp_path, "env: car_racing")
    pol = str(tmp_path / "p.pol")
    text = COPYCAT.read_text(encoding="utf-8")
    assert [d.code for d in analyze_document(text, pol, envs).diagnostics if d.code.startswith("W05")] == ["W0509"]
    md.write_text("---\nenv: nowhere\n---\n", encoding="utf-8")
    os.utime(md, ns=(1, 1))
    (err,) = [d for d in analyze_document(text, pol, envs).diagnostics if d.code.startswith("E05")]
    assert err.code == "E0500" and err.message == 'There is no environment "nowhere".'
    assert envs.loads == 2

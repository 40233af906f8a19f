"""A task folder (`polc.runtime.task`): the one front-matter parser that task.md and
`polc generate`'s task file share, and `load_task`'s reading of the folder and its errors."""

from __future__ import annotations

import pytest

from polc.runtime.task import TaskError, front_matter, load_task


@pytest.mark.parametrize("raw, header, text", [
    ("Just the text.\n", {}, "Just the text.\n"),
    ("---\nenv: door\nlatents: a, b\n---\nThe text.\n", {"env": "door", "latents": "a, b"}, "The text.\n"),
    ("---\nmoves: dx -> hand[0]: left\n---\nT\n", {"moves": "dx -> hand[0]: left"}, "T\n"),  # the first colon splits
    ("---\n---\nAfter an empty header.\n", {}, "After an empty header.\n"),
    ("---\nenv: door\n---", {"env": "door"}, ""),  # the closing line ends the file
    ("---\nenv: door\n---  \nT\n", {"env": "door"}, "T\n"),  # spaces after the closing ---
    ("---\nenv: door\n----\nT\n", {}, "---\nenv: door\n----\nT\n"),  # never closed: no header
    ("Text\n---\nenv: door\n---\n", {}, "Text\n---\nenv: door\n---\n"),  # only at the top
])
def test_front_matter(raw, header, text):
    assert front_matter(raw) == (header, text)


def _folder(tmp_path, md: str, demo: bool = True):
    (tmp_path / "task.md").write_text(md)
    if demo:
        (tmp_path / "demo.parquet").write_bytes(b"")  # load_task only needs it to exist
    return tmp_path


def test_load_task_reads_the_header_and_the_text(tmp_path):
    d = _folder(tmp_path, "---\nenv: toy_reach\nlatents: err, gain\ninstance: track\n---\n\nReach it.\n\n")
    (d / "initial.pol").write_text("")
    task = load_task(str(d))
    assert (task.env, task.latents, task.instance, task.text) == ("toy_reach", ("err", "gain"), "track", "Reach it.\n")
    assert task.demo == d / "demo.parquet" and task.initial == d / "initial.pol"
    assert load_task(str(d), env="door").env == "door"  # the caller's env wins over the header's


def test_load_task_defaults_without_a_header(tmp_path):
    task = load_task(str(_folder(tmp_path, "Reach it.\n")))
    assert (task.env, task.latents, task.instance, task.initial) == (tmp_path.resolve().name, (), "seed", None)


def test_load_task_names_a_missing_task_md(tmp_path):
    with pytest.raises(TaskError, match=r"^.* has no task\.md \(the task description the model reads\)\.$"):
        load_task(str(tmp_path))


def test_load_task_names_a_missing_demonstration(tmp_path):
    d = _folder(tmp_path, "---\ndemo: mine.parquet\n---\nT\n", demo=False)
    with pytest.raises(TaskError, match=r"has no demonstration mine\.parquet \(write one with `polc demos`\)\.$"):
        load_task(str(d))


def test_load_task_reports_a_bad_moves_line_as_a_task_error(tmp_path):
    d = _folder(tmp_path, "---\nmoves: dx hand\n---\nT\n")
    with pytest.raises(TaskError, match=r"task\.md.*dx hand"):
        load_task(str(d))

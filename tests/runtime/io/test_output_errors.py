"""A full or read-only output disk (issue 34, item 5): one sentence naming the path and the
OS error, exit 1, nothing saved damaged, no temporary files left, and a partial trace
announced only once it reads back. Here the OS errors are injected at the write layer;
tests/runtime/io/test_output_disks.py does the same on a real full tmpfs and a read-only mount."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from polc.util.files import WriteFailed, write_atomic, write_error_text
from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)

CAR_RACING = str(Path(__file__).resolve().parents[3] / "examples" / "car_racing")
ENOSPC = OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")


def _litter(d) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp"))


def test_write_atomic_on_a_full_disk_names_the_target_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "params.json"
    target.write_text("old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteFailed) as e:
        write_atomic(target, "new\n")
    assert write_error_text(e.value) == f"polc: cannot write {target}: No space left on device (ENOSPC)."
    assert target.read_text() == "old\n" and _litter(tmp_path) == []


def test_an_unnamed_read_only_error_is_still_a_sentence_not_a_bug():
    assert write_error_text(OSError(errno.EROFS, "Read-only file system")) == \
        "polc: cannot write: Read-only file system (EROFS)."
    assert write_error_text(OSError(errno.ENOENT, "No such file or directory", "x")) is None  # not a write


def test_rollout_on_a_disk_that_fills_exits_1_naming_the_trace_and_leaves_nothing(tmp_path, pol, capsys,
                                                                                   monkeypatch):
    writes = []

    def write_table(self, table, row_group_size=None):  # the second episode finds the disk full
        writes.append(table.num_rows)
        if len(writes) == 2:
            raise ENOSPC
        return real(self, table, row_group_size=row_group_size)

    real = pq.ParquetWriter.write_table
    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    out = tmp_path / "trace.parquet"
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "3", "--n-envs", "1",
                        "-o", str(out), "-q")
    assert code == 1, err
    assert f"polc: cannot write {out}: No space left on device (ENOSPC)." in err
    assert "the 1 finished episode(s) could not be kept either" in err and "Internal" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reach.pol"]  # no trace, no partial, no .tmp


def _interrupt_after_one_episode(monkeypatch):
    """Ctrl-C as the second episode's table is written: one finished episode to keep."""
    writes = []
    real_write = pq.ParquetWriter.write_table

    def write_table(self, table, row_group_size=None):
        writes.append(1)
        if len(writes) == 2:
            raise KeyboardInterrupt
        return real_write(self, table, row_group_size=row_group_size)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)


def test_a_partial_trace_that_does_not_read_back_is_not_announced(tmp_path, pol, capsys, monkeypatch):
    """An interruption after one episode, and pyarrow's close() losing the footer without a
    word (as it does on a full tmpfs): no trace.partial.parquet is announced or left."""
    _interrupt_after_one_episode(monkeypatch)
    monkeypatch.setattr(pq.ParquetWriter, "add_key_value_metadata", lambda self, meta: None)
    monkeypatch.setattr(pq.ParquetWriter, "close", lambda self: None)  # footer never written
    out = tmp_path / "trace.parquet"
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "3", "--n-envs", "1",
                        "-o", str(out), "-q")
    assert code == 130
    assert "are in" not in err and "could not be kept either" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reach.pol"]


def test_a_partial_trace_is_announced_once_it_reads_back(tmp_path, pol, capsys, monkeypatch):
    _interrupt_after_one_episode(monkeypatch)
    out = tmp_path / "trace.parquet"
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "3", "--n-envs", "1",
                        "-o", str(out), "-q")
    partial = tmp_path / "trace.partial.parquet"
    assert code == 130 and f"the 1 finished episode(s) are in {partial}" in err
    assert pq.read_metadata(partial).num_rows > 0 and not out.exists() and _litter(tmp_path) == []


def test_refine_on_a_full_disk_exits_1_with_the_resume_hint(tmp_path, capsys, monkeypatch):
    from polc.cli import main
    from polc.runtime.refine import loop

    def full(self):
        raise WriteFailed(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "summary.json"))

    monkeypatch.setattr(loop.Loop, "rounds", full)  # what refine.entry runs
    code = main(["refine", CAR_RACING, "-o", str(tmp_path / "run"), "--quick", "-q"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"polc: cannot write {tmp_path / 'run' / 'summary.json'}: No space left on device (ENOSPC).\n" \
           f"The run stopped in the round in progress; after fixing this, continue with `polc refine --resume " \
           f"{tmp_path / 'run'}`." in err

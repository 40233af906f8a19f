"""An exclusive lock on a run directory, so two polc processes never write one run at once.

`polc refine` (new and --resume), `polc rl` and `polc experiment` hold one on their output
directory while they run. The lock is the kernel's (`flock` on DIR/.lock): it belongs to
the open file, so it ends with the process however that ends (kill -9 included) and a
lock of a dead process never blocks. The file itself stays behind, holding the last
holder's pid, host and start time, which the refusal of a second process names.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Optional

from polc.util.files import naming

LOCK_NAME = ".lock"


class DirectoryLocked(Exception):
    """Another process holds the directory's lock (the message names it)."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a directory's lock."""

    pid: int
    host: str
    since: str     # local time the lock was taken, ISO 8601
    command: str   # what the holder is, e.g. "polc refine"

    def to_json(self) -> dict:
        return {"pid": self.pid, "host": self.host, "since": self.since, "command": self.command}

    @classmethod
    def from_json(cls, data: object) -> Optional["Holder"]:
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["pid"]), str(data["host"]), str(data["since"]), str(data.get("command", "polc")))
        except (KeyError, TypeError, ValueError):
            return None


class DirLock:
    """The held lock of one directory; `release()` (or the process ending) frees it."""

    def __init__(self, directory: Path, file: IO[str]):
        self.directory, self._file = directory, file

    def release(self) -> None:
        if self._file is not None and not self._file.closed:
            self._file.close()  # closing the file drops the flock

    def __del__(self) -> None:  # a lock dropped on an error path: closed, never a ResourceWarning
        self.release()

    def __enter__(self) -> "DirLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_directory(directory: str | os.PathLike, command: str) -> DirLock:
    """Take `directory`'s lock (the directory is created if missing); `DirectoryLocked`
    naming the holder (pid, host, since when) when another process has it. `command`
    ("polc refine") is recorded for the next one to read."""
    d = Path(directory)
    path = d / LOCK_NAME
    with naming(d):  # a read-only or full disk: WriteFailed naming the run directory
        d.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = _parse(f.read())
        f.close()
        raise DirectoryLocked(_refusal(d, holder, command)) from None
    except BaseException:
        f.close()
        raise
    holder = Holder(os.getpid(), socket.gethostname(), time.strftime("%Y-%m-%dT%H:%M:%S%z"), command)
    f.seek(0)
    f.truncate()
    f.write(json.dumps(holder.to_json()) + "\n")
    f.flush()
    return DirLock(d, f)


def _parse(text: str) -> Optional[Holder]:
    try:
        return Holder.from_json(json.loads(text))
    except ValueError:
        return None


def _refusal(d: Path, holder: Optional[Holder], command: str) -> str:
    if holder is None:  # the holder has not written its name yet
        who = "another process"
    else:
        who = f"{holder.command} (pid {holder.pid} on {holder.host}, since {holder.since})"
    return (f"{d} is in use by {who}; wait for it to finish or stop it, then run this {command} again "
            "(a killed process leaves no lock behind).")

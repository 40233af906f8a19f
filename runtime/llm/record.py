"""Recording every exchange of any backend, so that any run can be replayed.

The exchange file is JSON Lines, ``<run dir>/exchanges.jsonl``, one object per completed call::

    {"format": "polc-llm-exchange/1", "index": 0, "model": "gemini:gemini-2.5-flash",
     "messages": [{"role": "system", "text": "..."}, {"role": "user", "text": "..."}],
     "reply": "...", "input_tokens": 1834, "output_tokens": 412, "seconds": 3.21,
     "time": "2026-12-02T10:00:03Z"}

`index` counts from 0 in call order; `messages` is exactly the prompt sent. Each line is
written with one write() on an O_APPEND descriptor, then fsync'd, so a crash leaves at most
a torn last line: reading ignores it, and the next append first cuts it off. Calls that
fail are not recorded (they have no reply to play back).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Sequence

from polc.util.files import naming

from .base import ROLES, Backend, LLMError, Message, Reply

FORMAT = "polc-llm-exchange/1"
FILENAME = "exchanges.jsonl"


def exchange_file(path: str | os.PathLike) -> Path:
    """The exchange file of a run directory (or `path` itself when it names a file)."""
    p = Path(path)
    return p if p.suffix == ".jsonl" else p / FILENAME


def read_exchanges(path: str | os.PathLike) -> list[dict]:
    """All complete records of an exchange file; a torn last line (no newline, or not JSON)
    is ignored. A damaged line before the last raises LLMError."""
    file = exchange_file(path)
    data = file.read_bytes()
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # tail is b"" when the file ends with a newline
    records = []
    for number, line in enumerate(complete, start=1):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            if number == len(complete) and not tail:
                break  # a torn last line that happened to end in a newline byte
            raise LLMError(f"The exchange file {file} is damaged at line {number}.") from None
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise LLMError(f"Line {number} of {file} is not a {FORMAT} record.")
        problem = _record_problem(record)
        if problem:
            raise LLMError(f"Line {number} of {file} is not a usable {FORMAT} record: {problem}.")
        records.append(record)
    return records


OPTIONAL_COUNTS = ("reasoning_tokens", "cached_input_tokens")  # parts of output / input some providers count


def _record_problem(record: dict) -> str:
    """What keeps `record` from being played back ('' when nothing does)."""
    messages = record.get("messages")
    if not (isinstance(messages, list) and all(isinstance(m, dict) and m.get("role") in ROLES
                                               and isinstance(m.get("text"), str) for m in messages)):
        return f'"messages" is not a list of {{"role": one of {", ".join(ROLES)}, "text": "..."}}'
    if not isinstance(record.get("reply"), str):
        return '"reply" is not a string'
    for key in ("input_tokens", "output_tokens"):
        v = record.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f'"{key}" is not a count of tokens'
    for key in OPTIONAL_COUNTS:  # written only where the provider reported them
        v = record.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            return f'"{key}" is not a count of tokens'
    v = record.get("seconds")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
        return '"seconds" is not a number of seconds'
    return ""


def _cut_torn_tail(file: Path) -> None:
    """Drop a partial last line left by a crash, so the next record starts on its own line."""
    try:
        size = file.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with open(file, "r+b") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        keep = f.read().rfind(b"\n") + 1
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())


def append_exchange(path: str | os.PathLike, record: dict) -> None:
    """Append one record durably (one write, then fsync)."""
    file = exchange_file(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    _cut_torn_tail(file)
    line = (json.dumps({"format": FORMAT, **record}, ensure_ascii=False) + "\n").encode()
    with naming(file):  # a full or read-only disk: WriteFailed naming the file (a torn line is cut next time)
        fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            while written < len(line):  # a short write is rare on a regular file, never silent
                written += os.write(fd, line[written:])
            os.fsync(fd)
        finally:
            os.close(fd)


class RecordingBackend:
    """Wraps a backend; every completed call is appended to ``<run dir>/exchanges.jsonl``."""

    def __init__(self, inner: Backend, run_dir: str | os.PathLike):
        self.inner = inner
        self.name = inner.name
        self.file = exchange_file(run_dir)
        self.count = len(read_exchanges(self.file)) if self.file.exists() else 0

    def complete(self, messages: Sequence[Message]) -> Reply:
        reply = self.inner.complete(messages)
        append_exchange(self.file, {
            "index": self.count, "model": self.name,
            "messages": [{"role": m.role, "text": m.text} for m in messages],
            "reply": reply.text, "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens, "seconds": round(reply.seconds, 3),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **{k: getattr(reply, k) for k in OPTIONAL_COUNTS if getattr(reply, k) is not None},
        })
        self.count += 1
        return reply

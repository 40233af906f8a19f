"""Playing back a recorded exchange file (see record.py for the format), deterministically.

The k-th request must equal the k-th recorded prompt, role by role and character by
character; anything else raises `ReplayMismatch` with a short unified diff, and is never
answered. Replies carry the recorded token counts and seconds, so a replayed run's
accounting matches the run that was recorded.
"""

from __future__ import annotations

import difflib
import os
from typing import Sequence

from .base import LLMError, Message, Reply, ReplayMismatch, render
from .record import exchange_file, read_exchanges

DIFF_LINES = 40


class ReplayBackend:
    """Answers from a recording; `position` is the index of the next expected request
    (`start` > 0 resumes a run part-way through its recording)."""

    def __init__(self, source: str | os.PathLike, start: int = 0):
        self.file = exchange_file(source)
        if not self.file.exists():
            raise LLMError(f"There is no recorded exchange file at {self.file} to replay.")
        self.records = read_exchanges(self.file)
        self.name = f"replay:{source}"
        self.position = start

    def complete_n(self, messages: Sequence[Message], n: int) -> list[Reply]:
        """The replies recorded from one request for several (`choices`, see
        `refine.converse.Caller.many`), or the next single one, as a server that ignores `n`."""
        first = self.records[self.position] if self.position < len(self.records) else {}
        group = first.get("choices") if first.get("choice") == 0 else None
        count = min(group, n) if isinstance(group, int) and not isinstance(group, bool) and group > 1 else 1
        return [self.complete(messages) for _ in range(count)]

    def complete(self, messages: Sequence[Message]) -> Reply:
        k = self.position
        if k >= len(self.records):
            raise ReplayMismatch(f"The recording {self.file} has {len(self.records)} exchanges, "
                                 f"and request {k + 1} asks for one more.")
        record = self.records[k]
        recorded = [Message(m["role"], m["text"]) for m in record["messages"]]
        if recorded != list(messages):
            raise ReplayMismatch(f"Request {k + 1} differs from the prompt recorded in {self.file}:\n"
                                 + prompt_diff(recorded, messages))
        self.position += 1
        return Reply(record["reply"], int(record["input_tokens"]), int(record["output_tokens"]),
                     float(record["seconds"]), record.get("reasoning_tokens"), record.get("cached_input_tokens"),
                     record.get("model") if isinstance(record.get("model"), str) else None)


def prompt_diff(recorded: Sequence[Message], sent: Sequence[Message]) -> str:
    """A unified diff from the recorded prompt to the sent one, cut to DIFF_LINES lines."""
    lines = list(difflib.unified_diff(render(recorded).splitlines(), render(sent).splitlines(),
                                      "recorded", "sent", n=2, lineterm=""))
    if len(lines) > DIFF_LINES:
        lines = lines[:DIFF_LINES] + [f"... ({len(lines) - DIFF_LINES} more diff lines)"]
    return "\n".join(lines)

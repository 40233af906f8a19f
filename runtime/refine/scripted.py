"""Which model answers a run, and the two backends only `polc refine` uses.

Without `--llm`, a run uses the first provider whose key is set (GEMINI_API_KEY or
GOOGLE_API_KEY: gemini-2.5-flash; OPENAI_API_KEY: gpt-5-mini; ANTHROPIC_API_KEY:
claude-sonnet-4-5) and otherwise the task's bundled scripted session (`<task>/session/exchanges.jsonl`): replies
written by hand, as an expert would, for the prompts of a recorded run. Its analyses
are real code and its revisions real programs; only the model is scripted, and the run
says so plainly.

- `ScriptedBackend` plays such a session back by POSITION: the k-th request gets the
  k-th reply. On another machine (or with `--quick`) fitted numbers differ, so the
  prompts cannot match byte for byte; a difference is reported (`last_mismatch` holds
  the diff, the loop prints a notice and saves it), never silently ignored.
  A user's `--llm replay:DIR` stays strict (`polc.runtime.llm.ReplayBackend`).
- `ManualBackend` is how a session is written: it answers request k from
  `DIR/replies/NNN.md` and, when that file does not exist yet, saves the prompt as
  `DIR/prompts/NNN.md` and stops the run (`--resume` continues once the reply is written).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from ..llm import (DEFAULT_TIMEOUT, LLMError, Message, Reply, ReplayMismatch, TimeLimited, make_backend,
                   read_exchanges, render)
from ..llm.gemini import KEY_VARS
from ..llm.replay import prompt_diff

DEFAULT_MODEL = "gemini-2.5-flash"
SESSION = "session"
TOKEN_ESTIMATE = "estimated: 4 characters per token"


def estimate_tokens(text: str) -> int:
    """A rough token count (about 4 characters per token) for replies no provider counted."""
    return math.ceil(len(text) / 4)


class ScriptedBackend:
    """Replays a recorded session by position (see the module docstring)."""

    def __init__(self, source: str | os.PathLike, start: int = 0):
        self.file = Path(source) if str(source).endswith(".jsonl") else Path(source) / "exchanges.jsonl"
        if not self.file.exists():
            raise LLMError(f"There is no scripted session at {self.file}.")
        self.records = read_exchanges(self.file)
        self.name = f"scripted:{source}"
        self.position = start
        self.last_mismatch: Optional[str] = None

    def complete(self, messages: Sequence[Message]) -> Reply:
        k = self.position
        if k >= len(self.records):
            raise ReplayMismatch(f"The scripted session {self.file} has {len(self.records)} replies, and "
                                 f"request {k + 1} asks for one more; it was recorded for other settings.")
        record = self.records[k]
        recorded = [Message(m["role"], m["text"]) for m in record["messages"]]
        self.last_mismatch = None if recorded == list(messages) else prompt_diff(recorded, messages)
        self.position += 1
        return Reply(record["reply"], int(record["input_tokens"]), int(record["output_tokens"]),
                     float(record["seconds"]))


class WaitingForReply(LLMError):
    """A manual session has no reply to this request yet; the prompt was saved."""


class ManualBackend:
    """Answers from hand-written reply files (see the module docstring). `start` is the
    index of the next request (a resumed run skips the requests it already made)."""

    def __init__(self, directory: str | os.PathLike, start: int = 0):
        self.dir = Path(directory)
        self.name = f"manual:{directory}"
        self.position = start

    def complete(self, messages: Sequence[Message]) -> Reply:
        k = self.position
        reply = self.dir / "replies" / f"{k:03d}.md"
        if not reply.exists():
            prompt = self.dir / "prompts" / f"{k:03d}.md"
            prompt.parent.mkdir(parents=True, exist_ok=True)
            prompt.write_text(render(messages), encoding="utf-8")
            raise WaitingForReply(f"Request {k + 1} is waiting for a reply: read {prompt}, write "
                                  f"{reply}, then run again (a refine run continues with --resume).")
        text = reply.read_text(encoding="utf-8")
        self.position += 1
        return Reply(text, estimate_tokens(render(messages)), estimate_tokens(text), 0.0)


@dataclass(frozen=True)
class Choice:
    """The model of a run: `spec` (recorded in run.json), `kind` ("gemini", "openai",
    "anthropic", "replay", "scripted" or "manual"), for a scripted session the file it
    plays, and the `--llm-option` request parameters as (key, value) pairs."""

    spec: str
    kind: str
    source: Optional[str] = None
    options: tuple[tuple[str, str], ...] = ()

    @property
    def scripted(self) -> bool:
        return self.kind == "scripted"


# Without --llm, the first provider whose key is set answers (Gemini first, as before the
# others existed); with no key, the task's bundled scripted session does.
DEFAULTS = (("gemini", KEY_VARS, DEFAULT_MODEL), ("openai", ("OPENAI_API_KEY",), "gpt-5-mini"),
            ("anthropic", ("ANTHROPIC_API_KEY",), "claude-sonnet-4-5"))


def keyed_provider() -> Optional[tuple[str, str]]:
    """(kind, model) of the first provider in DEFAULTS whose key variable is set, else None."""
    for kind, variables, model in DEFAULTS:
        if any(os.environ.get(v, "").strip() for v in variables):
            return kind, model
    return None


def has_key() -> bool:
    return keyed_provider() is not None


def choose(llm: Optional[str], task_dir: str | os.PathLike) -> Choice:
    """The model a run uses: `--llm` when given, else Gemini with a key, else the task's
    scripted session. `LLMError` when there is none of them."""
    if llm:
        kind, _, arg = llm.partition(":")
        if kind in ("scripted", "manual") and arg:
            return Choice(llm, kind, arg)
        if kind not in ("gemini", "openai", "anthropic", "replay") or not arg:
            raise LLMError(f"Unknown LLM backend {llm!r}: use gemini:MODEL (e.g. gemini:{DEFAULT_MODEL}), "
                           "openai:MODEL, anthropic:MODEL, replay:DIR, scripted:DIR or manual:DIR.")
        return Choice(llm, kind, arg)
    keyed = keyed_provider()
    if keyed is not None:
        kind, model = keyed
        return Choice(f"{kind}:{model}", kind, model)
    session = Path(task_dir) / SESSION
    if (session / "exchanges.jsonl").exists():
        return Choice(f"scripted:{session}", "scripted", str(session))
    raise LLMError(f"No LLM: set GEMINI_API_KEY (or GOOGLE_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY), or pass "
                   f"--llm gemini:MODEL, openai:MODEL, anthropic:MODEL or replay:DIR; {task_dir} has no scripted "
                   f"session ({session}/exchanges.jsonl).")


def open_backend(choice: Choice, start: int = 0, timeout: float = DEFAULT_TIMEOUT):
    """The backend of `choice`, positioned at request `start` (a resumed run), each call
    limited to `timeout` seconds over all its attempts (`polc.runtime.llm.TimeLimited`)."""
    if choice.kind == "scripted":
        return TimeLimited(ScriptedBackend(choice.source, start), timeout)
    if choice.kind == "manual":
        return TimeLimited(ManualBackend(choice.source, start), timeout)
    backend = make_backend(choice.spec, timeout=timeout, options=dict(choice.options))
    if choice.kind == "replay":
        backend.inner.position = start
    return backend

"""Talking to the model: every call recorded and counted, unusable replies sent back,
revisions checked and repaired.

`Caller` wraps a backend for one round: each call is appended to the round's
`exchanges.jsonl` (the `polc.runtime.llm` record format, so a run replays with
`--llm replay:RUN`) and `conversation.md`, and counted (calls, tokens, seconds). When
a scripted session's prompt differs from its recording, the diff is saved beside them
and a notice goes to the caller's `notice` function.

`ask` sends a conversation and parses the reply; a reply the parser rejects goes back
with the reason ("reply-error" prompt) at most `retries` times. A reply over the run's
size limit (`max_reply_chars`) is recorded cut, rejected with that reason, and repeated
in the retry by its beginning only (`replies.cut_reply`, `replies.echo`). `check_and_repair`
checks a program (`polc check --env`) and sends failing ones back with their
diagnostics ("repair" prompt) at most `max_repairs` times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar

from ..llm import Message, append_exchange, render
from ..llm.record import OPTIONAL_COUNTS
from . import replies, templates
from .budget import Meter
from .rundir import write_atomic
from .work import Checked, check

T = TypeVar("T")


class NoUsableReply(Exception):
    """The model did not give a usable reply within the allowed retries."""


class RevisionRejected(Exception):
    """A program still failed `polc check` after every allowed repair."""

    def __init__(self, message: str, last: Checked):
        super().__init__(message)
        self.last = last


@dataclass
class Counts:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    reply_retries: int = 0
    repairs: int = 0
    mismatches: int = 0
    priced: bool = False          # a price table was given: `cost_usd` is kept (None: unknown)
    cost_usd: Optional[float] = 0.0
    requests: int = 0             # requests sent: fewer than `calls` when one answered several (`many`)

    def to_json(self) -> dict:
        out = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()
               if k not in ("priced", "cost_usd", "requests")}
        if self.requests != self.calls:  # only a population asked with n says it
            out["requests"] = self.requests
        if self.priced:  # without a price table (a scripted session) no cost is recorded at all
            out["cost_usd"] = None if self.cost_usd is None else round(self.cost_usd, 6)
        return out

    def add_cost(self, usd: Optional[float]) -> None:
        """One call's cost; once one is unknown the round's total is unknown."""
        self.cost_usd = None if usd is None or self.cost_usd is None else self.cost_usd + usd


class Caller:
    """One round's access to the model (see the module docstring). `first_index` is the
    run-wide index of this round's first call."""

    def __init__(self, backend: Any, round_dir: Path, first_index: int,
                 notice: Callable[[str], None] = lambda s: None, token_note: Optional[str] = None,
                 meter: Optional[Meter] = None, max_reply_chars: int = replies.DEFAULT_MAX_REPLY_CHARS):
        self.backend = backend
        self.max_reply_chars = max_reply_chars  # longer replies are cut, recorded so, and unusable
        self.dir = round_dir
        self.index = first_index
        self.notice = notice
        self.token_note = token_note
        self.meter = meter  # prices each reply, and stops a call that would exceed the run's budget
        self.counts = Counts(priced=meter is not None and meter.prices is not None)
        self._log: list[str] = []

    def __call__(self, messages: list[Message], purpose: str) -> str:
        if self.meter is not None:
            self.meter.check(messages)  # BudgetExhausted: the call is not made
        reply = self.backend.complete(messages)
        self.counts.requests += 1
        return self._record(messages, reply, purpose)

    def many(self, messages: list[Message], n: int, purposes: Sequence[str]) -> list[str]:
        """Up to `n` replies to `messages` from one request, when the backend can (`completes_n`);
        [] when it cannot, or that request fails in any way but running out of time or a
        replay's mismatch (the backend is then not asked for n again; the caller asks one at
        a time, and a failure that is not about n shows there). Each reply is recorded as its
        own exchange, `choice` j of `choices` m, named by `purposes[j]`; `calls` counts
        replies and `requests` the one request."""
        from ..llm import LLMError, ReplayMismatch, TimedOut, completes_n

        if n < 2 or not completes_n(self.backend):
            return []
        if self.meter is not None:
            self.meter.check(messages, n)
        try:
            got = self.backend.complete_n(messages, n)[:n]
        except (TimedOut, ReplayMismatch):  # not about n: asking one at a time would fail the same way
            raise
        except LLMError as e:
            self.backend.n_refused = True
            self.notice(f"{self.backend.name} did not give {n} replies in one request ({e}); asking for them "
                        "one at a time")
            return []
        self.counts.requests += 1
        return [self._record(messages, reply, purposes[j], {"choice": j, "choices": len(got)})
                for j, reply in enumerate(got)]

    def _record(self, messages: list[Message], reply: Any, purpose: str, extra: Optional[dict] = None) -> str:
        model = reply.model or self.backend.name  # a replayed reply: the model that made it
        cost = self.meter.cost(model, reply) if self.meter is not None else None
        text = replies.cut_reply(reply.text, self.max_reply_chars)
        if text is not reply.text:
            extra = {**(extra or {}), "reply_chars": len(reply.text)}
            self.notice(f"request {self.index + 1} ({purpose}): the reply has {len(reply.text):,} characters, "
                        f"over the limit of {self.max_reply_chars:,} (--max-reply-chars); it was cut and is "
                        "not used")
        record = {"index": self.index, "model": model, "purpose": purpose,
                  "messages": [{"role": m.role, "text": m.text} for m in messages], "reply": text,
                  "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                  "seconds": round(reply.seconds, 3), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  **{k: getattr(reply, k) for k in OPTIONAL_COUNTS if getattr(reply, k) is not None},
                  **(extra or {})}
        if self.token_note:
            record["tokens"] = self.token_note
        if self.counts.priced:
            record["cost_usd"] = None if cost is None else round(cost, 8)
        append_exchange(self.dir / "exchanges.jsonl", record)
        if self.meter is not None:
            self.meter.record(messages, reply, cost)
        c = self.counts
        c.calls += 1
        c.input_tokens += reply.input_tokens
        c.output_tokens += reply.output_tokens
        c.seconds += reply.seconds
        if c.priced:
            c.add_cost(cost)
        mismatch = getattr(self.backend, "last_mismatch", None)
        if mismatch:
            c.mismatches += 1
            name = f"prompt-mismatch-{self.index:03d}.diff"
            write_atomic(self.dir / name, mismatch + "\n")
            self.notice(f"request {self.index + 1} ({purpose}) differs from the scripted recording; "
                        f"answered by position anyway (diff: {self.dir / name})")
        self._log.append(f"# Call {self.index + 1}: {purpose}\n\n{render(messages)}"
                         f"--- reply ({reply.input_tokens} in, {reply.output_tokens} out, "
                         f"{reply.seconds:.1f} s)\n{text}\n")
        write_atomic(self.dir / "conversation.md", "\n".join(self._log))
        self.index += 1
        return text


def ask(call: Caller, messages: list[Message], parse: Callable[[str], T], purpose: str,
        expected: str, retries: int) -> tuple[T, list[Message]]:
    """Send `messages`, parse the reply; on a `ReplyError` send the reason back (at most
    `retries` times). Returns the parsed value and the conversation including the reply."""
    messages = list(messages)
    for attempt in range(retries + 1):
        text = call(messages, purpose if attempt == 0 else f"{purpose}, retry {attempt}")
        messages.append(Message("model", replies.echo(text, call.max_reply_chars)))
        try:
            replies.verify_size(text, call.max_reply_chars)
            return parse(text), messages
        except replies.ReplyError as e:
            if attempt == retries:
                raise NoUsableReply(f"the model gave no usable reply for {purpose} in {retries + 1} tries "
                                    f"(last problem: {e})") from None
            call.counts.reply_retries += 1
            messages.append(Message("user", templates.render(
                "reply-error", problem=str(e), expected=expected, attempt=attempt + 1, max_retries=retries)))
    raise AssertionError("unreachable")


PROGRAM_EXPECTED = "Reply with the complete program in one ```pol block."


def check_and_repair(call: Caller, messages: list[Message], text: str, file: str, env: str,
                     max_repairs: int, retries: int, on_attempt: Callable[[int, str, Checked], None]
                     ) -> tuple[Any, str, list[Message]]:
    """Check `text`; while it fails, ask for a repair (at most `max_repairs` times).
    `on_attempt(k, text, checked)` sees every version (k = 0 for the first). Returns the
    checked program, its text, and the conversation."""
    result = check(text, file, env)
    on_attempt(0, text, result)
    for attempt in range(1, max_repairs + 1):
        if result.program is not None:
            return result.program, text, messages
        call.counts.repairs += 1
        messages = messages + [Message("user", templates.render(
            "repair", attempt=attempt, max_repairs=max_repairs, diagnostics=result.report.rstrip()))]
        text, messages = ask(call, messages, replies.parse_program, f"repair {attempt}", PROGRAM_EXPECTED, retries)
        result = check(text, file, env)
        on_attempt(attempt, text, result)
    if result.program is not None:
        return result.program, text, messages
    raise RevisionRejected(f"the program still fails polc check after {max_repairs} repairs "
                           f"({result.errors} error{'s' if result.errors != 1 else ''})", result)

"""Reading what the model wrote: code blocks and the one move of a reply.

Replies are prose around fenced blocks (```pol, ```python, ``` with no tag, ~~~), sometimes
several, sometimes a bare program with no fence at all. The parsers here pull out what
the loop asked for or raise `ReplyError` with one sentence that goes back to the model
(see the "reply-error" prompt), so it can answer again.

    parse_analysis(text) -> str                  # the code defining analyze(df)
    parse_program(text) -> str                   # a complete Pol program
    parse_move(text, allowed) -> Move            # REVISE (with .pol), TEST (with .code) or STOP
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

MOVES = ("REVISE", "TEST", "STOP")
POL_TAGS = {"pol", "polc"}
PY_TAGS = {"python", "py", "python3"}
POL_KEYWORDS = ("policy", "obs", "weight", "latent", "action", "expect")
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[\w+.-]*)[^\n]*\n", re.MULTILINE)
_POL_LINE = re.compile(r"^\s*(policy|obs|weight|latent|action|expect)\s+\w", re.MULTILINE)
_ACTION = re.compile(r"^\s*action\s+\w+\s*:", re.MULTILINE)
_MOVE = re.compile(r"\bMOVE\s*[:=\-]?\s*[*_`\"']*\s*(REVISE|TEST|STOP)\b", re.IGNORECASE)
_BARE_MOVE = re.compile(r"^[\s#>*_`\-]*(REVISE|TEST|STOP)\b[\s*_`.:!]*$", re.MULTILINE)


class ReplyError(Exception):
    """The reply does not contain what was asked for; str(error) says what is wrong."""


# ---- the size of a reply ------------------------------------------------------------------
# A reply longer than the run's limit (Settings.max_reply_chars, --max-reply-chars) is kept
# only up to the limit, with CUT_MARK after it, in the exchanges, conversation.md and report;
# it is unusable (the model is told why) and a retry repeats only its beginning (ECHO_CHARS).
# Cutting is idempotent, so a replay of a recorded cut reply cuts it the same way.

DEFAULT_MAX_REPLY_CHARS = 100_000
ECHO_CHARS = 2000
CUT_MARK = "\n[polc cut this reply here: it was longer than the limit of {limit} characters]\n"


def cut_reply(text: str, limit: int) -> str:
    """`text` when it is at most `limit` characters, else its first `limit` and CUT_MARK."""
    return text if len(text) <= limit else text[:limit] + CUT_MARK.format(limit=limit)


def verify_size(text: str, limit: int) -> None:
    """`ReplyError` telling the model why, when `text` was cut at `limit` (or is longer)."""
    if len(text) > limit:
        raise ReplyError(f"it is longer than the limit of {limit} characters on a reply, so polc did not read "
                         "it; reply again with only what was asked for (the move and its one code block, no "
                         "repeated data, traces or output).")


def echo(text: str, limit: int) -> str:
    """What a retry repeats of a reply: the reply, or of an over-long one its first ECHO_CHARS."""
    if len(text) <= limit:
        return text
    return text[:min(ECHO_CHARS, limit)] + f"\n[... the rest of this reply, over the limit of {limit} characters, is not repeated]\n"


@dataclass(frozen=True)
class Block:
    """One fenced block: its tag (lowercase, "" when none) and its text."""

    tag: str
    text: str

    @property
    def kind(self) -> str:
        """"pol", "python" or "other", from the tag or, without one, from the content."""
        if self.tag in POL_TAGS:
            return "pol"
        if self.tag in PY_TAGS:
            return "python"
        if self.tag:
            return "other"
        if defines_analyze(self.text):
            return "python"
        if _POL_LINE.search(self.text) and not re.search(r"^\s*(def|import|from)\s", self.text, re.M):
            return "pol"
        return "other"


@dataclass(frozen=True)
class Move:
    """The model's move. `pol` is set for REVISE, `code` for TEST; `prose` is the reply
    without its code blocks (the model's reasons); `notes` say what the parser inferred."""

    kind: str
    prose: str
    pol: Optional[str] = None
    code: Optional[str] = None
    notes: tuple[str, ...] = field(default=())


def blocks(text: str) -> list[Block]:
    """The fenced blocks of `text`, in order. An unclosed last fence runs to the end."""
    out, pos = [], 0
    while (m := _FENCE.search(text, pos)) is not None:
        fence = m.group("fence")
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = close.search(text, m.end())
        body = text[m.end():end.start() if end else len(text)]
        out.append(Block(m.group("tag").lower(), body.strip("\n")))
        pos = end.end() if end else len(text)
    return out


def prose(text: str) -> str:
    """`text` without its fenced blocks, whitespace tidied."""
    out, pos = [], 0
    while (m := _FENCE.search(text, pos)) is not None:
        out.append(text[pos:m.start()])
        fence = m.group("fence")
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = close.search(text, m.end())
        pos = end.end() if end else len(text)
    out.append(text[pos:])
    return re.sub(r"\n{3,}", "\n\n", "".join(out)).strip()


def defines_analyze(code: str) -> bool:
    """Whether `code` is Python that defines a top-level function analyze."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return bool(re.search(r"^def\s+analyze\s*\(", code, re.MULTILINE))
    return any(isinstance(n, ast.FunctionDef) and n.name == "analyze" for n in tree.body)


def parse_analysis(text: str) -> str:
    """The analysis code of a reply: its Python blocks, joined when helpers sit in blocks of
    their own, or the whole reply when it is bare Python defining analyze."""
    py = [b.text for b in blocks(text) if b.kind == "python"]
    if not py:
        if not blocks(text) and defines_analyze(text.strip()):
            return text.strip() + "\n"
        raise ReplyError("it has no ```python block with the analysis code.")
    defining = [code for code in py if defines_analyze(code)]
    if not defining:
        raise ReplyError("its Python code does not define the entry function `analyze(df)`.")
    if len(defining) > 1:
        return defining[-1].rstrip() + "\n"  # a draft and a final version: the last one counts
    return "\n\n".join(code.rstrip() for code in py) + "\n"


def parse_program(text: str) -> str:
    """The complete Pol program of a reply (the one with an action; the last such when the
    reply shows several versions)."""
    bs = blocks(text)
    pol = [b.text for b in bs if b.kind == "pol"]
    if not pol and not bs and _POL_LINE.search(text) and _ACTION.search(text):
        return _trim_bare_program(text)
    if not pol:
        raise ReplyError("it has no ```pol block with a program.")
    complete = [p for p in pol if _ACTION.search(p)]
    if not complete:
        raise ReplyError("its ```pol block is not a complete program (it declares no action); "
                         "send the whole program, not a fragment or a diff.")
    return complete[-1].rstrip() + "\n"


def _trim_bare_program(text: str) -> str:
    """A reply that is a program without a fence: from its first declaration on."""
    m = re.search(r"^\s*(policy|obs|weight|latent|action|expect)\s", text, re.MULTILINE)
    return text[m.start():].strip() + "\n"


def parse_move(text: str, allowed: Sequence[str] = MOVES) -> Move:
    """The one move of a reply, with the program (REVISE) or analysis code (TEST) it needs."""
    named = [m.upper() for m in _MOVE.findall(text)]
    if not named:
        named = [m.upper() for m in _BARE_MOVE.findall(prose(text))]
    notes: list[str] = []
    if not named:
        kinds = {b.kind for b in blocks(text)} - {"other"}
        if kinds == {"pol"} and "REVISE" in allowed:
            named, notes = ["REVISE"], ["no MOVE line; a ```pol block was read as REVISE"]
        elif kinds == {"python"} and "TEST" in allowed:
            named, notes = ["TEST"], ["no MOVE line; a ```python block was read as TEST"]
        else:
            raise ReplyError(f"it names no move; write one line `MOVE: {'`, `MOVE: '.join(allowed)}`.")
    if len(set(named)) > 1:
        raise ReplyError(f"it names more than one move ({', '.join(dict.fromkeys(named))}); "
                         "choose exactly one.")
    kind = named[0]
    if kind not in allowed:
        raise ReplyError(f"MOVE: {kind} is not available here; choose one of "
                         f"{', '.join(allowed)}.")
    words = prose(text)
    if kind == "REVISE":
        return Move(kind, words, pol=parse_program(text), notes=tuple(notes))
    if kind == "TEST":
        return Move(kind, words, code=parse_analysis(text), notes=tuple(notes))
    return Move(kind, words, notes=tuple(notes))


def summary(words: str, limit: int = 400) -> str:
    """The first paragraphs of the model's prose, up to about `limit` characters, on one line
    (for the history of later rounds)."""
    text = _MOVE.sub("", words)
    text = re.sub(r"\s+", " ", text).strip(" -*#")
    if len(text) <= limit:
        return text
    cut = text.rfind(". ", 0, limit)
    if cut > limit // 2:
        return text[:cut + 1]
    return text[:text.rfind(" ", 0, limit)].rstrip(" ,;:") + " ..."

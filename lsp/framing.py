"""LSP's base protocol on a byte stream: `Content-Length` headers, then a JSON body.

pygls reads stdio with one header line at a time and `read(Content-Length)`: a message with a
bad length leaves the rest of its body in front of the next header, which then never matches,
so one badly framed message made the server deaf for good, and `Content-Length: 1000000000000`
asked Python for a terabyte. `Framer` is the reading side without I/O (bytes in, bodies and
problems out), so the server can resynchronise on the next header and tests can feed it
anything:

- a header block is the lines up to an empty line; its last `Content-Length` counts (garbage
  before it on its line, or in lines before it, is skipped and said);
- a length that is not a decimal number, or over `max_bytes`, skips that header;
- a body is cut short where the next header starts inside it: `Content-Length: 12` followed by
  a line end cannot appear in JSON (a string holds no raw line end, and outside strings the
  words are no JSON), so a length that was too long costs its own message, not the next one;
- bytes that hold no header block at all are dropped once they pass `header_bytes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

MAX_MESSAGE_BYTES = 16 << 20  # a .pol file is a few KiB; whole-document changes stay far below
MAX_HEADER_BYTES = 8 << 10  # headers are two short lines; past this, what came is not one

HEADER_END = b"\r\n\r\n"
LENGTH = re.compile(rb"content-length:[ \t]*([^\r\n]*)", re.IGNORECASE)
# the start of a header inside a body: impossible in JSON (see the module's docstring)
NEXT_HEADER = re.compile(rb"content-length:[ \t]*\d+[ \t]*\r\n", re.IGNORECASE)
PARTIAL = re.compile(rb"content-length:[ \t]*\d*[ \t]*\r?", re.IGNORECASE)  # its first part
HEADER_LINE = re.compile(rb"[A-Za-z0-9-]+:[ \t]*[\x20-\x7e]*")


@dataclass(frozen=True)
class Body:
    """One message's body, as its header framed it (not yet parsed as JSON)."""

    data: bytes


@dataclass(frozen=True)
class Problem:
    """Something in the stream that was not a well-framed message, and what was done about it."""

    text: str


Event = Union[Body, Problem]


def _shown(raw: bytes, limit: int = 40) -> str:
    text = raw[:limit].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(raw) > limit else ""))


class Framer:
    """Feed it the bytes as they arrive; it returns the bodies and problems found so far."""

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES, header_bytes: int = MAX_HEADER_BYTES):
        self.max_bytes, self.header_bytes = max_bytes, header_bytes
        self.buf = bytearray()
        self.length: int | None = None  # the body being read, once its header was read
        self.scanned = 0  # how far the body being read holds no next header

    def feed(self, data: bytes) -> list[Event]:
        self.buf += data
        events: list[Event] = []
        while True:
            event = self._body() if self.length is not None else self._header()
            if event is None:
                return events
            if isinstance(event, Body) or event.text:
                events.append(event)

    def _header(self) -> Event | None:
        end = self.buf.find(HEADER_END)
        if end < 0:
            if len(self.buf) <= self.header_bytes:
                return None
            keep = 64  # the start of a header may be at the very end
            dropped = len(self.buf) - keep
            del self.buf[:dropped]
            return Problem(f"skipped {dropped} bytes that hold no message header")
        block = bytes(self.buf[:end])
        del self.buf[: end + len(HEADER_END)]
        found = list(LENGTH.finditer(block))
        if not found:
            return Problem(f"skipped {end + 4} bytes that hold no Content-Length header: "
                           f"{_shown(block)}")
        last = found[-1]
        problems = []
        before = block[: last.start()].split(b"\r\n")  # header lines, then the line's own start
        if before[-1] or not all(_is_header_line(line) for line in before[:-1]):
            garbage = block[: last.start()]
            problems.append(f"skipped {len(garbage)} bytes before a header: {_shown(garbage)}")
        value = last.group(1).strip()
        if not value.isdigit() or not value.isascii():
            problems.append(f"skipped a message whose Content-Length is not a number of bytes: "
                            f"{_shown(value)}")
        elif int(value) > self.max_bytes:
            problems.append(f"skipped a message of {int(value)} bytes, over the limit of "
                            f"{self.max_bytes} bytes")
        else:
            self.length, self.scanned = int(value), 0
        return Problem("; ".join(problems))

    def _body(self) -> Event | None:
        assert self.length is not None
        # from a little before where the last look stopped: a header may have come in two parts
        early = NEXT_HEADER.search(self.buf, max(0, self.scanned - 128))
        self.scanned = len(self.buf)
        if early is not None and early.start() < self.length:
            got = early.start()
            del self.buf[:got]
            declared, self.length = self.length, None
            return Problem(f"dropped a message of {got} bytes whose Content-Length said "
                           f"{declared}: the next header started inside it")
        if len(self.buf) < self.length or self._header_coming():
            return None
        body = bytes(self.buf[: self.length])
        del self.buf[: self.length]
        self.length = None
        return Body(body)

    def _header_coming(self) -> bool:
        """Whether the buffer ends in the first part of a header that starts inside the body
        (no JSON ends so): wait for the rest rather than take it as the body's end."""
        assert self.length is not None
        start = max(0, len(self.buf) - 64)
        for p in range(start, min(self.length, len(self.buf))):
            if self.buf[p] in b"cC":
                tail = bytes(self.buf[p:]).lower()
                if b"content-length:".startswith(tail) or PARTIAL.fullmatch(tail):
                    return True
        return False


def _is_header_line(line: bytes) -> bool:
    """`Content-Type: ...` and the like: a name, a colon, printable ASCII."""
    return HEADER_LINE.fullmatch(line) is not None

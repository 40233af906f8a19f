"""`polc lsp` on a badly framed stream: it resynchronises on the next header, says what it
skipped (stderr and window/logMessage), and still answers shutdown. The real server process is
driven over pipes with raw bytes; `Framer` itself is fed the same cases byte by byte."""

from __future__ import annotations

import json
import queue
import random
import subprocess
import threading

import pytest

from polc.lsp.framing import MAX_MESSAGE_BYTES, Body, Framer, Problem
from test_lsp import polc_command

TIMEOUT = 60


def frame(body: bytes, length: int | str | None = None) -> bytes:
    return f"Content-Length: {len(body) if length is None else length}\r\n\r\n".encode() + body


def request(id_: int, method: str, params: object = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


PING = request(0, "polc/ping")  # an unknown method: answered with an error of the same id
NOISE = random.Random(34).randbytes(4096)
# (name, bytes sent before a good request, what the server says it skipped)
BAD = [
    ("not-a-number", frame(PING, "abc"), "Content-Length is not a number of bytes: 'abc'"),
    ("negative", frame(PING, -5), "Content-Length is not a number of bytes: '-5'"),
    ("too-short", frame(PING, 10), "skipped a message that is not a JSON-RPC message"),
    ("too-long", frame(PING, len(PING) + 30), "whose Content-Length said"),
    ("a-terabyte", frame(PING, 10 ** 12),
     f"skipped a message of 1000000000000 bytes, over the limit of {MAX_MESSAGE_BYTES} bytes"),
    ("random-bytes", NOISE, "bytes before a header"),
    ("not-json", frame(b"\xff{not json"), "skipped a message that is not a JSON-RPC message"),
    ("nested-json", frame(b"[" * 5000 + b"]" * 5000), "RecursionError"),
]


class Server:
    """A `polc lsp` process on pipes; its messages arrive on a queue."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(polc_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.messages: queue.Queue = queue.Queue()
        self.stderr: list[bytes] = []
        self.readers = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True)]
        for reader in self.readers:
            reader.start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                self.messages.put(None)
                return
            self.messages.put(json.loads(out.read(length)))

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answer(self, id_: int) -> tuple[dict, list[str]]:
        """The response to request `id_`, and the log messages that came before it."""
        logs = []
        while True:
            msg = self.messages.get(timeout=TIMEOUT)
            assert msg is not None, b"".join(self.stderr).decode(errors="replace")
            if msg.get("method") == "window/logMessage":
                logs.append(msg["params"]["message"])
            elif msg.get("id") == id_ and "method" not in msg:
                return msg, logs


@pytest.fixture(scope="module")
def server():
    s = Server()
    s.send(frame(request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})))
    assert "capabilities" in s.answer(1)[0]["result"]
    s.send(frame(json.dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}}).encode()))
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
    s.proc.wait()
    for reader in s.readers:
        reader.join(timeout=TIMEOUT)
    for pipe in (s.proc.stdin, s.proc.stdout, s.proc.stderr):
        pipe.close()


@pytest.mark.parametrize("bad, said", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_after_a_badly_framed_message_the_server_still_answers(server, bad, said):
    id_ = 100 + [b[1] for b in BAD].index(bad)
    server.send(bad + frame(request(id_, "polc/ping")))
    reply, logs = server.answer(id_)
    assert reply["error"]["code"] == -32601  # method not found: it read the request
    assert any(said in line for line in logs), logs


# Well framed, but not what a client sends: each is refused or ignored, and the next request is
# answered (the sweep's fuzzing of JSON content, kept as a probe).
HOSTILE_JSON = [
    b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "textDocument/hover", "params": {}}',
    b'{"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover", "params": "not an object"}',
    b'{"jsonrpc": "2.0", "id": 6, "method": "textDocument/hover", "params": {"textDocument": {"uri": 7},'
    b' "position": {"line": -1, "character": 1e308}}}',
    b'{"jsonrpc": "2.0", "id": 99999999999999999999999999, "method": "polc/ping"}',
    b'{"jsonrpc": "1.0", "method": 12}',
    b'{"id": 8}',
    b'[1, 2, 3]',
    rb'"\ud800"',
    b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": "file:///x.pol",'
    b' "languageId": "pol", "version": "one", "text": null}}}',
    b'{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": "file:///none.pol",'
    b' "version": 2}, "contentChanges": [{"range": {"start": {"line": 99, "character": 0},'
    b' "end": {"line": 0, "character": 0}}, "text": "x"}]}}',
]


@pytest.mark.parametrize("body", HOSTILE_JSON, ids=[f"json-{i}" for i in range(len(HOSTILE_JSON))])
def test_hostile_json_content_is_refused_and_the_server_answers_on(server, body):
    id_ = 200 + HOSTILE_JSON.index(body)
    server.send(frame(body) + frame(request(id_, "polc/ping")))
    reply, _ = server.answer(id_)
    assert reply["error"]["code"] == -32601
    assert server.proc.poll() is None


def test_shutdown_is_answered_after_all_that_and_exit_ends_it_cleanly(server):
    server.send(frame(PING, 3))  # one more bad message right before shutdown
    server.send(frame(request(999, "shutdown")))
    assert server.answer(999)[0]["result"] is None
    server.send(frame(json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode()))
    assert server.proc.wait(timeout=TIMEOUT) == 0
    stderr = b"".join(server.stderr).decode(errors="replace")
    assert "polc lsp: skipped" in stderr and "Internal compiler error" not in stderr


@pytest.mark.parametrize("bad, said", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_the_framer_resynchronises_fed_byte_by_byte(bad, said):
    good = request(7, "shutdown")
    framer, events, stream = Framer(), [], bad + frame(good)
    for i in range(len(stream)):
        events += framer.feed(stream[i:i + 1])
    assert events[-1] == Body(good)
    assert all(isinstance(e, Problem) or e.data != good for e in events[:-1])

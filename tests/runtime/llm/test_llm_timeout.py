"""One wall-clock limit per LLM call over all its attempts, enforced even on a reply that
trickles in one byte at a time (an HTTP read timeout bounds only the gap between bytes).

Every server here is one the test started on 127.0.0.1: it trickles its reply one byte
per second, or never answers, or answers at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from refine_helpers import ANALYSIS, STOP, fits_once, task  # noqa: F401  (module fixtures)
from test_llm_gemini import PROMPT, ok_body

from polc.runtime.llm import DEFAULT_TIMEOUT, Message, Reply, TimedOut, TimeLimited, make_backend

LIMIT = 2.0  # seconds: every trickled reply below is hundreds of bytes, so hundreds of seconds long


class SlowGemini:
    """A generateContent server. Each request takes the next behaviour of `script`:
    ("trickle", body) sends the headers, then the body one byte per second; ("silent",)
    reads the request and never answers; ("ok", body) answers at once. Past the script,
    requests are answered "silent"."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = 0
        self.stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.requests += 1
                kind, *rest = fake.script.pop(0) if fake.script else ("silent",)
                if kind == "silent":
                    fake.stop.wait()
                    return
                raw = json.dumps(rest[0]).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    if kind == "ok":
                        self.wfile.write(raw)
                        return
                    for i in range(len(raw)):
                        self.wfile.write(raw[i:i + 1])
                        self.wfile.flush()
                        if fake.stop.wait(1.0):
                            return
                except OSError:
                    pass  # the client hung up: what an abandoned call does

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gemini_env(monkeypatch):
    for var in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "POLC_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-for-a-local-server")
    return monkeypatch


class Stuck:
    """A backend whose call blocks until released; records whether it was told to abandon."""

    name = "stuck:test"

    def __init__(self):
        self.release = threading.Event()
        self.abandoned = False

    def complete(self, messages):
        self.release.wait()
        return Reply("late", 1, 1, 0.0)

    def abandon(self):
        self.abandoned = True
        self.release.set()


def test_a_call_over_its_limit_is_abandoned_with_a_clear_error():
    inner = Stuck()
    with pytest.raises(TimedOut, match=r"The model \(stuck:test\) did not finish its reply within 0.2 s, the limit "
                                       r"of one LLM call over all its attempts \(--llm-timeout SECONDS changes it\)"):
        TimeLimited(inner, 0.2).complete([Message("user", "hi")])
    assert inner.abandoned


def test_errors_and_replies_within_the_limit_pass_through():
    class Fails:
        name = "fails:test"
        position = 7

        def complete(self, messages):
            raise ValueError("the backend's own error")

    limited = TimeLimited(Fails(), 5)
    with pytest.raises(ValueError, match="the backend's own error"):
        limited.complete([])
    assert limited.position == 7 and limited.name == "fails:test"  # the inner backend's attributes
    assert DEFAULT_TIMEOUT == 600.0
    with pytest.raises(ValueError, match="must be a positive number of seconds"):
        TimeLimited(Fails(), 0)


@pytest.mark.parametrize("script", [[("trickle", ok_body("x" * 400))], [("silent",)] * 5],
                         ids=["trickling reply", "never answers, retried"])
@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_gemini_calls_end_within_their_limit(gemini_env, script):
    with SlowGemini(script) as server:
        gemini_env.setenv("POLC_GEMINI_BASE_URL", server.url)
        backend = make_backend("gemini:gemini-test", timeout=LIMIT)
        with pytest.raises(TimedOut, match=rf"gemini:gemini-test\) did not finish its reply within {LIMIT:g} s"):
            backend.complete(PROMPT)
    assert server.requests >= 1


def test_a_good_reply_is_unaffected_by_the_limit(gemini_env):
    with SlowGemini([("ok", ok_body("fine", 3, 4))]) as server:
        gemini_env.setenv("POLC_GEMINI_BASE_URL", server.url)
        reply = make_backend("gemini:gemini-test", timeout=LIMIT).complete(PROMPT)
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("fine", 3, 4)


ABANDONING = """
import sys
from polc.runtime.llm import Message, TimedOut, make_backend
try:
    make_backend("gemini:gemini-test", timeout=1).complete([Message("user", "hi")])
except TimedOut as e:
    print(e)
"""


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_an_abandoned_call_does_not_keep_the_process_alive(gemini_env):
    with SlowGemini([("trickle", ok_body("x" * 400))]) as server:
        gemini_env.setenv("POLC_GEMINI_BASE_URL", server.url)
        # the hang guard of 120 s is far beyond the 1 s limit plus the interpreter's start
        proc = subprocess.run([sys.executable, "-c", ABANDONING], capture_output=True, text=True, timeout=120)
        still_open = not server.stop.is_set()
    assert proc.returncode == 0 and still_open, proc.stderr[-2000:]
    assert "did not finish its reply within 1 s" in proc.stdout


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_refine_stops_cleanly_on_a_trickling_model_and_resume_continues(task, tmp_path, gemini_env, capsys):
    from polc.cli import main

    run = tmp_path / "run"
    argv = ["refine", str(task), "-o", str(run), "--llm", "gemini:gemini-test", "--quick", "--rounds", "1",
            "--llm-timeout", str(LIMIT), "-q"]
    with SlowGemini([("trickle", ok_body(ANALYSIS))]) as server:
        gemini_env.setenv("POLC_GEMINI_BASE_URL", server.url)
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"did not finish its reply within {LIMIT:g} s" in err and f"polc refine --resume {run}" in err
    assert "Traceback" not in err and not (run / "summary.json").exists()
    with SlowGemini([("ok", ok_body(ANALYSIS)), ("ok", ok_body(STOP))]) as server:
        gemini_env.setenv("POLC_GEMINI_BASE_URL", server.url)
        code = main(["refine", "--resume", str(run), "-q"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads((run / "summary.json").read_text())
    assert "run ended: the model chose STOP" in out and summary["rounds"][0]["move"]["kind"] == "STOP"
    assert server.requests == 2
    assert Path(run / "round_00.interrupted-1").is_dir()  # the stopped round, kept beside the redone one

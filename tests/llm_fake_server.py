"""A fake HTTP API on 127.0.0.1 for the LLM backend tests (Gemini's generateContent,
OpenAI's Chat Completions, Anthropic's Messages): answers POSTs from a script and records
every request, so the real SDKs can be driven through their whole wire path."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietServer(ThreadingHTTPServer):
    """A client that hangs up (the timeout tests) is expected, not an error to print."""

    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class FakeAPI:
    """Answers POSTs from a script of (status, body, delay[, headers]), in order (500 once
    the script runs out), and records each request as {"path", "headers", "body"}."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        self.times: list[float] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                raw_in = self.rfile.read(length)
                fake.times.append(time.monotonic())
                fake.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": json.loads(raw_in or b"{}")})
                step = fake.script.pop(0) if fake.script else (500, {}, 0)
                status, body, delay = step[:3]
                headers = step[3] if len(step) > 3 else {}
                time.sleep(delay)
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:
                    pass  # the client gave up (timeout test)

            def log_message(self, *args):
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

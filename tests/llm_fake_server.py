"""A fake HTTP API on 127.0.0.1 for the LLM backend tests (Gemini's generateContent,
OpenAI's Chat Completions, Anthropic's Messages): answers POSTs from a script and records
every request, so the real SDKs can be driven through their whole wire path.

`chat_replies(texts)` is a script for a Chat Completions server that answers `texts` in
order and counts tokens as a provider would roughly (4 characters per token, of the
request's messages and of the reply), so budget tests see token counts that grow with the
prompt."""

from __future__ import annotations

import json
import math
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


def chat_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def chat_completion(text: str, prompt_tokens: int, completion_tokens: int, finish: str = "stop") -> dict:
    """A Chat Completions response body with one choice and its usage."""
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def chat_replies(texts):
    """A FakeAPI script answering Chat Completions requests with `texts` in order, usage
    counted from the request (the messages' characters / 4) and the reply (its characters / 4)."""

    def answer(text):
        def step(body):
            prompt = sum(chat_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
            return 200, chat_completion(text, prompt, chat_tokens(text)), 0
        return step

    return [answer(t) for t in texts]


def chat_choices(texts):
    """A FakeAPI step answering one Chat Completions request with several choices (as many of
    `texts` as its `n` asks for), usage counted once for the request: the prompt once, the
    output of every choice."""

    def step(body):
        chosen = list(texts)[:int(body.get("n", 1))]
        prompt = sum(chat_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
        out = chat_completion(chosen[0], prompt, sum(chat_tokens(t) for t in chosen))
        out["choices"] = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                          for i, t in enumerate(chosen)]
        return 200, out, 0

    return step


class FakeAPI:
    """Answers POSTs from a script of (status, body, delay[, headers]), in order (500 once
    the script runs out), and records each request as {"path", "headers", "body"}. A step
    may also be a function of the request's JSON body returning such a tuple."""

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
                body_in = json.loads(raw_in or b"{}")
                fake.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": body_in})
                step = fake.script.pop(0) if fake.script else (500, {}, 0)
                if callable(step):
                    step = step(body_in)
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

"""`polc llm check --llm SPEC [--llm-option KEY=VALUE]...`: one tiny call to the model, to
learn before a long run whether the key, the endpoint and the model name all work.

Registered by `polc.runtime.commands` (through `register`); nothing heavy is imported until
the command runs (the SDKs load with the backend).

Exit codes: 0 the model answered (its reply, tokens and time are printed); 1 the call
failed (the message says what to fix: key, endpoint, model, limits); 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..cli import UsageError

PROMPT = "Reply with the single word: ready"


def cmd_check(args: argparse.Namespace) -> int:
    from . import LLMError, Message, check_timeout, make_backend

    options = {}
    for pair in args.llm_option or []:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"polc: --llm-option takes KEY=VALUE (e.g. seed=0), not {pair!r}.")
        options[key.strip()] = value.strip()
    try:
        timeout = check_timeout(args.llm_timeout)
        backend = make_backend(args.llm, timeout=timeout, options=options)
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    except LLMError as e:
        print(f"polc: {e}", file=sys.stderr)
        return 1
    try:
        reply = backend.complete([Message("user", PROMPT)])
    except LLMError as e:
        print(f"polc: {args.llm}: {e}", file=sys.stderr)
        return 1
    extra = "".join(f", {n} {what}" for n, what in ((reply.reasoning_tokens, "reasoning"),
                                                     (reply.cached_input_tokens, "cached input"))
                    if n is not None)
    text = " ".join(reply.text.split())
    print(f"{args.llm}: OK in {reply.seconds:.2f} s, {reply.input_tokens} input / {reply.output_tokens} "
          f"output tokens{extra}; it replied: {text[:200]!r}")
    return 0


def register(sub: Any) -> None:
    """Add `polc llm check` to the `polc` subcommands."""
    llm = sub.add_parser("llm", help="the LLM backends: check that a model answers")
    commands = llm.add_subparsers(dest="llm_command", metavar="COMMAND", required=True)
    c = commands.add_parser("check", help="one tiny call: are the key, the endpoint and the model all OK?")
    c.add_argument("--llm", required=True, metavar="SPEC",
                   help="gemini:MODEL, openai:MODEL (OPENAI_BASE_URL: any OpenAI-compatible server), "
                        "anthropic:MODEL or replay:DIR (docs/llm.md)")
    c.add_argument("--llm-option", action="append", metavar="KEY=VALUE",
                   help="a request parameter of openai:/anthropic: models, repeatable")
    c.add_argument("--llm-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="wall-clock limit of the call over all its attempts (default 60)")
    c.set_defaults(func=cmd_check)

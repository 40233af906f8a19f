"""`polc analyze`: the built-in diagnostics of a trace, or your own analysis in the sandbox.

    polc analyze TRACE --policy P.pol [--params F] [--demo D] [--json | --all]
    polc analyze TRACE --code my_checks.py          (code defining analyze(df))

Without --policy the policy source recorded in the trace is used. Exit codes: 0 the
report (or the analysis output) was printed, whatever it found; 1 the inputs are bad
(an unreadable or corrupt trace, a trace of another policy, params or a demonstration
that do not fit, analysis code that fails), said in one sentence; 2 bad usage.
Nothing heavy is imported until the command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


class _Bad(Exception):
    """Bad input: exit 1 with this sentence."""


def _program(args: argparse.Namespace, metadata: dict):
    from polc import PolError, loads
    from ..cli import UsageError, load_program

    if args.policy:
        try:
            return load_program(args.policy)[0]
        except UsageError as e:
            raise _Bad(str(e).removeprefix("polc: ")) from None
    recorded = metadata.get("policy")
    source = recorded.get("source") if isinstance(recorded, dict) else None
    if recorded is not None and not (isinstance(recorded, dict) and isinstance(source, (str, type(None)))):
        raise _Bad(f"{args.trace}: its polc metadata's \"policy\" is not an object with the policy's source "
                   f"text; give the policy with --policy P.pol.")
    if not source:
        raise _Bad(f"{args.trace} does not record its policy's source; give it with --policy P.pol.")
    try:
        return loads(source, f"{args.trace} (recorded policy)")
    except PolError:
        raise _Bad(f"the policy recorded in {args.trace} no longer checks; give it with --policy P.pol.") from None


def _metadata(path: str) -> dict:
    """The trace's run metadata, reading no column; a clear sentence if it is no table."""
    from .base import as_sentence
    from ..io.table import TableError, read_table

    try:
        return read_table(path, columns=[]).metadata
    except TableError as e:
        raise _Bad(as_sentence(str(e))) from None


def _readable(path: str) -> None:
    """Read the whole trace once, so a damaged page (its checksum) or a malformed column is a
    clear sentence here; the sandbox's own reader does not verify checksums."""
    from .base import as_sentence
    from ..io.table import TableError, read_table

    try:
        read_table(path)
    except TableError as e:
        raise _Bad(as_sentence(str(e))) from None


def _builtin(args: argparse.Namespace) -> None:
    from .base import DiagnosticsError
    from .report import builtin_report

    metadata = _metadata(args.trace) if not args.policy else {}
    try:
        report = builtin_report(_program(args, metadata), args.trace, params=args.params, demo=args.demo)
    except DiagnosticsError as e:
        raise _Bad(str(e)) from None
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        sys.stdout.write(report.text(budget=10 ** 9 if args.all else 4000))


def _user_code(args: argparse.Namespace) -> int:
    from ..sandbox.process import SandboxUnavailable, run_analysis

    try:
        with open(args.code, encoding="utf-8") as f:
            code = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise _Bad(f"cannot read '{args.code}': {getattr(e, 'strerror', None) or e}.") from None
    _readable(args.trace)  # fail here, clearly, rather than inside the sandbox
    try:
        result = run_analysis(code, args.trace)
    except SandboxUnavailable as e:
        raise _Bad(str(e)) from None
    _write_output(result.output, os.path.basename(args.code))
    if not result.ok:
        print(f"polc: {result.error}", file=sys.stderr)
        return 1
    return 0


def _write_output(output: str, name: str) -> None:
    """The analysis's output, to standard output. On a terminal it is framed as the
    analysis's, so a line it prints as "polc: ..." never reads as polc's own; piped, it is
    passed on unchanged for scripts."""
    if not sys.stdout.isatty():
        sys.stdout.write(output)
        return
    print(f"--- output of {name} (the analysis's words, not polc's) ---")
    sys.stdout.write(output if not output or output.endswith("\n") else output + "\n")
    print(f"--- end of the output of {name} ---")


def cmd_analyze(args: argparse.Namespace) -> int:
    try:
        if not os.path.exists(args.trace):
            raise _Bad(f"cannot read '{args.trace}': no such file.")
        for path in (args.policy, args.params, args.demo):
            if path is not None and not os.path.exists(path):
                raise _Bad(f"cannot read '{path}': no such file.")
        if args.code is None or args.policy is not None:
            _builtin(args)
        return _user_code(args) if args.code is not None else 0
    except _Bad as e:
        print(f"polc: {e}", file=sys.stderr)
        return 1


def register(sub: Any) -> None:
    """Add `polc analyze` to the subcommands."""
    c = sub.add_parser("analyze", help="diagnostics of a rollout trace (built-in checks, or your own code)",
                       description="Built-in diagnostics of a trace (no LLM), or your own analysis code "
                                   "(defining analyze(df)) run in the sandbox.")
    c.add_argument("trace", help="the .parquet trace (from polc rollout)")
    c.add_argument("--policy", help="the .pol policy (default: the source recorded in the trace)")
    c.add_argument("--params", help="the params file the trace was run with (needed for mlp blocks)")
    c.add_argument("--demo", help="a demonstration table to compare the actions with")
    c.add_argument("--code", help="a .py file defining analyze(df), run on the trace in the sandbox")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="every finding and the numbers behind them, as JSON")
    g.add_argument("--all", action="store_true", help="every finding as text (no length limit)")
    c.set_defaults(func=cmd_analyze)


__all__ = ["cmd_analyze", "register"]

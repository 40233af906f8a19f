"""The `polc` command line.

    polc check FILE [--format json] [--werror] [-v]
    polc compile FILE -o OUT [--emit python|hlo|json]
    polc graph FILE -o OUT.svg|OUT.dot
    polc fmt FILE [--check | -i]

Exit codes: 0 success, 1 the program has errors (or `fmt --check` found a
difference), 2 bad usage or unreadable input, 3 an internal compiler error.
No input, however broken, produces a Python traceback (set POLC_DEBUG=1 to
see one for an internal error). `check`, `fmt` and `graph` never import JAX.

The CLI is the driver, not a compiler phase: commands of the runtime
(`polc fit`, `polc rollout`, ...) are looked up by name in
`polc.runtime.commands` when that module exists, so the compiler's phases
never import the runtime.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Callable, Optional, Sequence

from .diagnostics import Diagnostic, InternalCompilerError, PolError, dumps, render_all
from .files import write_atomic  # noqa: F401  (re-exported: `from polc.cli import write_atomic`)


class UsageError(Exception):
    """Bad command-line use or unreadable input: exit code 2."""


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"polc: cannot read '{path}': no such file.") from None
    except IsADirectoryError:
        raise UsageError(f"polc: '{path}' is a directory, not a .pol file.") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"polc: '{path}' is not UTF-8 text ({e.reason} at byte {e.start}).") from None
    except OSError as e:
        raise UsageError(f"polc: cannot read '{path}': {e.strerror}.") from None


def _emit_diagnostics(diags: Sequence[Diagnostic], text: str, fmt: str, out=None) -> None:
    out = sys.stderr if out is None else out  # looked up now, so redirected stderr is honoured
    if fmt == "json":
        print(dumps(diags), file=sys.stdout)
    elif diags:
        print(render_all(diags, text), file=out)


def _load(path: str, analyze: bool = True):
    """(program, text) or raise PolError."""
    from . import loads

    text = _read(path)
    return loads(text, path, analyze=analyze), text


# ---- commands -----------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    text = _read(args.file)
    from . import loads

    try:
        program = loads(text, args.file)
    except PolError as e:
        _emit_diagnostics(e.diagnostics, text, args.format)
        return 1
    diags = list(program.warnings)
    if args.verbose and program.analysis is not None:
        from . import errors

        for r in program.analysis.intents:
            if r.status == "proved":
                diags.append(errors.intent_proved_info(r.intent.span, r.intent.text))
    if getattr(args, "env", None):
        diags += _env_diagnostics(program, args.env)
    _emit_diagnostics(diags, text, args.format)
    failed = any(d.is_error for d in diags) or (args.werror and any(d.severity == "warning" for d in diags))
    if args.format == "text" and not failed:
        tp = program.typed
        counts = (len(tp.nodes), "node"), (len(tp.weights), "weight"), (len(tp.intents), "intent"), \
            (sum(d.severity == "warning" for d in diags), "warning")
        print(f"{args.file}: ok (" + ", ".join(f"{n} {w}{'' if n == 1 else 's'}" for n, w in counts) + ")",
              file=sys.stderr)
    return 1 if failed else 0


def _env_diagnostics(program, env: str) -> list[Diagnostic]:
    try:
        mod = importlib.import_module("polc.runtime.envs")
    except ImportError:
        raise UsageError("polc: --env needs the polc runtime, which is not installed.") from None
    return mod.check_against_env(program.typed, env)


def cmd_compile(args: argparse.Namespace) -> int:
    program, _ = _load(args.file)
    tp = program.typed
    from . import emit

    if args.emit == "python":
        out = emit.emit_python(tp)
    elif args.emit == "hlo":
        out = emit.emit_hlo(tp)
    else:
        intervals = program.analysis.intervals if program.analysis is not None else None
        out = emit.emit_json(tp, intervals)
    if args.output in (None, "-"):
        sys.stdout.write(out)
    else:
        write_atomic(args.output, out)
        print(f"wrote {args.output}", file=sys.stderr)
    if program.warnings:
        _emit_diagnostics(program.warnings, tp.source, "text")
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    program, _ = _load(args.file, analyze=False)
    from . import graph

    fmt = args.format or ("dot" if (args.output or "").endswith(".dot") else "svg")
    out = graph.to_dot(program.typed) if fmt == "dot" else graph.to_svg(program.typed)
    if args.output in (None, "-"):
        sys.stdout.write(out)
    else:
        write_atomic(args.output, out)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_fmt(args: argparse.Namespace) -> int:
    from .fmt import format_program
    from .parse import parse_program

    text = _read(args.file)
    formatted = format_program(parse_program(text, args.file))
    if args.check:
        if formatted != text:
            print(f"{args.file}: not formatted (run `polc fmt -i {args.file}`)", file=sys.stderr)
            return 1
        return 0
    if args.in_place:
        if formatted != text:
            write_atomic(args.file, formatted)
        return 0
    sys.stdout.write(formatted)
    return 0


# ---- driver -------------------------------------------------------------------------


COMPILER_COMMANDS = ("check", "compile", "graph", "fmt")


def build_parser(with_runtime: bool = True) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="polc", description="The Pol policy compiler.")
    p.add_argument("--version", action="version", version=f"polc {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("check", help="static checks: names, cycles, types, shapes, signs, intents")
    c.add_argument("file")
    c.add_argument("--format", choices=("text", "json"), default="text", help="diagnostics as text or JSON")
    c.add_argument("--werror", action="store_true", help="treat warnings as errors")
    c.add_argument("-v", "--verbose", action="store_true", help="also list the intents that were proved")
    c.add_argument("--env", help="also check obs/action declarations against an environment's schema")
    c.set_defaults(func=cmd_check)

    c = sub.add_parser("compile", help="compile to a standalone JAX module, StableHLO, or the checked graph")
    c.add_argument("file")
    c.add_argument("-o", "--output", help="output file (default: standard output)")
    c.add_argument("--emit", choices=("python", "hlo", "json"), default="python")
    c.set_defaults(func=cmd_compile)

    c = sub.add_parser("graph", help="draw the dataflow graph (SVG, or DOT for a .dot output)")
    c.add_argument("file")
    c.add_argument("-o", "--output")
    c.add_argument("--format", choices=("svg", "dot"))
    c.set_defaults(func=cmd_graph)

    c = sub.add_parser("fmt", help="canonical formatting (to standard output unless -i)")
    c.add_argument("file")
    g = c.add_mutually_exclusive_group()
    g.add_argument("-i", "--in-place", action="store_true", help="rewrite the file")
    g.add_argument("--check", action="store_true", help="exit 1 if the file is not formatted")
    c.set_defaults(func=cmd_fmt)

    if with_runtime:
        _register_runtime_commands(sub)
    return p


def _register_runtime_commands(sub) -> None:
    """Runtime commands register themselves via `polc.runtime.commands.register(sub)`."""
    try:
        mod = importlib.import_module("polc.runtime.commands")
    except ImportError:
        return
    mod.register(sub)


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The compiler's own commands never load the runtime (pyarrow, gymnasium...): `polc check` stays fast.
    parser = build_parser(with_runtime=not (argv and argv[0] in COMPILER_COMMANDS))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except PolError as e:
        print(render_all(e.diagnostics, e.source_text), file=sys.stderr)
        return 1
    except UsageError as e:
        print(str(e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("polc: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except InternalCompilerError as e:
        if os.environ.get("POLC_DEBUG"):
            raise
        print(str(e), file=sys.stderr)
        return 3
    except Exception as e:  # a bug in polc: say so, without a traceback
        if os.environ.get("POLC_DEBUG"):
            raise
        print(f"Internal compiler error: {type(e).__name__}: {e}\n"
              "This is a bug in polc, not in your program; rerun with POLC_DEBUG=1 for a traceback "
              "and report it with the .pol file.", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

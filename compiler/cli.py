"""The `polc` command line.

    polc check FILE [--format json] [--werror] [-v] [--watch]
    polc compile FILE -o OUT.py|OUT.mlir|OUT.json|OUT.c [--emit python|hlo|json|c] [--params P]
    polc graph FILE -o OUT.svg|OUT.dot
    polc fmt FILE [--check | -i]
    polc lsp                              (the language server, on stdio)

Exit codes: 0 success, 1 the program has errors (or `fmt --check` found a
difference), 2 bad usage or unreadable input, 3 an internal compiler error.
No input, however broken, produces a Python traceback (set POLC_DEBUG=1 to
see one for an internal error). `check`, `fmt` and `graph` never import JAX.
An output's extension names its format (`compile -o x.mlir` is StableHLO,
`graph -o x.dot` is DOT); an extension that contradicts `--emit`/`--format`,
or names a format the command cannot write, is a usage error.

The CLI is the driver, not a compiler phase: commands of the runtime
(`polc fit`, `polc rollout`, ...) are looked up by name in
`polc.runtime.commands` when that module exists, so the compiler's phases
never import the runtime.

For other parts (the runtime's commands): `load_file(path)` reads and checks a file as
these commands do, and `UsageError` is the exit-code-2 error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from .frontend.ast import Span
from .messages import Diagnostic, InternalCompilerError, PolError, dumps, render_all
from .util.files import write_error_text

if TYPE_CHECKING:  # pragma: no cover
    from . import Program


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


def load_file(path: str, analyze: bool = True) -> tuple["Program", str]:
    """Read and check the `.pol` file at `path` as a command does: `(program, its text)`.

    Raises `UsageError` (a command's exit code 2, one sentence naming `path`) when the
    file cannot be read or is not UTF-8, and `PolError` carrying every diagnostic when
    the program has errors; the text is returned so a caller can render them. The
    runtime's commands load their policies through this (`polc.runtime.cli.load_program`)."""
    from . import loads

    text = _read(path)
    return loads(text, path, analyze=analyze), text


# ---- commands -----------------------------------------------------------------------


def _undecodable_at(path: str) -> Optional[Span]:
    """Where a file that exists stops being UTF-8 (line and column as editors count them), or None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = re.split(r"\r\n|\r|\n", data[:e.start].decode("utf-8"))
        line, column = len(before), len(before[-1]) + 1
        return Span(path, line, column, line, column + 1)
    except OSError:
        return None
    return None


def _unreadable(path: str, why: str) -> Diagnostic:
    """`polc check --format json` reports an unreadable file as a diagnostic too (code E0000),
    located at the first byte that is not UTF-8 when there is one."""
    return Diagnostic(severity="error", code="E0000", phase="Input", span=_undecodable_at(path),
                      message=why, hint="pass the path of a UTF-8 .pol file")


def cmd_check(args: argparse.Namespace) -> int:
    if getattr(args, "watch", False):
        from .watch import watch

        _read(args.file)  # a file that is not there is a usage error now, not a silent wait
        return watch(args.file, lambda: _check_once(args))
    return _check_once(args)


def _check_once(args: argparse.Namespace) -> int:
    try:
        text = _read(args.file)
    except UsageError as e:
        if args.format != "json":
            raise
        print(dumps([_unreadable(args.file, str(e).removeprefix("polc: "))]))
        return 2
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
        diags += _env_diagnostics(program, args.env, args.schema, args.env_kwargs)
    _emit_diagnostics(diags, text, args.format)
    failed = any(d.is_error for d in diags) or (args.werror and any(d.severity == "warning" for d in diags))
    if args.format == "text" and not failed:
        tp = program.typed
        counts = (len(tp.nodes), "node"), (len(tp.weights), "weight"), (len(tp.intents), "intent"), \
            (sum(d.severity == "warning" for d in diags), "warning")
        if tp.states:  # memoryless programs print what they always printed
            counts = counts[:2] + ((len(tp.states), "state"),) + counts[2:]
        print(f"{args.file}: ok (" + ", ".join(f"{n} {w}{'' if n == 1 else 's'}" for n, w in counts) + ")",
              file=sys.stderr)
    return 1 if failed else 0


def _env_diagnostics(program, env: str, schema: Optional[str] = None, env_kwargs: Optional[str] = None
                     ) -> list[Diagnostic]:
    import json

    kwargs = None
    if env_kwargs is not None:
        try:
            kwargs = json.loads(env_kwargs)
        except ValueError as e:
            raise UsageError(f"polc: --env-kwargs is not valid JSON ({e}): {env_kwargs}") from None
        if not isinstance(kwargs, dict):
            raise UsageError(f"polc: --env-kwargs must be a JSON object of gymnasium.make arguments, not {env_kwargs}")
    try:
        mod = importlib.import_module("polc.runtime.envs")
    except ImportError:
        raise UsageError("polc: --env needs the polc runtime, which is not installed.") from None
    if schema is not None or kwargs is not None:
        return mod.check_against_gym(program.typed, env, schema, kwargs)
    return mod.check_against_env(program.typed, env)


# The extensions each output format is written under (the first is the one to suggest).
EMIT_EXTENSIONS = {"python": (".py",), "hlo": (".mlir",), "json": (".json",), "c": (".c",)}
GRAPH_EXTENSIONS = {"svg": (".svg",), "dot": (".dot", ".gv")}


def output_format(output: Optional[str], chosen: Optional[str], formats: dict[str, tuple[str, ...]],
                  default: str, flag: str) -> str:
    """The format to write: `chosen` (the flag), else the one `output`'s extension names, else
    `default` when there is no extension. An extension of another format, or of none the command
    writes, is a UsageError (no file is written under a name that says something else)."""
    ext = os.path.splitext(output or "")[1].lower() if output not in (None, "-") else ""
    by_ext = next((f for f, exts in formats.items() if ext in exts), None)
    if ext and by_ext is None:
        names = ", ".join(e for exts in formats.values() for e in exts)
        raise UsageError(f"polc: cannot write '{output}': this command writes {names} files "
                         f"({flag} {'|'.join(formats)}).")
    if chosen is not None:
        if by_ext is not None and by_ext != chosen:
            raise UsageError(f"polc: '{output}' names {by_ext} output but {flag} is {chosen}: "
                             f"write to a {formats[chosen][0]} file, or drop {flag}.")
        return chosen
    return by_ext or default


def _c_weights(tp, params_path: Optional[str]):
    """The weights the C code bakes in: a params file's, read by the runtime's params reader
    (looked up by name: the compiler never imports the runtime), else the declared initial
    values (mlps as `init(PRNGKey(0))` draws them)."""
    import jax

    from .backend.emit_c import weight_values
    from .backend.lower import lower

    policy = lower(tp)
    if params_path is None:
        return weight_values(tp, policy.init(jax.random.PRNGKey(0)),
                             "the declared initial values (mlps: init(PRNGKey(0)))")
    if not os.path.exists(params_path):
        raise UsageError(f"polc: cannot read '{params_path}': no such file.")
    try:
        mod = importlib.import_module("polc.runtime.io.params")
    except ImportError:
        raise UsageError("polc: --params needs the polc runtime, which is not installed.") from None
    try:
        params = mod.load_params(params_path, policy)
    except mod.ParamsError as e:
        raise UsageError(f"polc: {e}") from None
    return weight_values(tp, params, f"the params file {os.path.basename(params_path)}")


def _compile_c(args: argparse.Namespace, tp) -> None:
    """`compile -o X.c`: X.c and X.h beside it."""
    from .backend.emit_c import emit_c
    from .util.files import write_atomic

    if args.output in (None, "-"):
        raise UsageError("polc: C output is two files (X.c and X.h): name the .c file with -o.")
    stem = os.path.splitext(args.output)[0]
    header = os.path.basename(stem) + ".h"
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", header):
        raise UsageError(f"polc: cannot write '{args.output}': the .c file includes its header by name, so "
                         f"the name may hold only letters, digits and _ . + -.")
    src = emit_c(tp, _c_weights(tp, args.params), header)
    write_atomic(stem + ".h", src.h)
    write_atomic(args.output, src.c)
    print(f"wrote {args.output} and {stem}.h", file=sys.stderr)


def cmd_compile(args: argparse.Namespace) -> int:
    emit_as = output_format(args.output, args.emit, EMIT_EXTENSIONS, "python", "--emit")
    if args.params is not None and emit_as != "c":
        raise UsageError("polc: --params bakes weights into C output only (-o X.c); the other formats "
                         "take params when they run.")
    program, _ = load_file(args.file)
    tp = program.typed
    from .backend import emit

    if emit_as == "c":
        _compile_c(args, tp)
        if program.warnings:
            _emit_diagnostics(program.warnings, tp.source, "text")
        return 0
    if emit_as == "python":
        out = emit.emit_python(tp)
    elif emit_as == "hlo":
        out = emit.emit_hlo(tp)
    else:
        intervals = program.analysis.intervals if program.analysis is not None else None
        out = emit.emit_json(tp, intervals)
    if args.output in (None, "-"):
        sys.stdout.write(out)
    else:
        from .util.files import write_atomic

        write_atomic(args.output, out)
        print(f"wrote {args.output}", file=sys.stderr)
    if program.warnings:
        _emit_diagnostics(program.warnings, tp.source, "text")
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    fmt = output_format(args.output, args.format, GRAPH_EXTENSIONS, "svg", "--format")
    program, _ = load_file(args.file, analyze=False)
    from . import graph

    out = graph.to_dot(program.typed) if fmt == "dot" else graph.to_svg(program.typed)
    if args.output in (None, "-"):
        sys.stdout.write(out)
    else:
        from .util.files import write_atomic

        write_atomic(args.output, out)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_fmt(args: argparse.Namespace) -> int:
    from .fmt import format_program
    from .frontend.parse import parse_program

    text = _read(args.file)
    formatted = format_program(parse_program(text, args.file))
    if args.check:
        if formatted != text:
            print(f"{args.file}: not formatted (run `polc fmt -i {args.file}`)", file=sys.stderr)
            return 1
        return 0
    if args.in_place:
        if formatted != text:
            from .util.files import write_atomic

            write_atomic(args.file, formatted)
        return 0
    sys.stdout.write(formatted)
    return 0


def cmd_lsp(args: argparse.Namespace) -> int:
    # Looked up by name, like the runtime's commands: the compiler's modules never import polc.lsp.
    try:
        mod = importlib.import_module("polc.lsp")
    except ImportError as e:
        raise UsageError(f"polc: the language server needs pygls and lsprotocol ({e}).") from None
    return mod.serve()


# ---- driver -------------------------------------------------------------------------


COMPILER_COMMANDS = ("check", "compile", "graph", "fmt", "lsp")


def build_parser(with_runtime: bool = True) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="polc", description="The Pol policy compiler.")
    p.add_argument("--version", action="version", version=f"polc {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("check", help="static checks: names, cycles, types, shapes, signs, intents")
    c.add_argument("file")
    c.add_argument("--format", choices=("text", "json"), default="text", help="diagnostics as text or JSON")
    c.add_argument("--werror", action="store_true", help="treat warnings as errors")
    c.add_argument("-v", "--verbose", action="store_true", help="also list the intents that were proved")
    c.add_argument("--env", help="also check obs/action declarations against an environment's schema "
                                 "(a name, gym:ID or an env.toml)")
    c.add_argument("--schema", metavar="FILE.toml", help="with --env gym:ID: the schema file naming its components")
    c.add_argument("--env-kwargs", metavar="JSON", help="with --env gym:ID: keyword arguments of gymnasium.make")
    c.add_argument("--watch", action="store_true", help="check again every time the file is saved (Ctrl-C stops)")
    c.set_defaults(func=cmd_check)

    c = sub.add_parser("compile", help="compile to a standalone JAX module, StableHLO, the checked graph, or C")
    c.add_argument("file")
    c.add_argument("-o", "--output", help="output file; .py, .mlir, .json or .c picks the format "
                                          "(default: standard output)")
    c.add_argument("--emit", choices=("python", "hlo", "json", "c"),
                   help="python: a standalone JAX module; hlo: StableHLO text via jax.export; json: the checked "
                        "graph with proved intervals; c: C99 source and header (X.c and X.h, docs/deploying.md) "
                        "(default: from -o's extension, else python)")
    c.add_argument("--params", metavar="P", help="with C output: bake in the weights of this params file "
                                                  "(default: the declared initial values)")
    c.set_defaults(func=cmd_compile)

    c = sub.add_parser("graph", help="draw the dataflow graph (SVG, or DOT for a .dot output)")
    c.add_argument("file")
    c.add_argument("-o", "--output", help="output file; .svg or .dot picks the format (default: standard output)")
    c.add_argument("--format", choices=("svg", "dot"), help="svg: a drawing; dot: Graphviz source "
                                                             "(default: from -o's extension, else svg)")
    c.set_defaults(func=cmd_graph)

    c = sub.add_parser("fmt", help="canonical formatting (to standard output unless -i)")
    c.add_argument("file")
    g = c.add_mutually_exclusive_group()
    g.add_argument("-i", "--in-place", action="store_true", help="rewrite the file")
    g.add_argument("--check", action="store_true", help="exit 1 if the file is not formatted")
    c.set_defaults(func=cmd_fmt)

    c = sub.add_parser("lsp", help="the language server on standard input/output (for editors; docs/editors.md)")
    c.set_defaults(func=cmd_lsp)

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


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def _unknown_command(name: str, commands: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, commands, n=1, cutoff=0.6)
    guess = f' Did you mean "{close[0]}"?' if close else ""
    return f'polc: "{name}" is not a polc command.{guess} The commands: {", ".join(commands)} (polc --help).'


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The compiler's own commands never load the runtime (pyarrow, gymnasium...): `polc check` stays fast.
    parser = build_parser(with_runtime=not (argv and argv[0] in COMPILER_COMMANDS))
    if argv and not argv[0].startswith("-") and argv[0] not in _commands(parser):
        parser.print_usage(sys.stderr)  # then exit as argparse does on every other usage error
        parser.exit(2, _unknown_command(argv[0], _commands(parser)) + "\n")
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
    except OSError as e:  # a full or read-only disk is the user's to fix (exit 1); anything else a bug
        text = write_error_text(e)
        if text is None:
            if os.environ.get("POLC_DEBUG"):
                raise
            return _internal_error(e)
        print(text, file=sys.stderr)
        return 1
    except Exception as e:
        if os.environ.get("POLC_DEBUG"):
            raise
        return _internal_error(e)


def _internal_error(e: Exception) -> int:
    """A bug in polc: say so, without a traceback."""
    print(f"Internal compiler error: {type(e).__name__}: {e}\n"
          "This is a bug in polc, not in your program; rerun with POLC_DEBUG=1 for a traceback "
          "and report it with the .pol file.", file=sys.stderr)
    return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

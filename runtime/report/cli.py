"""`polc report RUNDIR|RESULTSDIR|TRACE.parquet [--policy P.pol] -o OUT.html`.

What the input is, is read from it: a directory with run.json is a refinement run, one
with results.json an experiment, a .parquet file a trace. Exit codes as every runtime
command: 0 written, 1 the input is not usable as it is (the message says which file and
why), 2 bad usage. Nothing is written unless the whole page was made.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .. import cli as rc
from ..cli import UsageError


def _what(path: Path) -> str:
    if path.is_dir():
        if (path / "run.json").exists():
            return "run"
        if (path / "results.json").exists():
            return "experiment"
        raise rc.Failure(f"'{path}' is neither a refinement run (no run.json) nor an experiment's output "
                         "(no results.json); pass a `polc refine` run directory, a `polc experiment` output "
                         "directory or a trace .parquet file.")
    if path.suffix == ".parquet":
        return "trace"
    if path.exists():
        raise UsageError(f"polc: cannot report on '{path}': pass a run directory, an experiment's output "
                         "directory or a .parquet trace.")
    raise rc.no_such_run(str(path))


def cmd_report(args: argparse.Namespace) -> int:
    from polc.util.files import write_atomic

    output = args.output
    if os.path.splitext(output)[1].lower() not in (".html", ".htm"):
        raise UsageError(f"polc: cannot write '{output}': polc report writes one .html file (-o OUT.html).")
    source = Path(args.input)
    what = _what(source)
    if args.policy and what != "trace":
        raise UsageError(f"polc: --policy is for a trace; a {what} directory holds its own structures.")
    program = rc.load_program(args.policy)[0] if args.policy else None

    from .page import ReportError

    try:
        if what == "run":
            from .run import run_page

            text = run_page(source)
        elif what == "experiment":
            from .experiment import experiment_page

            text = experiment_page(source)
        else:
            from .trace import trace_page

            text = trace_page(str(source), program)
    except ReportError as e:
        raise rc.Failure(f"{e}.") from None
    try:
        write_atomic(output, text)
    except OSError as e:
        raise UsageError(f"polc: cannot write '{output}': {e.strerror or e}.") from None
    print(f"wrote {output} ({len(text.encode()) // 1024} KiB; open it in a browser, it needs no server)",
          file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    """Add `polc report` to the `polc` subcommands."""
    c = sub.add_parser("report", help="one self-contained web page of a refinement run, an experiment or a trace")
    c.add_argument("input", help="a `polc refine` run directory, a `polc experiment` output directory, "
                                 "or a trace .parquet")
    c.add_argument("--policy", help="the .pol the trace was made with (its source and graph on the page)")
    c.add_argument("-o", "--output", required=True, help="the .html file to write")
    c.set_defaults(func=rc.guard(cmd_report))

"""`polc plot TABLE.parquet COL [COL ...] [-o OUT.png|OUT.svg|OUT.pdf] [--episode E ...] [--lines]`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import cli as rc
from ..cli import UsageError


def cmd_plot(args: argparse.Namespace) -> int:
    from .figures import default_output, figure_format, plot
    from ..io.table import TableError

    output = args.output or default_output(args.table, args.columns)
    try:
        figure_format(output)  # a wrong extension is refused before the table is read
    except TableError as e:
        raise UsageError(f"polc: {e}") from None
    table = rc.read_table_or_usage(args.table)
    try:
        plot(table, args.columns, output, episodes=args.episode, lines=args.lines)
    except TableError as e:
        raise UsageError(f"polc: {e}") from None
    print(f"wrote {output}", file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    """Add `polc plot` to the `polc` subcommands."""
    c = sub.add_parser("plot", help="plot columns of a trace or demonstration table (PNG, SVG or PDF)")
    c.add_argument("table", help="the .parquet table")
    c.add_argument("columns", nargs="+", metavar="COL", help="column (latent.slip, obs.wheel_speed[2], ...)")
    c.add_argument("-o", "--output", help="the image to write; its extension (.png, .svg, .pdf) picks the format (default: a PNG beside the table)")
    c.add_argument("--episode", type=int, action="append", help="only this episode (repeatable)")
    c.add_argument("--lines", action="store_true", help="two columns as lines against the step, not a scatter")
    c.set_defaults(func=rc.guard(cmd_plot))

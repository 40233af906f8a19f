"""The runtime's commands for the `polc` CLI: `polc.cli` calls `register(sub)` when the
runtime is installed, and each part adds its own commands from its `cli.py`.

This module only registers; the helpers the commands share are in `polc.runtime.cli`,
so no part's CLI imports the module that registers it. Importing it imports nothing
heavy: every part's `cli.py` defers numpy, pyarrow, gymnasium and jax to the command.
"""

from __future__ import annotations

from typing import Any

from .diagnostics.cli import register as add_analyze  # polc analyze: built-in diagnostics, or your own code
from .experiment.cli import register as add_experiment  # polc experiment: Table 1 / Figure 5 in one command
from .il.cli import register as add_fit  # polc fit: imitation learning
from .llm.cli import register as add_llm  # polc llm check: does the model answer?
from .plot.cli import register as add_plot  # polc plot
from .refine.cli import register as add_refine  # polc generate, polc refine: the refinement loop
from .report.cli import register as add_report  # polc report: one web page of a run, an experiment or a trace
from .rl.cli import register as add_rl  # polc rl: reinforcement learning from fitted params
from .trace.cli import register as add_trace  # polc demos, polc rollout, polc eval
from .trace.task_cli import register as add_task  # polc schema, polc init-task: a task on any gymnasium env


def register(sub: Any) -> None:
    """Add every runtime command to the `polc` subcommands, in the order `polc --help` lists them."""
    add_trace(sub)  # demos
    add_task(sub)
    add_fit(sub)
    add_plot(sub)
    add_analyze(sub)
    add_refine(sub)
    add_llm(sub)
    add_rl(sub)
    add_experiment(sub)
    add_report(sub)


__all__ = ["register"]

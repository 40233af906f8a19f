"""`RunContext`: what every phase of a round needs to know about the run, handed down.

The loop (loop.py) builds one when a run starts or resumes and passes it to the dialogue
(dialogue.py) and a population (population.py) instead of itself: a callee reads the run's
settings, directory, progress display, environment, metric, demonstration and seeds here,
and returns what it did (a `dialogue.Exchange`, a `population.Outcome`) for the loop to
record; it never reaches back into the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .rundir import RunDir
from .work import Settings


@dataclass(frozen=True)
class RunContext:
    run: RunDir            # the run directory (files are written through it, atomically)
    task: Any              # the task folder (`Task`): its text, env, demonstration, instance name
    settings: Settings
    ui: Any                # the progress display (`report.Progress`): phase, notice, say
    spec: Any              # the environment (episodes cut at settings.max_steps)
    metric: Any            # what a round is scored by (`envs.metric.Metric`)
    demo: Any              # the demonstration table (pyarrow)
    seeds: tuple[int, ...]  # the traced training seeds
    validation: tuple[int, ...]  # the untraced validation seeds (--validation-episodes)

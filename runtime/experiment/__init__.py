"""`polc experiment TASK`: the paper's tables and figures, measured by one command.

    polc experiment car_racing -o results/car_racing/    # Table 1 (Markdown, JSON, plots)
    polc experiment door -o results/door/                # Figure 5: the distance per revision
    polc experiment car_racing --quick -o /tmp/t1        # every step, reduced (about a minute)
    polc experiment car_racing --ray auto -o results/car_racing/   # the steps side by side on Ray

`plan` says what runs (tasks, budgets, rows), `run` runs it as cached steps
(an interrupted experiment continues where it stopped), `distributed` runs
those steps as a dependency graph of Ray tasks (docs/ray.md), `report` writes
the table, the JSON and the plots.
"""

from .plan import FULL, QUICK, TASKS, Budget, Row, Structure, Task
from .run import Experiment, ExperimentError

__all__ = ["FULL", "QUICK", "TASKS", "Budget", "Experiment", "ExperimentError", "Row", "Structure", "Task"]

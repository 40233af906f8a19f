"""How an environment scores an episode, for `polc eval` and the results tables.

The default is the undiscounted return (higher is better), Car Racing's metric.
An environment whose paper reports something else describes it with a `Metric`:
the door's is the minimum handle-to-target distance over the episode (lower is
better). A metric is computed from an episode's step table (the columns
`polc.runtime.io.table` writes: `obs.<name>` (T, *shape), `reward` (T,), ...), so
the same function scores a live evaluation, a demonstration and a saved trace:

    score = metric.of_episode(columns)     # one float per episode

`per_step` must be a module-level function (environment specs are pickled to
the worker processes of a vector env).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional

import numpy as np

Columns = Mapping[str, np.ndarray]

_REDUCE: dict[str, Callable[[np.ndarray], float]] = {
    "sum": np.sum, "min": np.min, "max": np.max, "mean": np.mean}


@dataclass(frozen=True)
class Metric:
    """One number per episode, and which way is better."""

    name: str  # as a person reads it: "return", "min handle-to-target distance"
    key: str  # its key in JSON and tables: "return", "min_handle_to_target"
    higher_is_better: bool
    doc: str  # how it is computed, with units
    per_step: Optional[Callable[[Columns], np.ndarray]] = None  # columns -> (T,); None: the `reward` column
    reduce: str = "sum"  # over the steps: sum | min | max | mean
    unit: str = ""  # e.g. "m"; "" for a return

    def __post_init__(self) -> None:
        if self.reduce not in _REDUCE:
            raise ValueError(f"metric reduce must be one of {', '.join(_REDUCE)}, not {self.reduce!r}")

    @property
    def is_return(self) -> bool:
        """The episode return: computable from rewards alone, no step table needed."""
        return self.per_step is None and self.reduce == "sum"

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    def of_episode(self, columns: Columns) -> float:
        """The score of one episode from its step-table columns (each (T, ...)). A per-step
        function that raises, or returns anything but T finite numbers, is a `MetricError`."""
        if self.per_step is None:
            values = np.asarray(columns["reward"], np.float64)
        else:
            values = self._per_step_values(columns, len(columns["reward"]))
        if values.ndim != 1 or not len(values):
            raise ValueError(f"metric {self.key!r} needs one value per step, got shape {values.shape}")
        return float(_REDUCE[self.reduce](values))

    def _per_step_values(self, columns: Columns, steps: int) -> np.ndarray:
        from .errors import MetricError

        who = f'the metric function "{self.name}"'
        try:
            out = self.per_step(columns)
        except Exception as e:  # noqa: BLE001 - the user's code: said, with what it raised
            raise MetricError(f"{who} raised {type(e).__name__}: {e} (on an episode of {steps} steps)") from None
        try:
            values = np.asarray(out, np.float64)
        except (TypeError, ValueError):
            values = None
        if values is None or values.ndim != 1:
            raise MetricError(f"{who} returned {type(out).__name__} {out!r:.60}; it must return one number per "
                              f"step (an array of {steps})")
        if len(values) != steps:
            raise MetricError(f"{who} returned {len(values)} values for an episode of {steps} steps; it must "
                              "return one number per step")
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            raise MetricError(f"{who} returned {values[bad[0]]} at step {bad[0]} of an episode of {steps} steps; "
                              "a score must be finite")
        return values


RETURN = Metric("return", "return", True, "the undiscounted sum of the rewards over the episode")

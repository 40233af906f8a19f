"""What a round records: `Round`, the typed form of a round's metrics.json.

The loop builds one `Round` per round (loop.py), fills it from what its phases return (the
fit, the rollout, the dialogue's `Exchange`, a population's `Population`) and writes it with
`to_json`; `--resume` reads complete rounds back with `from_json`. The JSON on disk is the
one runs have always had: the same keys, values and order (a key is absent, not null, when
the round did not get that far), so runs written before this record existed resume and
report unchanged. Keys this polc does not know are kept as read (`extra`) and written back.

summary.json, the table and `polc report` read the JSON form (report.py, scores.py): they
also read runs from disk.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Optional

# metrics.json's keys in the order the loop fills them (a round that ended early has a prefix).
# `end` comes after `seconds` when the model chose STOP: the loop learns that last.


@dataclass
class Round:
    """Round `round`'s numbers (None: the round did not get that far; absent from the JSON)."""

    round: int
    final: bool                                   # the last round: fitted and evaluated, no move
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase: fit, rollout, eval, ...
    policy_name: Optional[str] = None             # the fitted structure's
    structure_sha256: Optional[str] = None
    fit: Optional[dict] = None                    # loss, val_loss, train_loss, restart, epoch, seconds
    weights: Optional[dict] = None                # name -> constrained value (the weights kept)
    recovery: Optional[dict] = None               # --recovery: the clean fit vs the fit with the recovery laps
    demo_outside_ranges: Optional[list[dict]] = None  # columns of the demonstration outside declared ranges
    rollout_seeds: Optional[list[int]] = None     # the traced training seeds
    rollout_returns: Optional[list[float]] = None
    rollout_scores: Optional[list[float]] = None  # the environment's metric per traced episode
    resets: Optional[int] = None                  # environment resets (the paper's Table 1)
    declared_scores: Optional[list[float]] = None  # the declared weights on the same seeds
    closed_loop: Optional[dict] = None            # il.closed_loop.ClosedLoop.to_json()
    keep: Optional[dict] = None                   # which weights were kept, and why
    rollout_successes: Optional[list[bool]] = None
    validation: Optional[dict] = None             # scores.eval_json of the validation episodes
    eval: Optional[dict] = None                   # scores.eval_json of the unseen evaluation seeds
    eval_episodes: Optional[int] = None
    regenerations: Optional[int] = None
    analyses: Optional[list[dict]] = None         # each analysis run in the sandbox: file, ok, error, ...
    next_policy: Optional[str] = None             # the revision's policy name (REVISE)
    candidates: Optional[dict] = None             # a population's cost and scores (--candidates K)
    tests: Optional[int] = None                   # TEST moves made
    move: Optional[dict] = None                   # kind, summary, notes, changes
    end: Optional[str] = None                     # why the run ended after this round
    unusable_replies: Optional[bool] = None       # it ended because the model's replies were unusable
    llm: Optional[dict] = None                    # converse.Counts.to_json()
    seconds: Optional[float] = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of another polc version, kept as read

    def timed(self, phase: str, start: float) -> None:
        """Add the time since `start` (time.monotonic) to `phase`."""
        add_time(self.phases, phase, start)

    @property
    def move_kind(self) -> Optional[str]:
        return (self.move or {}).get("kind")

    def to_json(self) -> dict:
        names = [f.name for f in fields(self) if f.name != "extra"]
        if self.move_kind == "STOP":
            names.remove("end")
            names.append("end")
        out = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: dict) -> "Round":
        """A round's metrics.json (`RunDir.metrics` has checked it is an object counting its
        calls); ValueError when `round` or `final` is missing."""
        if not isinstance(data.get("round"), int) or not isinstance(data.get("final", False), bool):
            raise ValueError("a round's metrics need an integer round and a boolean final")
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("final", False)
        values.setdefault("phases", {})
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})


def add_time(phases: dict[str, float], phase: str, start: float) -> None:
    """phases[phase] += the seconds since `start`, to the hundredth (as metrics.json has it)."""
    phases[phase] = round(phases.get(phase, 0.0) + time.monotonic() - start, 2)

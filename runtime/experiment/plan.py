"""What `polc experiment TASK` runs: the task's structures and conditions, and the
budget (full, as the paper, or `--quick`).

Car Racing is the paper's Table 1: the expert demonstration, then each structure
(MLP, initial, refined) fitted by imitation learning (IL) and improved by RL with
a low and a high budget of resets: the paper's objective (`polc rl`, the RL rows)
and evolution strategies on the mean actions (`polc rl --engine es`, the ES rows,
not in the paper). The door is the paper's Figure 5: the expert,
then the structure of every refinement round, fitted by IL (its initial
structure's `grab` has no noise, so RL does not apply; the paper reports no RL
for the door either).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Structure:
    """A policy structure the experiment fits: `source` is a .pol path relative to
    the task folder, or "refine" for the structure the refinement loop ends on."""

    key: str    # file names and JSON keys: "mlp", "initial", "refined"
    label: str  # as the table says it: "MLP", "Initial structure", "Refined structure"
    source: str


@dataclass(frozen=True)
class Task:
    name: str        # the argument of `polc experiment`
    env: str         # polc.runtime.envs name
    folder: str      # the refinement task folder (task.md, demo, initial.pol, session/)
    structures: tuple[Structure, ...]
    rl: bool         # RL rows (low and high budget) for every structure
    figure: str      # the paper's figure the per-round plot reproduces
    threshold: Optional[float] = None  # "reached" line of the RL curves (Car Racing's 900: solved)


TASKS = {
    "car_racing": Task(
        "car_racing", "car_racing", "examples/car_racing",
        (Structure("mlp", "MLP", "mlp.pol"), Structure("initial", "Initial structure", "initial.pol"),
         Structure("refined", "Refined structure", "refine")),
        rl=True, figure="Figure 4", threshold=900.0),
    "door": Task(
        "door", "door", "examples/door",
        (Structure("initial", "Initial structure", "initial.pol"),
         Structure("refined", "Refined structure", "refine")),
        rl=False, figure="Figure 5"),
}


@dataclass(frozen=True)
class Budget:
    """How much the experiment runs. `FULL` is the paper's budget evaluated at the
    field's standard (100 unseen tracks, 3 RL training seeds); `QUICK` exercises
    every step end to end in about a minute (the test suite runs it with shorter
    episodes and IL fits, tests/quick_budget.py): its numbers are not comparable with
    the full run's, and its table and plots say so."""

    seeds: int = 100                   # unseen evaluation seeds per row (the field's 100 tracks)
    rl_seeds: int = 3                  # RL training seeds per RL row: its mean over seeds and their spread
    low: int = 400                     # RL resets, low compute
    high: int = 2000                   # RL resets, high compute
    episodes_per_update: int = 20      # the paper's
    rl_lr: float = 1e-3                # RL's Adam step: the paper's 7e-3 collapses 2000-reset runs (docs/results/rl.md)
    rl_keep: str = "best"              # each RL and ES row's params: the best held-out checkpoint so far ("last": the last)
    es: bool = True                    # ES rows beside the RL rows (`polc rl --engine es`, its default settings,
    #                                    a population of episodes_per_update)
    val_every: int = 10                # updates between held-out evaluations (rl_keep="best"), RL and ES
    val_episodes: int = 20             # held-out episodes (validation seeds, never the evaluation seeds) each
    max_steps: Optional[int] = None    # cut every episode (None: the environment's own limit)
    restarts: int = 3                  # IL restarts
    il_keep: str = "best"              # IL params: the better of declared and fitted on training seeds (`polc fit --keep`)
    il_check: int = 5                  # IL closed-loop check episodes per weight set (training seeds; `--check-episodes`)
    max_epochs: int = 2000             # IL epochs per restart
    patience: int = 100                # IL early stopping
    refine_quick: bool = False         # `polc refine --quick`
    quick: bool = False
    # --recovery: DART recovery laps (`polc demos --perturb` text, "steer=0.3") recorded once on the
    # demonstration's seeds; each IL fit (and the refinement loop's) is made with and without them
    # and the better on the training seeds kept. "": off (the default; absent from experiment.json).
    recovery: str = ""

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if not (k == "recovery" and v == "")}


FULL = Budget()
QUICK = Budget(seeds=3, rl_seeds=1, low=8, high=16, episodes_per_update=4, val_every=2, val_episodes=2, max_steps=300,
               restarts=1, max_epochs=300, patience=30, il_check=2, refine_quick=True, quick=True)


@dataclass
class Row:
    """One line of the table: a structure at one stage, evaluated on the unseen seeds."""

    method: str                 # "MLP + RL, 400 resets"
    structure: str              # Structure.key, or "expert"
    stage: str                  # "demo" | "IL" | "RL"
    demos: int                  # demonstrations used
    llm_calls: int
    resets: int                 # training and refinement episodes (not evaluation); per training run
    mean: float                 # the metric with the policy's mean actions (the expert: its own actions)
    std: float                  # over the tracks; for an RL row of several training seeds, across the seeds' means
    sampled_mean: Optional[float] = None  # the metric with sampled actions (the policy's declared noise)
    sampled_std: Optional[float] = None
    per_seed: list = field(default_factory=list)  # per track (averaged over training seeds)
    solved_share: Optional[float] = None  # share of episodes at the env's "solved" score (mean actions)
    success_rate: Optional[float] = None  # share of episodes the env reported success in (mean actions)
    sampled_solved_share: Optional[float] = None
    sampled_success_rate: Optional[float] = None
    training_seeds: int = 1     # RL rows: training seeds pooled in this row
    seed_means: list = field(default_factory=list)  # RL rows: each training seed's mean over the tracks
    params: Optional[str] = None  # the params file, relative to the output directory (an RL row: training
    #                               seed 0's; seed k's are rl/<key>/seed<k>/<budget>.params)
    note: str = ""

    def to_json(self) -> dict:
        return asdict(self)

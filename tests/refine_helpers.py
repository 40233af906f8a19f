"""Shared pieces of the refine tests: a toy task folder (the point-mass environment, fast to
fit and roll out), fast settings, an in-process fake model, and a UI that can crash on cue."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence, Union

import pytest

from polc.runtime.envs import toy
from polc.runtime.llm import Message, Reply, render
from polc.runtime.refine.loop import Loop
from polc.runtime.task import load_task
from polc.runtime.refine.rundir import RunDir
from polc.runtime.refine.scripted import Choice
from polc.runtime.refine.work import Settings

FAST = Settings(rounds=2, rollout_episodes=1, eval_episodes=2, restarts=1, max_epochs=30, patience=10, n_envs=1,
                max_repairs=2, max_regenerations=2, max_tests=1, max_reply_retries=1,
                validation_episodes=0)  # off: cheap; tests that need it turn it on (test_refine_validation.py)

GOOD = toy.reach_policy(kp=1.0, kd=0.5, std=0.2, name="reach2")
BROKEN = GOOD.replace("weight kd : real >= 0 = 0.5", "weight kd : real >= 0 = -0.5")  # E0302
UNFITTABLE = '''policy bad "PD control with a term whose loss is never finite"
obs gap : real[2] in [-3, 3] "target - pos, and -vel"
obs vel : real in [-3, 3]   "velocity"
weight kp : real >= 0 = 0.3 "push per unit of distance to the target"
weight kd : real >= 0 = 0.1 "damping"
weight s  : real in [0.01, 1] = 0.3 "noise std"
latent err = gap[0] "distance to go"
latent shaped = log(abs(err) - 5) "a log of a value that is always negative"
action push : real in [-1, 1] = clip(kp * err - kd * vel + 0.001 * shaped, -1, 1) ~ normal(std = s)
'''
CODE = 'def analyze(df):\n    print("steps", len(df), "mean push", round(float(df["action.push"].mean()), 3))\n'


def pol(text: str) -> str:
    return f"```pol\n{text.rstrip()}\n```\n"


def py(text: str) -> str:
    return f"```python\n{text.rstrip()}\n```\n"


def revise(text: str = GOOD) -> str:
    return "MOVE: REVISE\nThe gains are too low.\n" + pol(text)


STOP = "MOVE: STOP\nIt reaches the target.\n"
ANALYSIS = "I count the steps.\n" + py(CODE)


def make_task(root: Path, initial: str = toy.reach_policy(kp=0.3, kd=0.1, std=0.3)) -> Path:
    """A task folder for the toy environment: task.md, a 3-episode expert demonstration, initial.pol."""
    from polc.cli import main

    toy.register()
    root.mkdir(parents=True, exist_ok=True)
    (root / "task.md").write_text("---\nenv: toy_reach\nlatents: err\n---\nPush the point mass to its target "
                                  "and keep it there.\n")
    (root / "initial.pol").write_text(initial)
    assert main(["demos", "toy_reach", "--episodes", "3", "-o", str(root / "demo.parquet"), "-q"]) == 0
    return root


Answer = Union[str, Callable[[Sequence[Message]], str]]


class FakeModel:
    """Answers from a list (strings, or functions of the conversation); tokens are counted as
    characters / 4, rounded up, so tests can check the accounting exactly."""

    name = "fake:model"

    def __init__(self, answers: Sequence[Answer]):
        self.answers = list(answers)
        self.prompts: list[list[Message]] = []

    def complete(self, messages: Sequence[Message]) -> Reply:
        self.prompts.append(list(messages))
        if not self.answers:
            raise AssertionError("the fake model ran out of answers; last prompt:\n" + render(messages)[-2000:])
        answer = self.answers.pop(0)
        text = answer(messages) if callable(answer) else answer
        return Reply(text, tokens(render(messages)), tokens(text), 0.01)


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class Crash(Exception):
    """Stands in for a kill in the middle of a phase."""


class FakeUI:
    """Records phases and notices; raises Crash at the first phase of round `crash_round` whose
    description contains `crash_at`."""

    def __init__(self, crash_at: str = "", crash_round: int = -1):
        self.phases: list[tuple[int, str]] = []
        self.notices: list[str] = []
        self.crash_at, self.crash_round = crash_at, crash_round

    def phase(self, k: int, what: str) -> None:
        self.phases.append((k, what))
        if self.crash_at and k == self.crash_round and self.crash_at in what:
            self.crash_at = ""
            raise Crash(what)

    def notice(self, text: str) -> None:
        self.notices.append(text)

    def round_done(self, m: dict, settings, metric=None) -> None:
        pass


def run_loop(task_dir: Path, run_path: Path, answers: Sequence[Answer], settings: Settings = FAST,
             ui: FakeUI = None, resume: bool = False) -> tuple[Loop, FakeModel]:
    """A loop over the toy task with a fake model; `resume` continues the run at `run_path`."""
    task = load_task(str(task_dir))
    run = RunDir.open(run_path) if resume else RunDir.create(run_path, {"task": str(task_dir)})
    model = FakeModel(answers)
    loop = Loop(run, task, settings, Choice("fake:model", "fake"), ui or FakeUI(), backend=model)
    loop.run()
    return loop, model


_FITS: dict = {}


def remembered_fits():
    """A context in which the loop fits each (program, demonstration, settings) once per test
    session: fitting is deterministic, and its compile time dominates the toy task's rounds.
    Tests of the resume and feedback paths refit the same programs many times."""
    import pytest

    from polc.runtime.refine import loop as loop_module
    from polc.runtime.refine import work

    def fit_program(program, demo, settings, more=()):
        key = (program.source, demo.path, tuple(t.path for t in more), settings.restarts, settings.max_epochs,
               settings.patience, settings.seed)
        if key not in _FITS:
            _FITS[key] = work.fit_program(program, demo, settings, more)
        return _FITS[key]

    patch = pytest.MonkeyPatch()
    patch.setattr(loop_module, "fit_program", fit_program)
    return patch


# ---- fixtures shared by the loop tests (import them by name into a test module) ----


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    """A toy task folder, made once per test module."""
    return make_task(tmp_path_factory.mktemp("toy") / "task")


@pytest.fixture(scope="module", autouse=True)
def fits_once():
    """Fit each distinct structure once per module (`remembered_fits`), undone at its end."""
    patch = remembered_fits()
    yield
    patch.undo()


# ---- the bundled scripted sessions, end to end ----

ROOT = Path(__file__).resolve().parents[1]
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")  # any selects a provider


def table_without_wall_time(run: Path) -> list[list[str]]:
    """The run's refinement table (summary.json's rounds, as `polc refine` prints them) without
    its wall-time column, the one thing two runs of the same replies differ in."""
    from polc.runtime.refine.report import columns, priced, rows
    from polc.runtime.refine.scores import success_column

    history = json.loads((run / "summary.json").read_text())["rounds"]
    wall = columns(cost=priced(history), success=success_column(history)).index("wall time")
    return [r[:wall] + r[wall + 1:] for r in rows(history)]


# The tests that read conftest's `bundled_car_racing_quick` (one `polc refine examples/car_racing
# --quick`, played once per worker): one xdist group, so one worker plays it.
BUNDLED_CAR_RACING = pytest.mark.xdist_group("bundled-car-racing")


def replay_bundled_session(task: str, run: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`polc refine examples/TASK -o RUN EXTRA...` with no API key in the environment, as a user
    runs it (the bundled session plays back); the process and its summary.json, after
    checking what every scripted run must show: it succeeded, says plainly at its start and
    in its summary that the replies are a scripted recording, prints the table, and reports
    every prompt difference from the recording (none silently)."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    proc = subprocess.run([sys.executable, "-m", "polc.cli", "refine", f"examples/{task}", "-o", str(run), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    head = proc.stderr.splitlines()[:8]
    assert any("SCRIPTED RECORDING" in line for line in head), head
    summary = json.loads((run / "summary.json").read_text())
    assert summary["scripted"] and "SCRIPTED RECORDING" in summary["notice"]
    assert "set GEMINI_API_KEY" in summary["notice"]
    mismatches = summary["totals"]["prompt_mismatches"]
    assert mismatches == len(list(run.glob("round_*/prompt-mismatch-*.diff")))
    assert proc.stderr.count("differs from the scripted recording") == mismatches
    assert "total" in proc.stdout and "SCRIPTED RECORDING" in proc.stdout
    assert (run / "returns.png").is_file() and (run / "latents.png").is_file()
    return proc, summary

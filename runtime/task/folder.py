"""A task folder: task.md, the demonstration and (unless the model is to write it) the
initial structure.

task.md may start with a header (`header.front_matter`) whose keys are

    env:       the environment (default: an env.toml beside task.md, else the folder's name)
    demo:      the demonstration table (default demo.parquet)
    initial:   the initial structure (default initial.pol; absent: the model writes one)
    latents:   a, b: the latents Figure 6 compares
    instance:  what a seed selects, as the prompts name it (default "seed"; the car: "track")
    constant:, moves:   what the task expects of its policies (`diagnostics.task.Expectations`)
    recovery:  steer=0.3: the refinement loop records recovery laps with this `--perturb`
               (`polc refine --recovery`; default: none)

and the rest of task.md is the text the model reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from .header import front_matter

if TYPE_CHECKING:
    from ..diagnostics.task import Expectations


class TaskError(Exception):
    """The task folder cannot be used as it is; the message says what to fix."""


@dataclass(frozen=True)
class Task:
    """A loaded task folder (module docstring)."""

    dir: Path
    text: str
    env: str
    demo: Path
    initial: Optional[Path]
    latents: tuple[str, ...] = ()  # header `latents: a, b`: what Figure 6 compares
    instance: str = "seed"  # header `instance:`: what a seed selects, as the prompts name it ("track")
    expect: Optional["Expectations"] = None  # headers `constant:` and `moves:`
    recovery: str = ""  # header `recovery:`: the loop's recovery laps (`polc refine --recovery`); "": none


def load_task(task_dir: str, env: Optional[str] = None) -> Task:
    """The task in folder `task_dir`; `env` overrides the header's. TaskError names what is
    missing or wrong."""
    d = Path(task_dir)
    md = d / "task.md"
    if not md.is_file():
        raise TaskError(f"{d} has no task.md (the task description the model reads).")
    header, text = front_matter(md.read_text(encoding="utf-8"))
    demo = d / header.get("demo", "demo.parquet")
    if not demo.is_file():
        raise TaskError(f"{d} has no demonstration {demo.name} (write one with `polc demos`).")
    initial = d / header.get("initial", "initial.pol")
    latents = tuple(n.strip() for n in header.get("latents", "").split(",") if n.strip())
    if not (env or header.get("env")) and (d / "env.toml").is_file():
        env = str(d / "env.toml")  # a task folder for any Gymnasium env (polc init-task writes it)
    from ..diagnostics import DiagnosticsError
    from ..diagnostics.task import Expectations

    try:
        expect = Expectations.parse(header.get("constant", ""), header.get("moves", ""), str(md))
    except DiagnosticsError as e:
        raise TaskError(str(e).rstrip(".") + ".") from None
    return Task(d, text.strip() + "\n", env or header.get("env") or d.resolve().name, demo,
                initial if initial.is_file() else None, latents, header.get("instance") or "seed", expect,
                header.get("recovery", ""))


__all__ = ["Task", "TaskError", "load_task"]

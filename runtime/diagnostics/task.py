"""What a task says to expect, and the check it enables: an action saturated against a
blocked state.

A task folder's task.md header may declare (see `polc.runtime.task.load_task`):

    constant: grab                                   # the task requires these to be constant
    moves: dx -> hand[0], dy -> hand[1], dz -> hand[2]   # which observation each action moves

`constant` turns the built-in "X is constant over all N steps" warning about those names
into a passed finding ("as the task expects"): the door's task requires grab = +1, and a
warning every round about it only buries what matters. `moves` enables `check_blocked`:
the steps where an action's mean sits on a bound of its range while the observation it
moves does not follow in that direction (the door: the hand pressing against the door's
end stop for hundreds of steps), reported as the longest such stretch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .base import DiagnosticsError, Finding
from .checks import num, pct

MOVE = re.compile(r"^\s*([A-Za-z_]\w*)\s*->\s*([A-Za-z_]\w*)(?:\[(\d+)\])?\s*$")
BLOCKED_RUN = 20  # consecutive steps pushing without motion worth a warning
FOLLOW = 0.1  # "does not follow": moves less than this share of its usual (q95) step in the commanded direction


@dataclass(frozen=True)
class Expectations:
    """What a task declares about its policies' behaviour (task.md's header)."""

    constant: tuple[str, ...] = ()  # names (latents or actions) the task requires to be constant
    moves: tuple[tuple[str, str, int | None], ...] = ()  # (action, observation, element or None)

    @staticmethod
    def parse(constant: str = "", moves: str = "", where: str = "task.md") -> "Expectations":
        """From the header's `constant:` and `moves:` values; DiagnosticsError naming a bad entry."""
        names = tuple(n.strip() for n in constant.split(",") if n.strip())
        pairs = []
        for entry in (e for e in moves.split(",") if e.strip()):
            m = MOVE.match(entry)
            if m is None:
                raise DiagnosticsError(f"{where}: the `moves:` entry {entry.strip()!r} is not `ACTION -> OBS` or "
                                       f"`ACTION -> OBS[i]` (e.g. `dx -> hand[0]`).")
            pairs.append((m.group(1), m.group(2), None if m.group(3) is None else int(m.group(3))))
        return Expectations(names, tuple(pairs))

    def __bool__(self) -> bool:
        return bool(self.constant or self.moves)


def expected_constants(findings: Sequence[Finding], expect: Expectations) -> list[Finding]:
    """The findings with each "X is constant" warning about a name the task declares constant
    turned into a passed finding that says so."""
    out = []
    for f in findings:
        if f.severity == "warning" and f.subject in expect.constant and " is constant " in f.message:
            f = Finding(f.check, "ok", f.subject, f.message.rstrip(".") + ", as the task expects (it declares "
                                                                        f"{f.subject} constant).")
        out.append(f)
    return out


def _runs(mask: np.ndarray, episode: np.ndarray) -> list[tuple[int, int]]:
    """(first row, length) of each stretch of consecutive True rows within one episode."""
    runs, start = [], None
    for i, v in enumerate(mask):
        if v and start is not None and episode[i] != episode[start]:
            runs.append((start, i - start))
            start = i
        elif v and start is None:
            start = i
        elif not v and start is not None:
            runs.append((start, i - start))
            start = None
    if start is not None:
        runs.append((start, len(mask) - start))
    return runs


def check_blocked(ctx: Any, expect: Expectations) -> list[Finding]:
    """For each `moves:` pair: the steps where the action's mean is on a bound of its range and
    the observation does not follow it over the next step (see the module docstring)."""
    out = []
    actions = {a.name: a for a in ctx.tp.actions}
    for action, obs, index in expect.moves:
        label = obs if index is None else f"{obs}[{index}]"
        if action not in actions or obs not in ctx.obs:
            missing = action if action not in actions else f"the observation {obs}"
            out.append(Finding("task", "info", action, f"The task says {action} moves {label}, but this structure "
                                                       f"does not declare {missing}, so pushing without motion is "
                                                       "not checked."))
            continue
        a, mean, pos = actions[action], ctx.logged[action], ctx.obs[obs]
        pos = pos if index is None else pos[:, index]
        if mean.ndim != 1 or pos.ndim != 1:
            continue
        episode = ctx.steps.episode
        step = np.full(len(pos), np.nan)
        same = episode[1:] == episode[:-1]
        step[:-1] = np.where(same, pos[1:] - pos[:-1], np.nan)  # the motion the action at row t produced
        usual = float(np.nanquantile(np.abs(step), 0.95)) if np.isfinite(step).any() else 0.0
        span = a.hi - a.lo
        at_hi, at_lo = mean >= a.hi - 1e-3 * span, mean <= a.lo + 1e-3 * span
        with np.errstate(invalid="ignore"):
            blocked = ((at_hi & (step < FOLLOW * usual)) | (at_lo & (step > -FOLLOW * usual))) & np.isfinite(step)
        runs = _runs(blocked, episode)
        if not runs or usual <= 0:
            out.append(Finding("task", "ok", action, f"Whenever {action} is on a bound of its range, {label} follows "
                                                     "it."))
            continue
        first, length = max(runs, key=lambda r: r[1])
        bound = num(a.hi) if at_hi[first] else num(a.lo)
        where = f"{ctx.steps.where(first)} to step {int(ctx.steps.step[first + length - 1])}"
        sev = "warning" if length >= BLOCKED_RUN else "info"
        out.append(Finding("task", sev, action,
                           f"{action} sits at {bound} while {label} does not follow (it moves less than "
                           f"{num(FOLLOW * usual)} per step that way, against a usual step of {num(usual)}) for "
                           f"{length} consecutive steps ({where}; {int(blocked.sum())} steps, "
                           f"{pct(float(blocked.mean()))} of all): it pushes against something that does not give."))
    return out


__all__ = ["Expectations", "check_blocked", "expected_constants"]

"""Several demonstrations fitted as one: the clean lap and DART-style recovery laps
(`polc demos --perturb`) beside it.

A clean demonstration never leaves the expert's path, so it cannot say what to do
off it, and an observation that echoes the previous action (an actuator's state)
predicts the action perfectly there. Recovery laps, recorded with the expert's
action perturbed while its intended action is what is imitated, break both:
`polc fit --demos clean.parquet dart.parquet` fits to all of their rows.

`Recovery` and `record_recovery` are the recording the refinement loop and `polc
experiment` make where an expert exists (`--recovery steer=0.3`): the expert's laps on
the clean demonstration's own seeds with its executed actions perturbed, written once
and reused while the environment, seeds and noise are the same. The loop then fits with
and without them and keeps the better on training seeds (docs/results.md, "Causal
confusion": no single choice won every structure).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from .train import Demos

RECOVERY_FILE = "recovery.parquet"  # the recording's name in a run or experiment directory


@dataclass(frozen=True)
class Recovery:
    """DART recovery demonstrations to record beside the clean one: `perturb` as `polc demos
    --perturb` takes it ("steer=0.3", or one std for every action), the noise's key, and
    the expert (`FILE.py:FUNCTION`; "" the environment's own)."""

    perturb: str
    noise_seed: int = 0
    expert: str = ""

    def resolve(self, spec: Any):
        """(the environment with the expert that records, the `trace.demos.Perturbation`);
        ValueError saying what is wrong with `perturb`, or that the environment has no expert."""
        import dataclasses

        from ..envs.errors import ExpertError
        from ..envs.user_expert import UserExpertFactory, no_expert
        from ..trace.demos import parse_perturb

        perturbation = parse_perturb(self.perturb, [f.name for f in spec.schema.actions], self.noise_seed)
        if self.expert:
            try:
                spec = dataclasses.replace(spec, _expert=UserExpertFactory(self.expert))
            except ExpertError as e:
                raise ValueError(str(e)) from None
        elif getattr(spec, "_expert", None) is no_expert:
            raise ValueError(f'the environment "{spec.name}" has no built-in expert to record recovery '
                             "demonstrations with; give one with --expert FILE.py:FUNCTION")
        return spec, perturbation


def record_recovery(spec: Any, recovery: Recovery, seeds: Sequence[int], path: str) -> str:
    """The recovery demonstration of `recovery` on `seeds` at `path`: recorded there (the
    expert's laps, its executed actions perturbed), unless a table at `path` was recorded
    for the same environment, seeds and perturbation, which is reused. ValueError as
    `Recovery.resolve`."""
    from polc import __version__

    from ..io.table import TableError, TableWriter, read_table
    from ..trace.demos import demo_columns, write_demos
    from ..trace.meta import env_meta

    spec, perturbation = recovery.resolve(spec)
    seeds = [int(s) for s in seeds]
    meta = {"kind": "demonstration", "polc_version": __version__, "env": env_meta(spec), "seeds": seeds,
            "perturb": perturbation.meta(), "expert": recovery.expert or None,
            "command": f"polc demos {spec.name} --episodes {len(seeds)} --seed {seeds[0]} "
                       f"--perturb {recovery.perturb} --noise-seed {recovery.noise_seed}"
                       + (f" --expert {recovery.expert}" if recovery.expert else "") + f" -o {path}"}
    if os.path.exists(path):
        try:
            old = read_table(path).metadata or {}
        except TableError:
            old = {}
        if all(old.get(k) == meta[k] for k in ("env", "seeds", "perturb", "expert")):
            return path
    writer = TableWriter(path, demo_columns(spec.schema, True), meta)
    try:
        write_demos(spec, seeds, writer, None, perturbation)
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return path


def concat_demos(parts: Sequence[Demos]) -> Demos:
    """The rows of every part, in order; episode ids renumbered so that no two parts share one."""
    if not parts:
        raise ValueError("no demonstrations to concatenate")
    episodes, offset = [], 0
    for d in parts:
        ep = np.asarray(d.episode, np.int64)
        _, dense = np.unique(ep, return_inverse=True)  # 0..k-1 in each part, whatever its ids
        episodes.append(dense + offset)
        offset += int(dense.max()) + 1 if len(dense) else 0
    return Demos({k: np.concatenate([d.obs[k] for d in parts]) for k in parts[0].obs},
                 {k: np.concatenate([d.actions[k] for d in parts]) for k in parts[0].actions},
                 np.concatenate(episodes))


def used_seeds(metadata: Sequence[dict]) -> list[int]:
    """Every seed the tables' metadata say they were recorded on (the closed-loop check skips them)."""
    out: list[int] = []
    for m in metadata:
        out += [s for s in (m or {}).get("seeds") or [] if isinstance(s, int) and s not in out]
    return out


__all__ = ["RECOVERY_FILE", "Recovery", "concat_demos", "record_recovery", "used_seeds"]

"""What a trace's Parquet metadata says about how it was made: the one builder of it.

`polc rollout` and every refinement round's trace.parquet record the same keys, so that
`polc analyze`, `polc report` and the diagnostics read either the same way:

    kind             "trace"
    polc_version
    policy           name, file, sha256 (of the source text), structure_sha256 (of the dataflow:
                     `io.params.structure_sha256`; the diagnostics warn when a trace was made by
                     another structure), source
    params           file (None: the declared weights), sha256 of the values
    env              `env_meta`: name (a name `envs.get` remakes the environment from), id,
                     version, max_steps; a gym: env adds its schema file and kwargs
    seeds            the episodes' seeds, in order
    seed_kind        training | evaluation | other | mixed: which of the environment's seed
                     ranges they come from (tuning on evaluation seeds would be unfair)
    actions          mean | sampled; noise_seed: the sampling's seed (None with mean actions)
    refine           {"round": k} in a refinement round's trace only

A demonstration's metadata (`polc demos`) shares `env_meta`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from polc.check.typed import TypedProgram


def env_meta(spec: Any) -> dict:
    """The environment `spec` as a table's metadata records it (module docstring)."""
    meta = {"name": spec.schema.name, "id": spec.schema.env_id, "version": spec.schema.version,
            "max_steps": spec.max_steps}
    source = getattr(spec, "source", None)  # a gym: env: what it was made from
    if source is not None:
        meta.update(schema_file=source.schema_file and os.path.abspath(source.schema_file),
                    kwargs=dict(source.kwargs))
    return meta


def seed_kind(spec: Any, seeds: Sequence[int]) -> str:
    """Which of `spec`'s seed ranges all of `seeds` lie in: training (the demonstrations'),
    evaluation, other; mixed when they are not all of one kind."""
    kinds = {"training" if s in spec.demo_seeds else "evaluation" if s in spec.eval_seeds else "other" for s in seeds}
    return kinds.pop() if len(kinds) == 1 else "mixed"


@dataclass(frozen=True)
class TraceMeta:
    """A trace's metadata (module docstring); `to_json()` is what the Parquet file holds."""

    policy_name: str
    policy_file: Optional[str]
    policy_sha256: str
    structure_sha256: str
    source: str
    params_file: Optional[str]
    params_sha256: str
    env: Mapping[str, Any]
    seeds: tuple[int, ...]
    seed_kind: str
    actions: str = "mean"              # or "sampled"
    noise_seed: Optional[int] = None   # with sampled actions
    refine_round: Optional[int] = None  # a refinement round's trace

    @staticmethod
    def of(program: "TypedProgram", file: Optional[str], params: Mapping[str, Any], params_file: Optional[str],
           spec: Any, seeds: Sequence[int], sampled: bool = False, noise_seed: Optional[int] = None,
           refine_round: Optional[int] = None) -> "TraceMeta":
        """The metadata of a trace of `program` (read from `file`) with `params` (from
        `params_file`; None: the declared weights) in `spec` on `seeds`."""
        from polc.backend.emit import sha256

        from ..io.params import params_sha256, structure_sha256

        return TraceMeta(program.name, file, sha256(program), structure_sha256(program), program.source,
                         params_file, params_sha256(params), env_meta(spec), tuple(int(s) for s in seeds),
                         seed_kind(spec, seeds), "sampled" if sampled else "mean",
                         noise_seed if sampled else None, refine_round)

    def with_params(self, params: Mapping[str, Any]) -> "TraceMeta":
        """The same trace made with other values of the weights (the same file name)."""
        from ..io.params import params_sha256

        return replace(self, params_sha256=params_sha256(params))

    def to_json(self) -> dict:
        from polc import __version__

        out = {"kind": "trace", "polc_version": __version__,
               "policy": {"name": self.policy_name, "file": self.policy_file, "sha256": self.policy_sha256,
                          "structure_sha256": self.structure_sha256, "source": self.source},
               "params": {"file": self.params_file, "sha256": self.params_sha256},
               "env": dict(self.env), "seeds": list(self.seeds), "seed_kind": self.seed_kind,
               "actions": self.actions, "noise_seed": self.noise_seed}
        if self.refine_round is not None:
            out["refine"] = {"round": self.refine_round}
        return out


__all__ = ["TraceMeta", "env_meta", "seed_kind"]

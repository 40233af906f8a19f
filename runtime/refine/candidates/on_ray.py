"""A refinement round's candidate population fitted and scored on a Ray cluster: one Ray task
(one CPU) per candidate, each running the caller's `evaluate` (`score`'s local
`evaluate_candidates`) on its one candidate, so every score is the one the local call computes
and they come back in order.

    scores = ray_evaluate_candidates("auto", evaluate, candidates, demo, spec, seeds, settings, fit)

The evaluation is passed in, not imported: `score` imports this module when it sends a
population here, and imports go one way.

`score.evaluate_candidates` sends a population of two or more here when
$POLC_RAY_ADDRESS names a cluster. A worker that dies has its candidate rerun (Ray's task
retries, at most `RETRIES` more times); then the round fails with a `ClusterError` naming the
candidate. An error of the candidate itself (it cannot be fitted, a non-finite action) is its
`Score`, as in the local call.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ...cluster.connect import ClusterError, _import_ray, connected
from ...cluster.graph import RETRIES


def _one(evaluate, candidate, demo, spec, seeds, settings, fit):
    return evaluate([candidate], demo, spec, seeds, settings, fit, local=True)[0]


def ray_evaluate_candidates(address: str, evaluate: Callable[..., list], candidates: Sequence[Any], demo: Any,
                            spec: Any, seeds: Sequence[int], settings: Any,
                            fit: Optional[Callable[..., Any]] = None) -> list:
    """One `Score` per candidate, in order, each computed by a Ray task (module docstring)."""
    ray = _import_ray()
    with connected(address):
        task = ray.remote(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)(_one)
        shared = [ray.put(x) for x in (demo, spec, list(seeds), settings, fit)]
        refs = [task.remote(evaluate, c, *shared) for c in candidates]
        out = []
        for c, ref in zip(candidates, refs):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                raise cause if isinstance(cause, BaseException) else ClusterError(str(e)) from None
            except ray.exceptions.RayError as e:
                raise ClusterError(f"candidate {c.index} could not be scored: its worker died {RETRIES + 1} "
                                   f"times ({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__})"
                                   ) from None
        return out


__all__ = ["ray_evaluate_candidates"]

"""A dependency graph of steps run as Ray tasks, as many at a time as the cluster has CPUs
(`polc experiment --ray`: fit -> evaluations and RL runs -> report).

    nodes = [Node("fit", (), fit), Node("eval", ("fit",), evaluate)]
    results = run_graph(nodes, done={}, on_done=save)   # {name: result}

A node's `fn(deps)` gets the results of its dependencies by name and returns its own
(a JSON-able dict); it runs in a Ray worker (one CPU), so it must pickle (a module-level
callable, or a closure cloudpickle can send). `done` holds the results of steps finished
before (the experiment's cached steps): they are never run again. `on_done(name, result)`
is called on the driver as each step finishes, so a caller can save it at once and a later
failure loses nothing.

Faults. A worker that dies while running a step (killed, out of memory, its node lost) is
Ray's to retry: the task runs again elsewhere, at most `retries` more times. An error the
step itself raises is not retried (it would fail again). Either way the graph goes on with
every step that does not need the failed one, like `make -k`, and then `GraphError` names
the failed steps, why, and the steps left unrun because they needed them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from .connect import _import_ray

RETRIES = 3  # a step whose worker dies runs at most RETRIES + 1 times


@dataclass(frozen=True)
class Node:
    name: str
    deps: tuple[str, ...]
    fn: Callable[[dict], dict]


class GraphError(Exception):
    """Steps failed. `failed` maps each failed step to why; `skipped` lists the steps not
    run because a step they need failed."""

    def __init__(self, failed: Mapping[str, str], skipped: Sequence[str]):
        self.failed, self.skipped = dict(failed), list(skipped)
        names = " and ".join(f"'{n}'" for n in self.failed)
        why = "; ".join(f"'{n}': {m}" for n, m in self.failed.items()) if len(self.failed) > 1 \
            else next(iter(self.failed.values()))
        text = f"step{'s' if len(self.failed) > 1 else ''} {names} failed: {why}"
        if self.skipped:
            text += f" ({len(self.skipped)} step{'s' if len(self.skipped) != 1 else ''} needing it not run: " \
                    f"{', '.join(self.skipped)})"
        super().__init__(text)


def _execute(fn: Callable[[dict], dict], deps: dict) -> dict:
    return fn(deps)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _why(ray, e: BaseException, retries: int) -> str:
    """What a failed step's error says, in one line."""
    if isinstance(e, ray.exceptions.RayTaskError):
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            return f"{type(cause).__name__}: {_first_line(cause)}" if not _is_polc(cause) else _first_line(cause)
        return _first_line(e)
    return f"its worker died {retries + 1} times (the last: {_first_line(e)})"


def _is_polc(e: BaseException) -> bool:
    """polc's own errors already say what failed in a sentence; others get their type name."""
    return type(e).__module__.startswith("polc")


def run_graph(nodes: Sequence[Node], done: Optional[Mapping[str, dict]] = None, retries: int = RETRIES,
              parallel: Optional[int] = None, on_start: Optional[Callable[[str, int, int], None]] = None,
              on_done: Optional[Callable[[str, dict], None]] = None) -> dict[str, dict]:
    """Run `nodes` on the connected Ray cluster (see the module docstring); every result by
    name, `done`'s included. At most `parallel` steps are sent at a time (default: the
    cluster's CPUs; the rest wait here, in plan order, rather than in Ray's queue), and
    `on_start(name, running, left)` is called as one is sent."""
    ray = _import_ray()
    results: dict[str, dict] = dict(done or {})
    pending = {n.name: n for n in nodes if n.name not in results}
    unknown = sorted({d for n in pending.values() for d in n.deps} - set(pending) - set(results))
    if unknown:
        raise ValueError(f"steps depend on steps that are neither planned nor finished: {', '.join(unknown)}")
    remote = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=False)(_execute)
    parallel = max(1, parallel or int(ray.cluster_resources().get("CPU", 1)))
    running: dict[Any, Node] = {}
    failed: dict[str, str] = {}
    skipped: list[str] = []
    while pending or running:
        for n in list(pending.values()):
            if any(d in failed or d in skipped for d in n.deps):
                skipped.append(pending.pop(n.name).name)
            elif len(running) < parallel and all(d in results for d in n.deps):
                del pending[n.name]
                running[remote.remote(n.fn, {d: results[d] for d in n.deps})] = n
                if on_start is not None:
                    on_start(n.name, len(running), len(pending))
        if not running:
            break  # what is left waits for a failed step (skipped above on the next pass)
        ready, _ = ray.wait(list(running), num_returns=1)
        n = running.pop(ready[0])
        try:
            results[n.name] = ray.get(ready[0])
        except (ray.exceptions.RayError, ray.exceptions.RayTaskError) as e:
            failed[n.name] = _why(ray, e, retries)
            continue
        if on_done is not None:
            on_done(n.name, results[n.name])
    skipped += list(pending)  # (none are left unless their dependencies failed)
    if failed:
        raise GraphError(failed, skipped)
    return results


__all__ = ["GraphError", "Node", "RETRIES", "run_graph"]

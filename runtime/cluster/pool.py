"""A pool of rollout-worker actors (`workers.RolloutWorker`) and the one way work reaches
them: `map` hands each idle actor the next share of the episodes and gives the results
back in share order.

Faults. An actor that dies (killed, out of memory, its node lost) fails the call it was
running with a Ray actor or worker error; its share goes back to the queue and runs on
another actor, and a new actor takes the dead one's place. A share is tried at most
`retries` + 1 times; then the command fails, saying which seeds and why. An error the
episodes themselves raise (a non-finite action, a policy that cannot run) is no fault of
the worker: it is raised again here as it was raised there, without retrying.

    pool = WorkerPool(spec, policy, workers=2)
    results = pool.map("evaluate", [(params, seeds_a, config), (params, seeds_b, config)])
    pool.close()
"""

from __future__ import annotations

import contextlib
from collections import deque
from typing import Any, Callable, Iterator, Optional, Sequence

from .connect import ClusterError, _import_ray
from .workers import RolloutWorker

RETRIES = 3  # a share of episodes runs at most RETRIES + 1 times before the command fails


def _faults(ray) -> tuple:
    """The errors that mean the worker died, not that its episodes failed."""
    e = ray.exceptions
    return (e.RayActorError, e.WorkerCrashedError, e.NodeDiedError, e.ObjectLostError, e.OutOfMemoryError,
            e.LocalRayletDiedError)


def shares(n: int, parts: int, largest: int) -> list[tuple[int, int]]:
    """[start, stop) ranges splitting n items into max(parts, ceil(n / largest)) near-equal
    contiguous shares (fewer when n is smaller)."""
    k = max(1, min(n, max(parts, -(-n // max(1, largest)))))
    bounds = [n * i // k for i in range(k + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


class WorkerPool:
    """`workers` actors, each with `spec`'s environments and `policy` (compiled there from its
    source). `on_dispatch(worker, share)`, if set, is called as a share is handed out."""

    def __init__(self, spec: Any, policy, workers: int, retries: int = RETRIES):
        self.ray = _import_ray()
        if workers < 1:
            raise ClusterError(f"--ray-workers must be at least 1, not {workers}")
        tp = policy.program
        self._cls = self.ray.remote(num_cpus=1, max_restarts=0)(RolloutWorker)
        self._args = (spec, tp.source, tp.file)
        self.retries = retries
        self.actors = [self._start() for _ in range(workers)]
        self.replaced = 0  # actors started in place of dead ones
        self.on_dispatch: Optional[Callable[[Any, int], None]] = None

    def _start(self):
        return self._cls.remote(*self._args)

    @property
    def size(self) -> int:
        return len(self.actors)

    def put(self, value: Any):
        """`value` in the object store once, for every share that uses it."""
        return self.ray.put(value)

    def map(self, method: str, calls: Sequence[tuple], on_result: Optional[Callable[[int, Any], None]] = None) -> list:
        """Call `method(*args)` for every args tuple of `calls` on the actors; the results in
        call order. `on_result(i, result)` is called in call order too, as soon as results
        0..i are all in."""
        ray, faults = self.ray, _faults(self.ray)
        queue, tries = deque(range(len(calls))), [0] * len(calls)
        idle, running = list(self.actors), {}
        results: dict[int, Any] = {}
        emitted = 0
        while emitted < len(calls):
            while queue and idle:
                i, actor = queue.popleft(), idle.pop()
                running[getattr(actor, method).remote(*calls[i])] = (i, actor)
                if self.on_dispatch is not None:
                    self.on_dispatch(actor, i)
            done, _ = ray.wait(list(running), num_returns=1)
            ref = done[0]
            i, actor = running.pop(ref)
            try:
                results[i] = ray.get(ref)
                idle.append(actor)
            except faults as e:
                tries[i] += 1
                if tries[i] > self.retries:
                    raise ClusterError(f"share {i + 1} of {len(calls)} failed on {tries[i]} workers, the last "
                                       f"time with: {_first_line(e)}") from None
                queue.appendleft(i)
                idle.append(self._replace(actor))
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                if isinstance(cause, BaseException):
                    raise cause from None
                raise ClusterError(f"a worker failed: {_first_line(e)}") from None
            while emitted in results:
                if on_result is not None:
                    on_result(emitted, results[emitted])
                emitted += 1
        return [results[i] for i in range(len(calls))]

    def _replace(self, dead):
        """A new actor in place of `dead` (Ray has already cleaned the dead one up)."""
        fresh = self._start()
        self.actors = [fresh if a is dead else a for a in self.actors]
        self.replaced += 1
        return fresh

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)
        self.actors = []

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


@contextlib.contextmanager
def worker_pool(address: str, spec: Any, policy, workers: Optional[int] = None) -> Iterator[WorkerPool]:
    """A pool on the cluster at `address` (one worker per CPU unless `workers`), for a command:
    a cluster that cannot be used, or a share that keeps failing, is a `Failure` (exit 1)."""
    from ..cli import Failure
    from .connect import connected

    try:
        with connected(address) as cluster:
            with WorkerPool(spec, policy, workers or cluster.cpus) as pool:
                yield pool
    except ClusterError as e:
        raise Failure(f"{e}.") from None

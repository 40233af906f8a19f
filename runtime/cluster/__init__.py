"""Rollouts, evaluations, RL collection and experiments on a Ray cluster (`--ray auto|ADDRESS`):

    flags.py    the --ray and --ray-workers flags, POLC_RAY_ADDRESS (imports nothing heavy)
    connect.py  joining a running cluster or starting a local one; a bad address is a clear error
    workers.py  the rollout-worker actor: its environments and the policy, compiled once per actor
    pool.py     a pool of those actors: each steps its share of the episodes; a dead one's are retried
    remote.py   rollout, evaluate and the RL collector on the pool, with the local functions' results
    graph.py    a dependency graph of steps as Ray tasks (`polc experiment --ray`), faults bounded

Ray is an optional extra (`pip install polc[ray]`): only these modules import it, and
only when a command runs with --ray. Names are loaded on first use. A refinement round's
candidates are spread over a cluster by `refine/candidates/on_ray.py`, through `connect`.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "flags": ["add_ray_flags", "pool_for", "ray_address", "ray_label"],
    "connect": ["Cluster", "ClusterError", "connected"],
    "pool": ["WorkerPool", "shares", "worker_pool"],
    "remote": ["RayCollector", "ray_evaluate", "ray_rollout", "ray_train"],
    "graph": ["GraphError", "Node", "run_graph"],
})

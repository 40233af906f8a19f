"""Digests of what the acting paths compute for a memoryless program, to compare before and
after a change to `polc.runtime.acting` (a memoryless program must act bit for bit as before).

    .venv/bin/python benchmarks/acting_digests.py      # prints one sha256 line per path

Paths: a traced rollout (every column), RL collection (draws, log-densities, observations),
`episodes_log_prob` over the collected episodes, an ES population step, and the batched
distribution of independent rows. Run it on both sides of a change and diff the output.
"""

from __future__ import annotations

import hashlib

import jax
import numpy as np

import polc
from polc.runtime import acting as A
from polc.runtime.envs import toy
from polc.runtime.trace.rollout import RolloutConfig, rollout


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str((a.dtype, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    from polc.runtime.rl.collect import Collector
    from polc.runtime.rl.es.population import Population, SearchSpace
    from polc.runtime.rl.losses import batch_logp

    policy = polc.loads(toy.reach_policy(), "reach.pol", analyze=False).compile()
    params = policy.init(jax.random.PRNGKey(0))
    seeds = [1, 2, 3, 4, 5]
    episodes = []
    rollout(policy, params, toy.SPEC, seeds, RolloutConfig(n_envs=2), episodes.append)
    print("rollout ", digest(*[ep.columns[k] for ep in episodes for k in sorted(ep.columns)]))
    with Collector(policy, toy.SPEC, 2, asynchronous=False) as c:
        got = c.run(params, jax.random.PRNGKey(1), seeds)
        tr = c.transitions(got, np.zeros_like(got.logp))
    print("collect ", digest(got.draws, got.logp, got.obs, got.lengths))
    logp = jax.jit(batch_logp(policy, 0.05))(params, tr.obs, tr.actions, 1.3)
    print("logp    ", digest(np.where(got.mask > 0, logp, 0)))
    space = SearchSpace(policy, params)
    rows = np.stack([space.vector(params) + 0.1 * k for k in range(3)]).astype(np.float32)
    with Population(policy, toy.SPEC, size=3, space=space) as pop:
        res = pop.run(rows, [7, 7, 8])
    print("es      ", digest(res.returns, res.lengths))
    obs = {"gap": np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2), "vel": np.linspace(-1, 1, 4, dtype=np.float32)}
    mean, std, latents = jax.jit(A.batched_distribution(A.acting(policy)))(params, obs)
    print("batched ", digest(*[d[k] for d in (mean, std, latents) for k in sorted(d)]))


if __name__ == "__main__":
    main()

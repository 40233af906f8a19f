"""Digests of what every acting path produces (issue 36, part 2), to compare two commits:

    git stash / checkout A;  .venv/bin/python benchmarks/acting_digests.py > a.json
    checkout B;              .venv/bin/python benchmarks/acting_digests.py > b.json;  diff a.json b.json

Cheap runs on the toy point mass through each path that steps a policy: rollouts (mean and
sampled, traced and not, the C back end), RL collection (with and without the std floor and
scale), the RL loss, its gradient and `batch_logp`, a short `polc rl` and ES run, an ES
population, a fit, and the brax network and distribution. Each line is a sha256 prefix of the
raw bytes: equal lines mean bit-identical outputs. About a minute on the 2-core VM.
"""
import hashlib, json, sys, tempfile, os, warnings
import jax, jax.numpy as jnp, numpy as np
import polc
from polc.runtime.envs import toy
from polc.runtime.trace.rollout import RolloutConfig, rollout

out = {}
def h(*arrs):
    m = hashlib.sha256()
    for a in arrs:
        if isinstance(a, dict):
            for k in sorted(a):
                m.update(k.encode()); m.update(np.ascontiguousarray(np.asarray(a[k])).tobytes())
        else:
            m.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return m.hexdigest()[:16]

RUNAWAY = toy.reach_policy(std=0.3).replace(
    "action push : real in [-1, 1] = kp * err - kd * vel",
    'obs target : real in [-1, 1] "target"\n'
    "action push : real in [-1, 1] = if target > 0 then 1 else kp * err - kd * vel")
policy = polc.loads(RUNAWAY, "reach.pol", analyze=False).compile()
params = policy.init(jax.random.PRNGKey(0))
seeds = list(range(100, 107))
for sample in (False, True):
    for trace in (False, True):
        eps = []
        r = rollout(policy, params, toy.SPEC, seeds, RolloutConfig(n_envs=3, sample=sample, trace=trace, noise_seed=5), eps.append)
        out[f"rollout sample={sample} trace={trace}"] = h(r.returns, r.lengths, *[e.columns for e in eps if e.columns])
try:
    eps = []
    r = rollout(policy, params, toy.SPEC, seeds, RolloutConfig(n_envs=3, backend="c"), eps.append)
    out["rollout c"] = h(r.returns, r.lengths, *[e.columns for e in eps])
except Exception as e:
    out["rollout c"] = repr(e)[:80]

from polc.runtime.rl.collect import Collector
from polc.runtime.rl.losses import rl_loss, batch_logp, advantages
for min_std, scale in ((0.0, 1.0), (0.5, 0.7)):
    with Collector(policy, toy.SPEC, 3, asynchronous=False, min_std=min_std) as c:
        ep = c.run(params, jax.random.PRNGKey(3), seeds, std_scale=scale)
        adv = advantages(ep.rewards, ep.mask, np.zeros(len(seeds), int), 0.98, True)
        tr = c.transitions(ep, adv)
    out[f"collect min_std={min_std} scale={scale}"] = h(ep.obs, ep.draws, ep.logp, ep.rewards, ep.mask, ep.returns, ep.lengths, [ep.resets, ep.idle_resets])
    loss = rl_loss(policy, 0.2, 10, min_std)
    (v, st), g = jax.value_and_grad(lambda p: loss(p, tr, scale), has_aux=True)(params)
    out[f"rl_loss min_std={min_std}"] = h(v, *st, g)
    out[f"batch_logp min_std={min_std}"] = h(jax.jit(batch_logp(policy, min_std))(params, tr.obs, tr.actions, scale))

from polc.runtime.rl.train import RLConfig, train
from polc.runtime.rl.es.train import ESConfig, train as es_train
from polc.runtime.rl.es.population import Population, SearchSpace
from polc.runtime.io.params import load_params
with tempfile.TemporaryDirectory() as d:
    res = train(policy, params, toy.SPEC, RLConfig(resets=8, episodes_per_update=4, n_envs=2, keep="last", val_every=100), d)
    out["rl train"] = h(res.params if hasattr(res, "params") else res[0])
with tempfile.TemporaryDirectory() as d:
    res = es_train(policy, params, toy.SPEC, ESConfig(resets=8, population=4, val_every=100), d)
    out["es train"] = h(res.params if hasattr(res, "params") else res[0])
space = SearchSpace(policy, params)
rows = space.vector(params)[None] + 0.1 * np.random.default_rng(0).standard_normal((4, space.size)).astype(np.float32)
with Population(policy, toy.SPEC, 4, space) as pop:
    r = pop.run(rows, [7, 7, 8, 8])
out["population"] = h(r.returns, r.lengths)

from polc.runtime.il.train import Demos, FitConfig, fit
eps = []
rollout(policy, params, toy.SPEC, seeds, RolloutConfig(n_envs=3, sample=True, noise_seed=1), eps.append)
obs = {o.name: np.concatenate([e.columns["obs." + o.name] for e in eps]) for o in policy.program.obs}
acts = {a.name: np.concatenate([e.columns["action." + a.name] for e in eps]) for a in policy.program.actions}
epi = np.concatenate([e.columns["episode"] for e in eps])
fr = fit(policy, Demos(obs, acts, epi), FitConfig(max_epochs=20, restarts=2))
out["fit"] = h(fr.params, [fr.loss if hasattr(fr, "loss") else 0])

try:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "runtime", "rl"))
    from test_brax_engine import TOY, TOY_POL
    from polc.runtime.rl.brax.networks import policy_apply, polc_normal
    bp = polc.loads(TOY_POL).compile()
    prm = bp.unconstrain({"k": 0.7, "s": 0.2})
    o = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (5, 3, 4)), jnp.float32)
    a = jax.jit(policy_apply(bp, TOY))(prm, o)
    dist = polc_normal(2)
    dr = dist.sample_no_postprocessing(a, jax.random.PRNGKey(1))
    dd = dist.create_dist(a); d2 = dist.create_dist(a * 1.1)
    out["brax"] = h(a, dr, dist.log_prob(a, dr), dist.entropy(a, jax.random.PRNGKey(2)), dd.kl_divergence(d2), dd.entropy())
except Exception as e:
    out["brax"] = repr(e)[:120]
json.dump(out, sys.stdout, indent=1)

"""Ablations of `polc rl`'s additions to the paper's update on the toy point mass
(docs/results/rl.md): the trust region, the std floor, advantage normalisation,
gradient clipping, keep-best and annealing, each switched off or varied against
the defaults, from two starts:

    mlp    an MLP fitted by `polc fit` to 5 expert episodes: a near-deterministic
           fit (tiny std), like Car Racing's MLP + IL;
    weak   the expert's PD structure with weak declared gains (kp 0.2, kd 0.05, std 0.3).

    python benchmarks/rl_ablation.py [--resets 400] [--seeds 0 1 2] [--only mlp] [--json out.json]

Each row: mean over training seeds (--seeds, the RL noise seed) of the return on 20
unseen evaluation seeds (10000..10019), mean actions and sampled actions, and the
largest approx. KL of any update.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import replace

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import polc  # noqa: E402
from polc.runtime.envs import toy  # noqa: E402
from polc.runtime.io.params import load_params  # noqa: E402
from polc.runtime.rl.train import PARAMS, RLConfig, train  # noqa: E402
from polc.runtime.trace.evaluate import evaluate  # noqa: E402
from polc.runtime.trace.rollout import RolloutConfig  # noqa: E402

MLP = '''policy reach_mlp "an MLP from the point mass's observations to the push"
obs gap : real[2] in [-3, 3] "target - pos, and -vel"
obs vel : real in [-3, 3]   "velocity"
weight s : real in [0.001, 1] = 0.1 "noise std"
latent out = mlp(gap, vel; hidden = [32, 32], out = 1, activation = tanh) "unsquashed push"
action push : real in [-1, 1] = tanh(out[0]) ~ normal(std = s)
'''
EVAL = list(range(10_000, 10_020))

# name -> changes to the defaults (RLConfig()); "paper" switches every addition off.
VARIANTS = {
    "defaults": {},
    "paper": dict(RLConfig.PAPER),
    "no trust region": {"target_kl": 0.0},
    "target_kl 0.01": {"target_kl": 0.01},
    "target_kl 0.02": {"target_kl": 0.02},
    "target_kl 0.2": {"target_kl": 0.2},
    "no std floor": {"min_std": 0.0},
    "min_std 0.02": {"min_std": 0.02},
    "min_std 0.05": {"min_std": 0.05},
    "min_std 0.1": {"min_std": 0.1},
    "min_std 0.2": {"min_std": 0.2},
    "no adv. normalisation": {"normalise_advantages": False},
    "no grad clipping": {"max_grad_norm": 0.0},
    "keep best": {"keep": "best", "val_every": 2},
    "anneal 0.3": {"anneal": 0.3},
}


def fitted_mlp(tmp: str):
    """The MLP policy and its params fitted to 5 expert episodes (demo seeds 0..4)."""
    from polc.cli import main

    demos, out, pol = os.path.join(tmp, "demos.parquet"), os.path.join(tmp, "mlp.params"), os.path.join(tmp, "mlp.pol")
    with open(pol, "w") as f:
        f.write(MLP)
    for argv in (["demos", toy.NAME, "--episodes", "5", "-o", demos, "-q"],
                 ["fit", pol, "--demos", demos, "-o", out, "--check-episodes", "0", "-q"]):
        if main(argv) != 0:
            sys.exit(f"polc {argv[0]} failed")
    policy = polc.load(pol).compile()
    return policy, load_params(out, policy)


def weak():
    policy = polc.loads(toy.reach_policy(kp=0.2, kd=0.05, std=0.3), "reach.pol", analyze=False).compile()
    return policy, policy.init(jax.random.PRNGKey(0))


def score(policy, params) -> tuple[float, float]:
    mean = evaluate(policy, params, toy.SPEC, EVAL, RolloutConfig(n_envs=20)).mean
    sampled = evaluate(policy, params, toy.SPEC, EVAL, RolloutConfig(n_envs=20, sample=True)).mean
    return mean, sampled


def run(policy, params, config: RLConfig, tmp: str) -> dict:
    d = tempfile.mkdtemp(dir=tmp)
    result = train(policy, params, toy.SPEC, config, d)
    mean, sampled = score(policy, load_params(os.path.join(d, PARAMS), policy))
    log = result.log["log"]
    return {"mean": mean, "sampled": sampled, "max_kl": max(r["approx_kl"] for r in log),
            "stopped": sum(r["stopped_at"] is not None for r in log), "updates": len(log),
            "kept": result.log.get("kept", {}).get("update")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--resets", type=int, default=400)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--only", choices=("mlp", "weak"))
    ap.add_argument("--variants", nargs="+", help="a subset of: " + ", ".join(VARIANTS))
    ap.add_argument("--json")
    args = ap.parse_args()
    toy.register()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        starts = {"mlp": lambda: fitted_mlp(tmp), "weak": weak}
        for start, make in starts.items():
            if args.only and start != args.only:
                continue
            policy, params = make()
            m, s = score(policy, params)
            std = float(policy.constrain(params)["s"])
            print(f"\n## {start}: start params {m:.2f} mean actions, {s:.2f} sampled, fitted std {std:.4g}")
            print("| variant | mean actions | sampled actions | max approx. KL | updates stopped by the trust region | kept |")
            print("|---|---|---|---|---|---|")
            out[start] = {"start": {"mean": m, "sampled": s, "std": std}, "variants": {}}
            for name in args.variants or VARIANTS:
                rows = [run(policy, params, replace(RLConfig(resets=args.resets, n_envs=20, seed=seed),
                                                    **VARIANTS[name]), tmp) for seed in args.seeds]
                agg = {k: [r[k] for r in rows] for k in rows[0]}
                out[start]["variants"][name] = agg
                kept = ",".join(str(k) for k in agg["kept"]) if name == "keep best" else "-"
                print(f"| {name} | {np.mean(agg['mean']):.2f} ± {np.std(agg['mean']):.2f} | "
                      f"{np.mean(agg['sampled']):.2f} ± {np.std(agg['sampled']):.2f} | {max(agg['max_kl']):.3g} | "
                      f"{sum(agg['stopped'])}/{sum(agg['updates'])} | {kept} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

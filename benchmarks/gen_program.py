"""A large, valid Pol program for timing `polc check`: generated, deterministic.

    .venv/bin/python benchmarks/gen_program.py [--lines 3000] [-o big.pol]

The program repeats one "module" per block until it has about `lines` lines.
Each block has scalar, vector and matrix observations; weights of every
constraint kind (>= a, <= b, [a, b], none, vector-valued); a chain of latents;
fan-ins that read the chain, the observations through reductions and slices,
an if-then-else and the previous block's results (so the graph is one connected
DAG, not independent islands); one stochastic action; and monotonicity and range
intents that hold by construction. Every declaration has a doc string on some
blocks and not others, and the declarations of a block are emitted in shuffled
order (the checker sorts them).
"""

from __future__ import annotations

import argparse
import random
import sys

CHAIN = 8  # latents per chain; blocks link up, but the longest path stays about 2 * CHAIN + blocks


def block(i: int, rng: random.Random) -> list[str]:
    """The declarations of block i (one or two lines each)."""
    p = f"b{i}_"
    doc = (lambda s: f' "{s}"') if i % 2 == 0 else (lambda s: "")
    decls = [
        f"obs {p}x : real in [-1, 1]{doc('a scalar observation')}",
        f"obs {p}v : real[8] in [0, 2]{doc('a vector observation')}",
        f"obs {p}m : real[4, 3] in [-5, 5]{doc('a matrix observation')}",
        f"weight {p}gain : real >= 0 = {rng.uniform(0.1, 2):.3f}{doc('a gain, never negative')}",
        f"weight {p}mix : real in [0, 1] = {rng.uniform(0.1, 0.9):.3f}",
        f"weight {p}damp : real <= 0 = {-rng.uniform(0.1, 2):.3f}{doc('a damping, never positive')}",
        f"weight {p}bias : real = {rng.uniform(-1, 1):.3f}",
        f"weight {p}w : real[8] >= 0 = {rng.uniform(0.1, 1):.3f}",
        f"weight {p}noise : real in [0.01, 0.5] = 0.1",
        # a chain: each link reads the one before it
        f"latent {p}c0 = {p}gain * {p}x + {p}bias{doc('the head of the chain')}",
    ]
    for k in range(1, CHAIN):
        op = rng.choice(["tanh({prev}) * {p}mix + {p}bias", "{p}gain * {prev} + {p}damp * square({p}x)",
                         "softplus({prev}) - {p}mix", "{prev} * (1 + {p}mix)"])
        decls.append(f"latent {p}c{k} = " + op.format(prev=f"{p}c{k - 1}", p=p))
    last = f"{p}c{CHAIN - 1}"
    prev_out = f"b{i - 1}_out" if i > 0 else "0"
    decls += [
        # fan-ins over reductions, slices and the previous block
        f"latent {p}feat = mean({p}v * {p}w) + sum({p}m[:, 1]) / 4 - max(abs({p}m[1:3, 0])){doc('features')}",
        f"latent {p}gate = if {p}x > 0 and {p}feat < 1 then {p}feat else {p}mix * {p}feat",
        f"latent {p}sum = {last} + {p}gate + {p}damp * square({p}x) + 0.1 * {prev_out}\n    \"fan-in of the chain, the features and the block before\"",
        f"latent {p}pos = relu({p}sum) + norm({p}v[0:4])",
        f"latent {p}out = clip({p}sum + {p}gain * {p}x, -2, 2)",
        f"action {p}act : real in [-1, 1] = clip({p}out / 2 + 0.1 * {p}pos, -1, 1)"
        f"\n    ~ normal(std = {p}noise + 0.1 * abs({p}out))",
        # intents that hold by construction
        f"expect {p}c0 increasing in {p}x{doc('the gain is non-negative')}",
        f"expect {p}pos >= 0",
        f"expect {p}out in [-2, 2]",
    ]
    rng.shuffle(decls)
    return [f"# ---- block {i} " + "-" * 60, *decls, ""]


def generate(lines: int = 3000, seed: int = 0) -> str:
    """Pol source text of about `lines` lines (a whole number of blocks)."""
    rng = random.Random(seed)
    out = [f'policy generated "A generated program of about {lines} lines for timing the checker."', ""]
    i = 0
    while len("\n".join(out).splitlines()) < lines:
        out += block(i, rng)
        i += 1
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", help="write here (default: standard output)")
    args = ap.parse_args(argv)
    text = generate(args.lines, args.seed)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

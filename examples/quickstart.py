"""The compiler alone (`make compile-demo`): check, compile and run a Pol policy.

    python examples/quickstart.py [FILE.pol] [-o OUTDIR]

Checks the program (printing every diagnostic, as `polc check` does),
compiles it to a jitted JAX function, runs it on a batch of observations
drawn inside their declared ranges, prints the actions and every named
latent, and writes the dataflow graph (SVG) and a standalone JAX module to
OUTDIR (default: out/).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sample_obs(program, n: int, seed: int = 0) -> dict:
    """`n` observations drawn uniformly inside each declared range (N(0, 1) where open)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for o in program.typed.obs:
        shape = (n,) + o.type.shape
        if np.isfinite(o.lo) and np.isfinite(o.hi):
            out[o.name] = rng.uniform(o.lo, o.hi, shape).astype(np.float32)
        else:
            x = rng.normal(size=shape).astype(np.float32)
            out[o.name] = np.clip(x, o.lo, o.hi)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", default=os.path.join(HERE, "car_racing", "initial.pol"))
    ap.add_argument("-o", "--out", default="out")
    args = ap.parse_args(argv)

    import polc
    from polc.backend import emit
    from polc import graph

    print(f"== polc check {os.path.relpath(args.file)}")
    try:
        program = polc.load(args.file)
    except polc.PolError as e:
        print(e)
        return 1
    if program.warnings:
        print(polc.render_all(program.warnings, program.source))
    tp = program.typed
    print(f"ok: {len(tp.obs)} observations, {len(tp.weights)} weights, {len(tp.latents)} latents, "
          f"{len(tp.actions)} actions")
    for r in program.analysis.intents if program.analysis else ():
        print(f"  intent {r.intent.text!r}: {r.status}")

    print("\n== compile and run")
    import jax
    import numpy as np

    t0 = time.perf_counter()
    policy = program.compile()
    params = policy.init(jax.random.PRNGKey(0))
    batch = jax.jit(jax.vmap(policy.apply, in_axes=(None, 0)))
    obs = sample_obs(program, 4096)
    actions, latents = batch(params, obs)
    jax.block_until_ready(actions)
    t1 = time.perf_counter()
    actions, latents = batch(params, obs)
    jax.block_until_ready(actions)
    t2 = time.perf_counter()
    print(f"compiled and ran 4096 observations in {t1 - t0:.2f} s; a second batch took {1e3 * (t2 - t1):.2f} ms")

    def row(name: str, v) -> str:
        v = np.asarray(v)
        return f"  {name:<16} {str(v.shape[1:] or 'scalar'):<10} mean {v.mean():+.4f}  min {v.min():+.4f}  max {v.max():+.4f}"

    print("actions (clipped means):")
    for name, v in actions.items():
        print(row(name, v))
    print("latents (every name from the source):")
    for name, v in latents.items():
        print(row(name, v))

    os.makedirs(args.out, exist_ok=True)
    stem = os.path.splitext(os.path.basename(args.file))[0]
    paths = {
        os.path.join(args.out, f"{stem}.svg"): graph.to_svg(tp),
        os.path.join(args.out, f"{stem}_policy.py"): emit.emit_python(tp),
    }
    from polc.util.files import write_atomic

    for path, text in paths.items():
        write_atomic(path, text)
    print("\nwrote " + ", ".join(paths))
    print("next: `polc check`, `polc compile`, `polc graph`, `polc fmt` on any .pol file (see README.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Checkpoints of an RL run: everything `--resume` needs to continue bit for bit.

One file, `checkpoint.npz`, written atomically (a temporary file in the same
directory, then `os.replace`) after each update, so a run killed at any moment
leaves either the previous checkpoint or the new one, never a mix:

    p/<i>   the params' leaves (unconstrained, float32), in `jax.tree` order
    o/<i>   the optimiser state's leaves (Adam's moments and step count)
    b/<i>   with `--keep best`: the best params so far by the held-out evaluation
    meta    a JSON string: format, config, counters (updates, resets, elapsed
            seconds), the next update's PRNG key, the structure hash, the start
            params' hash, and the per-update log

The PRNG state is fully determined by (config.seed, updates); it is stored too
so a checkpoint says exactly which key the next update draws with. Everything
else of the run (`rl.params`, `log.json`, `curve.png`) is derived from this file
and rewritten from it.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, NamedTuple, Optional

import numpy as np

from polc.util.files import write_atomic

FORMAT = 1
NAME = "checkpoint.npz"


class CheckpointError(Exception):
    """A checkpoint that cannot be resumed; the message says why."""


class TrainState(NamedTuple):
    """Where a run stands after `updates` updates."""

    params: Any       # unconstrained params (a pytree of float32 arrays)
    opt_state: Any    # optax state of the same params
    updates: int      # updates done
    resets: int       # environment episodes used so far
    elapsed: float    # seconds of training, summed over sessions
    best: Any = None  # with `--keep best`: the params of the best held-out evaluation so far


def save(directory: str, state: TrainState, meta: dict) -> str:
    """Write `directory/checkpoint.npz` atomically; returns its path."""
    import jax

    path = os.path.join(directory, NAME)
    arrays = {f"p/{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(state.params))}
    arrays.update({f"o/{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(state.opt_state))})
    if state.best is not None:
        arrays.update({f"b/{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(state.best))})
    doc = dict(meta, format=FORMAT, updates=state.updates, resets=state.resets, elapsed=state.elapsed)
    arrays["meta"] = np.asarray(json.dumps(doc))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    write_atomic(path, buffer.getvalue())  # the one atomic writer every file of polc goes through
    return path


def exists(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, NAME))


def read_meta(directory: str) -> dict:
    """The meta of `directory/checkpoint.npz` alone (which engine, config, counters)."""
    path = os.path.join(directory, NAME)
    try:
        with np.load(path, allow_pickle=False) as z:
            return json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"cannot read the checkpoint '{path}': {e}") from None


def load(directory: str, params_template: Any, opt_template: Any) -> tuple[TrainState, dict]:
    """The state and meta of `directory/checkpoint.npz`, with leaves put back into the
    templates' tree structures (shapes and dtypes checked)."""
    import jax
    import jax.numpy as jnp

    path = os.path.join(directory, NAME)
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(str(data["meta"]))
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"cannot read the checkpoint '{path}': {e}") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"'{path}' is not an RL checkpoint of format {FORMAT}")

    def restore(prefix: str, template: Any, what: str):
        leaves, tree = jax.tree.flatten(template)
        stored = sorted((int(k.split("/")[1]), v) for k, v in data.items() if k.startswith(prefix + "/"))
        if len(stored) != len(leaves) or any(
                v.shape != np.shape(t) or v.dtype != np.asarray(t).dtype for (_, v), t in zip(stored, leaves)):
            raise CheckpointError(f"the {what} in '{path}' do not match this policy's (was the .pol changed?)")
        return jax.tree.unflatten(tree, [jnp.asarray(v) for _, v in stored])

    best = restore("b", params_template, "best params") if any(k.startswith("b/") for k in data) else None
    state = TrainState(restore("p", params_template, "params"), restore("o", opt_template, "optimiser state"),
                       int(meta["updates"]), int(meta["resets"]), float(meta["elapsed"]), best)
    return state, meta


def other_run(directory: str, saved: dict, meta: dict, differences: list[str], check_start: bool) -> Optional[str]:
    """Why the run saved in `directory` (its meta `saved`) cannot be continued as the run
    described by `meta`, or None. `differences` lists the settings that differ
    ("lr 0.007 -> 0.01"); `check_start` also compares the start params. Shared by the
    polc and brax engines, each raising its own error with the message."""
    if saved.get("structure_sha256") != meta["structure_sha256"]:
        return (f"the run in '{directory}' trained policy \"{saved.get('policy')}\" ({saved.get('file')}), whose "
                f"structure differs from \"{meta['policy']}\" ({meta['file']}); resume with that file or start a "
                f"new run in another directory")
    if saved.get("env") != meta["env"]:
        return f"the run in '{directory}' trained on \"{saved.get('env')}\", not \"{meta['env']}\""
    was = saved.get("start_params", {})
    if check_start and was.get("sha256") != meta["start_params"]["sha256"]:
        return (f"the run in '{directory}' started from other params ({was.get('file') or 'the declared weights'}) "
                f"than {meta['start_params'].get('file')}; resume without --params or with the same file")
    if differences:
        return f"the run in '{directory}' used other settings; resume with the same ones ({'; '.join(differences)})"
    return None

"""Params files: fitted weights as small, human-readable JSON.

    {
     "polc_params": 1,
     "policy": "car_racing",
     "structure_sha256": "3f1c...",
     "polc_version": "0.1.0",
     "weights": {
      "k_look": 0.8123,
      "gains": [0.1, 0.2]
     },
     "mlps": {"out.mlp": {"Dense_0": {"bias": [...], "kernel": [[...], ...]}, ...}},
     "nodes": {"look_x": "a1b2c3d4e5f6", ...},
     "fit": {...}
    }

`weights` are the CONSTRAINED values (what the program computes with), by the
names in the source, scalars as numbers and arrays as nested lists; `mlps` are
the flax Dense params of each `mlp(...)` block by its key. A weight is written
as the shortest decimal that loads back to exactly the same params (0.1, not
0.099999994), an mlp value as the shortest decimal of its float32.

The structure hash. `structure_sha256` is the sha256 of a canonical JSON
description of the checked program's dataflow: the names and shapes of the
observations, each weight's name, shape and constraint, and every latent and
action (its type, its expression tree with all names and constants, an action's
range and noise). It ignores what cannot change what the params mean: comments,
layout, doc strings, intents, weights' initial values, observation ranges and
the policy's name. `nodes` holds a short hash per latent and action so a
mismatch can name what changed. Loading params into a program whose structure
differs is a `ParamsError` naming the differences.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import fields, is_dataclass
from typing import Any, Mapping, Optional

import numpy as np

from polc.analysis import transforms
from polc.check import typed as T
from polc.check.typed import TypedProgram

FORMAT = 1
_SKIP = {"span", "doc", "text", "init"}  # node fields that do not change what params mean


class ParamsError(Exception):
    """A params file that cannot be used with this program; the message says why."""


# ---- the structure hash ----------------------------------------------------------------


def _canon(x: Any) -> Any:
    """A JSON-able canonical form of a typed node (no spans, docs or init values)."""
    if isinstance(x, T.Type):
        return str(x)
    if is_dataclass(x):
        return [type(x).__name__] + [[f.name, _canon(getattr(x, f.name))] for f in fields(x) if f.name not in _SKIP]
    if isinstance(x, (tuple, list)):
        return [_canon(v) for v in x]
    if isinstance(x, float):
        return repr(x)  # "inf", "0.1": exact and JSON-safe
    return x


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def node_hashes(tp: TypedProgram) -> dict[str, str]:
    """A short hash of each latent and action declaration, by name."""
    return {n.name: _digest(_canon(n))[:12] for n in tp.nodes}


def structure_sha256(tp: TypedProgram) -> str:
    """The sha256 of the program's dataflow (see the module docstring)."""
    return _digest({
        "obs": {o.name: str(o.type) for o in tp.obs},
        "weights": {w.name: [str(w.type), repr(w.lo), repr(w.hi)] for w in tp.weights},
        "nodes": {n.name: _canon(n) for n in tp.nodes},
    })


def params_sha256(params: Mapping[str, Any]) -> str:
    """The sha256 of parameter values (unconstrained, float32), by sorted name and leaf path."""
    h = hashlib.sha256()

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, Mapping):
            for k in sorted(v):
                walk(f"{prefix}/{k}", v[k])
        else:
            a = np.ascontiguousarray(np.asarray(v, np.float32))
            h.update(f"{prefix}:{a.shape}".encode())
            h.update(a.tobytes())

    walk("", params)
    return h.hexdigest()


# ---- writing -------------------------------------------------------------------------


def _short(x: float) -> float:
    """The shortest decimal that reads back as the same float32, as a Python float."""
    return float(str(np.float32(x)))


def _nested(a: np.ndarray) -> Any:
    if a.ndim == 0:
        return _short(a)
    return [_nested(v) for v in a]


def _unconstrain(values: Any, lo: float, hi: float) -> np.ndarray:
    """Constrained values -> float32 unconstrained ones, as `load_params` computes them
    (in float64, values on a bound moved just inside)."""
    return np.asarray(transforms.unconstrain(_inside(values, lo, hi), lo, hi, np), np.float32)


def _weight_text(u: np.ndarray, lo: float, hi: float) -> Any:
    """A weight's constrained value(s) as the shortest decimals that load back to
    exactly the unconstrained `u` (0.1 rather than 0.099999994); the value's own
    shortest float32 text where no decimal of up to 9 digits does (a saturated
    transform maps many u to one value)."""
    x = np.asarray(transforms.constrain(np.asarray(u, np.float64), lo, hi, np))

    def one(xi: float, ui: np.float32) -> float:
        for digits in range(1, 10):
            d = float(f"{xi:.{digits}g}")
            if lo <= d <= hi and _unconstrain(d, lo, hi) == ui:
                return d
        return _short(xi)

    flat = [one(float(xi), ui) for xi, ui in zip(x.reshape(-1), np.asarray(u, np.float32).reshape(-1))]
    return _nested(np.asarray(flat, np.float64).reshape(x.shape)) if x.shape else flat[0]


def _dump(obj: Any, indent: int = 0) -> str:
    """JSON with dicts one key a line and each innermost list of numbers on one line."""
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad} {json.dumps(k)}: {_dump(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and isinstance(obj[0], list):
        rows = [f"{pad} {_dump(v, indent + 1)}" for v in obj]
        return "[\n" + ",\n".join(rows) + "\n" + pad + "]"
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ParamsError(f"cannot save a non-finite value ({obj})")
    return json.dumps(obj, separators=(", ", ": "))


def to_json(policy, params: Mapping[str, Any], info: Optional[Mapping[str, Any]] = None) -> str:
    """The params file text for `params` (unconstrained, as `policy.init` makes them)."""
    from polc import __version__

    tp: TypedProgram = policy.program
    names = {w.name for w in tp.weights}
    mlp_keys = sorted(k for k in params if k not in names)
    doc: dict[str, Any] = {
        "polc_params": FORMAT,
        "policy": tp.name,
        "structure_sha256": structure_sha256(tp),
        "polc_version": __version__,
        "weights": {w.name: _weight_text(np.asarray(params[w.name], np.float32), w.lo, w.hi) for w in tp.weights},
        "mlps": {k: _tree(params[k]) for k in mlp_keys},
        "nodes": node_hashes(tp),
    }
    if info:
        doc["fit"] = dict(info)
    return _dump(doc) + "\n"


def _tree(p: Any) -> Any:
    if isinstance(p, Mapping):
        return {k: _tree(p[k]) for k in sorted(p)}
    return _nested(np.asarray(p, np.float32))


def save_params(path: str, policy, params: Mapping[str, Any], info: Optional[Mapping[str, Any]] = None) -> None:
    """Write a params file atomically (no half-written file under `path`)."""
    from polc.util.files import write_atomic

    write_atomic(path, to_json(policy, params, info))


# ---- reading -------------------------------------------------------------------------


def read_params(path: str) -> dict:
    """The parsed params file, checked to be one; raises `ParamsError`."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ParamsError(f"cannot read '{path}': no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ParamsError(f"cannot read '{path}': {e}") from None
    except ValueError as e:
        raise ParamsError(f"'{path}' is not a polc params file: invalid JSON ({e})") from None
    except RecursionError:
        raise ParamsError(f"'{path}' is not a polc params file: its JSON is nested too deeply to read "
                          f"(a params file nests at most {MAX_DEPTH} levels)") from None
    if not isinstance(doc, dict) or doc.get("polc_params") != FORMAT or not isinstance(doc.get("weights"), dict):
        raise ParamsError(f"'{path}' is not a polc params file (format {FORMAT} with \"weights\")")
    if not isinstance(doc.get("mlps", {}), dict):
        raise ParamsError(f"'{path}': \"mlps\" must be an object of mlp blocks by key")
    return doc


MAX_DEPTH = 64  # array dimensions a params value may nest (numpy's own limit)
F32_MAX = float(np.finfo(np.float32).max)


def _type_name(v: Any) -> str:
    if isinstance(v, bool):
        return f"{'true' if v else 'false'}, not a number"
    if isinstance(v, str):
        return f"the string {json.dumps(v[:40])}, not a number"
    if v is None:
        return "null, not a number"
    if isinstance(v, dict):
        return "an object, not a number or a list of numbers"
    return f"{type(v).__name__}, not a number"


def _values(v: Any, what: str, path: str) -> np.ndarray:
    """`v` (a number or a nest of equal-length lists of numbers) as a float64 array; a
    `ParamsError` naming `what` and the position of the first value that is not a finite
    number representable in float32, or of the first ragged list."""
    def walk(x: Any, at: str, depth: int) -> Any:
        if isinstance(x, list):
            if depth >= MAX_DEPTH:
                raise ParamsError(f"'{path}': {what} nests lists more than {MAX_DEPTH} deep")
            if not x:
                raise ParamsError(f"'{path}': {what}{at} is an empty list")
            items = [walk(e, f"{at}[{i}]", depth + 1) for i, e in enumerate(x)]
            shape = items[0].shape
            for i, e in enumerate(items):
                if e.shape != shape:
                    raise ParamsError(f"'{path}': {what} is not a regular array: {what}{at}[{i}] has shape "
                                      f"{e.shape} but {what}{at}[0] has shape {shape}")
            return np.stack(items)
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ParamsError(f"'{path}': {what}{at} is {_type_name(x)}")
        try:
            f = float(x)
        except OverflowError:  # an integer beyond float64
            f = math.inf
        if not (math.isfinite(f) and abs(f) <= F32_MAX):
            shown = x if isinstance(x, float) else f"an integer of {len(str(abs(x)))} digits"
            raise ParamsError(f"'{path}': {what}{at} is {shown}; params must be finite float32 numbers "
                              f"(at most about 3.4e38 in magnitude)")
        return np.asarray(f, np.float64)

    return walk(v, "", 0)


def _mlp_tree(tree: Any, key: str, path: str, at: str = "", depth: int = 0) -> Any:
    """An mlp block's params (nested objects of arrays) with every leaf checked by `_values`."""
    if isinstance(tree, dict):
        if depth >= 8:
            raise ParamsError(f"'{path}': mlp \"{key}\" nests objects more than 8 deep")
        return {k: _mlp_tree(v, key, path, f"{at}/{k}", depth + 1) for k, v in tree.items()}
    return _values(tree, f'mlp "{key}" {at.lstrip("/") or "value"}', path)


def checked_values(doc: dict, path: str) -> tuple[dict, dict]:
    """A params file's (`read_params`) weights and mlps as float64 arrays, every value checked
    to be a finite float32 number in a regular array; `ParamsError` naming `path`, the weight
    or mlp leaf, and what is wrong."""
    weights = {name: _values(v, f'weight "{name}"', path) for name, v in doc["weights"].items()}
    mlps = {}
    for key, tree in (doc.get("mlps") or {}).items():
        if not isinstance(tree, dict):
            raise ParamsError(f"'{path}': mlp \"{key}\" is {_type_name(tree)}; an mlp block is an object "
                              f"of layers")
        mlps[key] = _mlp_tree(tree, key, path)
    return weights, mlps


def _layout_diff(tp: TypedProgram, weights: Mapping[str, np.ndarray], mlps: Mapping[str, Any],
                 mlp_shapes: Mapping[str, Any]) -> list[str]:
    """Weights and mlps that the file (its checked values) and the program do not share (name or shape)."""
    out: list[str] = []
    declared = {w.name: w for w in tp.weights}
    for name in sorted(set(weights) - set(declared)):
        out.append(f'the file has weight "{name}", which the program does not declare')
    for name, w in declared.items():
        if name not in weights:
            out.append(f'weight "{name}" ({w.type}) is missing from the file')
        elif weights[name].shape != w.type.shape:
            out.append(f'weight "{name}" is declared {w.type} but the file holds shape {weights[name].shape}')
    for key in sorted(set(mlps) - set(mlp_shapes)):
        out.append(f'the file has mlp "{key}", which the program does not have')
    for key, shapes in mlp_shapes.items():
        if key not in mlps:
            out.append(f'mlp "{key}" is missing from the file')
        elif _shapes(mlps[key]) != shapes:
            out.append(f'mlp "{key}" has layer shapes {_shapes(mlps[key])} in the file '
                       f'but {shapes} in the program')
    return out


def _node_diff(tp: TypedProgram, doc: dict) -> list[str]:
    """The latents and actions whose definition changed since the file was written."""
    if doc.get("structure_sha256") == structure_sha256(tp):
        return []
    old, new = doc.get("nodes") or {}, node_hashes(tp)
    kinds = {n.name: "action" if isinstance(n, T.Action) else "latent" for n in tp.nodes}
    out = [f'{kinds[name]} "{name}" is new' for name in new if name not in old]
    out += [f'{kinds[name]} "{name}" changed' for name in new if name in old and old[name] != new[name]]
    out += [f'"{name}" was removed' for name in old if name not in new]
    return out or ["the observations or the weight constraints changed"]


def _shapes(tree: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: _shapes(v) for k, v in sorted(tree.items())}
    return tuple(np.shape(tree))


def _inside(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Values on a bound (printing rounds e.g. 0.01 + 1e-12 to 0.01) moved just inside, in float64."""
    v = np.asarray(v, np.float64)
    if lo > -math.inf:
        v = np.where(v <= lo, np.nextafter(lo, math.inf), v)
    if hi < math.inf:
        v = np.where(v >= hi, np.nextafter(hi, -math.inf), v)
    return v


def load_params(path: str, policy, allow_structure_change: bool = False) -> dict:
    """Read a params file into `policy`'s unconstrained params (ready for `apply`).

    Raises `ParamsError` when the file is not a params file, when a value is not a
    finite float32 number (true, "4.8", NaN, 1e39, a ragged or too deeply nested list:
    naming the weight or mlp leaf and the position), when its weights or
    mlps do not match the program's (naming each difference), when a value lies
    outside its weight's constraint, or, unless `allow_structure_change`, when
    the structure hash differs (naming the latents and actions that changed)."""
    import jax
    import jax.numpy as jnp

    tp: TypedProgram = policy.program
    doc = read_params(path)
    weights, mlps = checked_values(doc, path)
    template = jax.eval_shape(policy.init, jax.random.PRNGKey(0))
    mlp_shapes = {k: _shapes(jax.tree.map(lambda s: np.zeros(s.shape), v))
                  for k, v in template.items() if tp.decl(k) is None}
    diff = _layout_diff(tp, weights, mlps, mlp_shapes)
    if not diff and not allow_structure_change:
        diff = _node_diff(tp, doc)
    if diff:
        shown = diff[:12] + ([f"... and {len(diff) - 12} more"] if len(diff) > 12 else [])
        raise ParamsError(f"'{path}' holds params of policy \"{doc.get('policy')}\" fitted for a different "
                          f"structure than policy \"{tp.name}\" ({tp.file}):\n"
                          + "\n".join("  - " + d for d in shown) + "\nRefit with `polc fit`.")
    params: dict[str, Any] = {}
    for w in tp.weights:
        v = weights[w.name]
        if ((v < w.lo) | (v > w.hi)).any():
            raise ParamsError(f"'{path}': weight \"{w.name}\" = {doc['weights'][w.name]} is outside its "
                              f"constraint [{w.lo}, {w.hi}]")
        params[w.name] = jnp.asarray(_unconstrain(v, w.lo, w.hi))
    for key in mlp_shapes:
        params[key] = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), mlps[key])
    return params


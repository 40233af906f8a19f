"""The reference interpreter: a Pol program evaluated with plain NumPy.

It walks the typed tree (`typed.py`) node by node with the meaning common to
every back end, written as directly as possible, so the JAX lowering can be
tested against it on random inputs (and the analysis can look for
counterexamples with it). It never imports jax.

    values = evaluate(tp, weights, obs)              # {latent or action name: array}
    stds = evaluate_std(tp, weights, obs)            # {action name: std array}
    out = run(tp, weights, obs, batch=256)           # everything, for 256 inputs at once

Inputs:
    weights     {weight name: array of the weight's shape}, CONSTRAINED values;
                a weight left out takes its declared initial value.
    obs         {obs name: array of the observation's shape}.
    mlp_params  {mlp key (`Mlp.key`, e.g. "out.mlp"): flax variables}; each is
                {"params": {"Dense_0": {"kernel": (in, h0), "bias": (h0,)}, ...}}
                (the inner {"Dense_i": ...} dict alone is accepted too). When
                None, an mlp key found in `weights` is used instead, so one
                flat params dict can hold both.
    overrides   {name: array}: replaces that value (a latent, or an obs,
                weight or action) wherever it is read, cutting the graph
                there, e.g. to study a target as a function of one latent.

Outputs: every latent by name (its value) and every action by name (its mean
clipped to the declared [lo, hi], broadcast to the action's shape). The
unclipped means and the noise stds come from `run` / `evaluate_std`, keyed by
action name. Everything is float64 (bool for bool latents).

With `batch=B` every input (and override) carries a leading axis of size B,
and so does every output; mlp parameters are shared across the batch.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from ..check import typed as T
from ..messages import ice
from .transforms import sigmoid

Array = np.ndarray


class Outputs(NamedTuple):
    values: dict[str, Array]  # latents and (clipped) actions, by name; states at the start of the step
    means: dict[str, Array]  # action name -> unclipped mean, broadcast to the action's shape
    stds: dict[str, Array]  # action name -> noise std, broadcast to the action's shape (stochastic actions only)
    next_state: dict[str, Array] = {}  # state name -> its value at the next step (the `next` clipped to its range)


_UNARY_FUNCS = {
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": lambda x: sigmoid(x, np),
    "relu": lambda x: np.maximum(x, 0.0),
    "softplus": lambda x: np.logaddexp(0.0, x),
    "sin": np.sin,
    "cos": np.cos,
    "square": np.square,
    "sign": np.sign,
}
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "and": np.logical_and, "or": np.logical_or,
}
_BINARY_FUNCS = {"atan2": np.arctan2, "min": np.minimum, "max": np.maximum}
_REDUCE = {
    "sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min,
    "norm": lambda x, axis: np.sqrt(np.sum(np.square(x), axis=axis)),
}
_ACTIVATIONS = {"tanh": np.tanh, "relu": lambda x: np.maximum(x, 0.0)}


def _dense_layers(variables: Mapping[str, Any], key: str) -> list[tuple[Array, Array]]:
    """The (kernel, bias) pairs of one mlp, in layer order."""
    layers = variables.get("params", variables)
    names = sorted((k for k in layers if k.startswith("Dense_")), key=lambda k: int(k.split("_")[1]))
    if not names:
        raise ValueError(f'mlp parameters for "{key}" have no Dense_0 layer')
    return [(np.asarray(layers[n]["kernel"], dtype=float), np.asarray(layers[n]["bias"], dtype=float))
            for n in names]


class _Interpreter:
    """Evaluates one program on a batch of B inputs; every value is (B,) + its type's shape."""

    def __init__(self, tp: T.TypedProgram, mlp_params: Mapping[str, Any], batch: int):
        self.tp = tp
        self.mlp_params = mlp_params
        self.B = batch
        self.env: dict[str, Array] = {}

    def full(self, x: Any, t: T.Type) -> Array:
        """`x` as an array of exactly (B,) + t.shape."""
        dtype = bool if t.base == T.BOOL else float
        return np.broadcast_to(np.asarray(x, dtype=dtype), (self.B,) + t.shape)

    def aligned(self, x: Array, t: T.Type, ndim: int) -> Array:
        """Insert axes after the batch axis so NumPy broadcasting matches the
        program's (which aligns shapes from the right, without the batch)."""
        return x.reshape((self.B,) + (1,) * (ndim - t.ndim) + t.shape)

    def expr(self, e: T.TExpr) -> Array:
        out = self.eval(e)
        if out.shape != (self.B,) + e.type.shape:
            raise ice(f"reference: {type(e).__name__} gave shape {out.shape}, type says {e.type}")
        return out

    def eval(self, e: T.TExpr) -> Array:
        nd = e.type.ndim
        if isinstance(e, T.Const):
            return self.full(e.value, e.type)
        if isinstance(e, T.Ref):
            return self.env[e.name]
        if isinstance(e, T.Unary):
            x = self.expr(e.x)
            return np.logical_not(x) if e.op == "not" else np.negative(x)
        if isinstance(e, T.Binary):
            l = self.aligned(self.expr(e.l), e.l.type, nd)
            r = self.aligned(self.expr(e.r), e.r.type, nd)
            return _BINARY[e.op](l, r)
        if isinstance(e, T.Select):
            c, a, b = (self.aligned(self.expr(x), x.type, nd) for x in (e.cond, e.a, e.b))
            return np.where(c, a, b)
        if isinstance(e, T.Apply):
            args = [self.aligned(self.expr(x), x.type, nd) for x in e.args]
            if e.fn in _UNARY_FUNCS:
                return _UNARY_FUNCS[e.fn](args[0])
            if e.fn in _BINARY_FUNCS:
                return _BINARY_FUNCS[e.fn](args[0], args[1])
            if e.fn == "clip":
                return np.minimum(np.maximum(args[0], args[1]), args[2])
            if e.fn == "isfinite":
                return np.isfinite(args[0])
            if e.fn == "nan_to_num":
                x, nan, posinf, neginf = args
                return np.where(np.isnan(x), nan, np.where(x == np.inf, posinf, np.where(x == -np.inf, neginf, x)))
            raise ice(f"reference: unknown function {e.fn}")
        if isinstance(e, T.Reduce):
            x = self.expr(e.x)
            axis = tuple(range(1, x.ndim)) if e.axis is None else e.axis + 1
            return _REDUCE[e.fn](x, axis=axis)
        if isinstance(e, T.Index):
            key = tuple(i if isinstance(i, int) else slice(i[0], i[1]) for i in e.items)
            return self.expr(e.x)[(slice(None),) + key]
        if isinstance(e, T.Stack):
            return np.stack([self.expr(i) for i in e.items], axis=1)
        if isinstance(e, T.Mlp):
            return self.mlp(e)
        raise ice(f"reference: no rule for {type(e).__name__}")

    def mlp(self, e: T.Mlp) -> Array:
        if e.key not in self.mlp_params:
            raise ValueError(f'no parameters given for the mlp "{e.key}"')
        layers = _dense_layers(self.mlp_params[e.key], e.key)
        if len(layers) != len(e.hidden) + 1:
            raise ValueError(f'mlp "{e.key}" has {len(e.hidden)} hidden layers but {len(layers)} Dense layers were given')
        h = np.concatenate([self.expr(x).reshape(self.B, -1) for x in e.inputs], axis=1)
        act = _ACTIVATIONS[e.activation]
        for kernel, bias in layers[:-1]:
            h = act(h @ kernel + bias)
        kernel, bias = layers[-1]
        h = h @ kernel + bias
        return h[:, 0] if e.out == 0 else h


def run(tp: T.TypedProgram, weights: Mapping[str, Any], obs: Mapping[str, Any],
        mlp_params: Optional[Mapping[str, Any]] = None, overrides: Optional[Mapping[str, Any]] = None,
        batch: Optional[int] = None, state: Optional[Mapping[str, Any]] = None, step: bool = False) -> Outputs:
    """Evaluate every latent and action (see the module docstring for the inputs).

    state: the value of every state at the start of the step (a missing one: its initial value);
    step: also compute the outputs' `next_state`, the values at the next step.

    batch=None: unbatched inputs and outputs; batch=B: a leading axis of size B on
    every input, override and output."""
    overrides = dict(overrides or {})
    if mlp_params is None:
        mlp_params = {k: v for k, v in weights.items() if "." in k}
    interp = _Interpreter(tp, mlp_params, 1 if batch is None else batch)
    B = interp.B

    def given(name: str, value: Any, t: T.Type) -> Array:
        x = np.asarray(value, dtype=bool if t.base == T.BOOL else float)
        want = t.shape if batch is None else (B,) + t.shape
        if x.shape != want:
            raise ValueError(f'"{name}" should have shape {want}, got {x.shape}')
        return x.reshape((B,) + t.shape)

    with np.errstate(all="ignore"):
        for o in tp.obs:
            if o.name in overrides:
                interp.env[o.name] = given(o.name, overrides[o.name], o.type)
            elif o.name in obs:
                interp.env[o.name] = given(o.name, obs[o.name], o.type)
            else:
                raise ValueError(f'no value given for the observation "{o.name}"')
        for w in tp.weights:
            src = overrides if w.name in overrides else weights
            if w.name in src:
                interp.env[w.name] = given(w.name, src[w.name], w.type)
            else:
                interp.env[w.name] = interp.full(w.init, w.type)
        for st in tp.states:
            if st.name in overrides:  # a monotonicity search varying a state
                interp.env[st.name] = given(st.name, overrides[st.name], st.type)
            elif state is not None and st.name in state:
                interp.env[st.name] = given(st.name, state[st.name], st.type)
            else:
                interp.env[st.name] = interp.full(st.init, st.type)
        means: dict[str, Array] = {}
        stds: dict[str, Array] = {}
        for node in tp.nodes:
            shape = (B,) + node.type.shape
            if isinstance(node, T.Action):
                mean = interp.aligned(interp.expr(node.expr), node.expr.type, node.type.ndim)
                means[node.name] = np.broadcast_to(mean, shape)
                value = np.minimum(np.maximum(means[node.name], node.lo), node.hi)
                if node.std is not None:
                    std = interp.aligned(interp.expr(node.std), node.std.type, node.type.ndim)
                    stds[node.name] = np.broadcast_to(std, shape)
            else:
                value = interp.expr(node.expr)
            if node.name in overrides:
                value = given(node.name, overrides[node.name], node.type)
            interp.env[node.name] = value
        nexts: dict[str, Array] = {}
        for st in tp.states if step else ():
            x = np.broadcast_to(interp.aligned(interp.expr(st.update), st.update.type, st.type.ndim),
                                (B,) + st.type.shape)
            nexts[st.name] = x if st.type.base == T.BOOL else np.minimum(np.maximum(x, st.lo), st.hi)

    def out(x: Array) -> Array:
        return np.array(x[0] if batch is None else x)

    values = {n.name: out(interp.env[n.name]) for n in (*tp.nodes, *tp.states)}  # states: at the step's start
    return Outputs(values, {k: out(v) for k, v in means.items()}, {k: out(v) for k, v in stds.items()},
                   {k: out(v) for k, v in nexts.items()})


def evaluate(tp: T.TypedProgram, weights: Mapping[str, Any], obs: Mapping[str, Any],
             mlp_params: Optional[Mapping[str, Any]] = None,
             overrides: Optional[Mapping[str, Any]] = None) -> dict[str, Array]:
    """Values of every latent and every action (the mean clipped to [lo, hi]), for one input."""
    return run(tp, weights, obs, mlp_params, overrides).values


def evaluate_std(tp: T.TypedProgram, weights: Mapping[str, Any], obs: Mapping[str, Any],
                 mlp_params: Optional[Mapping[str, Any]] = None,
                 overrides: Optional[Mapping[str, Any]] = None) -> dict[str, Array]:
    """The noise std of every stochastic action, broadcast to the action's shape."""
    return run(tp, weights, obs, mlp_params, overrides).stds


def mlp_param_shapes(m: T.Mlp) -> dict[str, dict[str, tuple[int, ...]]]:
    """{"Dense_i": {"kernel": (in, out), "bias": (out,)}} for every layer of `m`."""
    sizes = [m.in_size, *m.hidden, max(m.out, 1)]
    return {f"Dense_{i}": {"kernel": (sizes[i], sizes[i + 1]), "bias": (sizes[i + 1],)}
            for i in range(len(sizes) - 1)}


def all_mlps(tp: T.TypedProgram) -> list[T.Mlp]:
    """Every mlp node, those inside a noise std too (`tp.mlps` lists the means' only)."""
    found = {m.key: m for m in tp.mlps}
    for a in tp.actions:
        if a.std is not None:
            found.update({m.key: m for m in T.mlps_in(a.std)})
    return [found[k] for k in sorted(found)]


def zero_mlp_params(tp: T.TypedProgram) -> dict[str, dict]:
    """All-zero parameters for every mlp (each then outputs 0 everywhere)."""
    return {m.key: {"params": {name: {k: np.zeros(s) for k, s in layer.items()}
                               for name, layer in mlp_param_shapes(m).items()}}
            for m in all_mlps(tp)}


def random_mlp_params(tp: T.TypedProgram, rng: np.random.Generator, scale: float = 1.0) -> dict[str, dict]:
    """Gaussian parameters (kernel ~ N(0, scale^2 / fan_in)) for every mlp, for tests."""
    return {m.key: {"params": {name: {"kernel": rng.normal(0, scale / np.sqrt(layer["kernel"][0]), layer["kernel"]),
                                      "bias": rng.normal(0, 0.1 * scale, layer["bias"])}
                               for name, layer in mlp_param_shapes(m).items()}}
            for m in all_mlps(tp)}

"""Phase 4: typed program -> JAX (`lower(tp) -> CompiledPolicy`).

One typed node lowers to one jnp expression, evaluated once per trace; the
jitted program is what hand-written JAX of the same structure would be, and all
dict building happens at trace time. Every function is pure and unbatched
(obs of the declared shapes): vmap it for batches, grad it wrt params.

Params are one flat dict:
    params[weight name]  the weight's UNCONSTRAINED value, float32, declared shape
                         (see `transforms`; `constrain(params)` gives the values)
    params[mlp key]      the flax.linen params of that block ("<decl>.mlp", "<decl>.mlpK"),
                         {"Dense_0": {"kernel": (in, h0), "bias": (h0,)}, ..., "Dense_n": ...}
                         i.e. what `module.init(...)["params"]` returns.

Actions. The mean is the action's expression, broadcast to its declared shape
and clipped to its declared [lo, hi]; a latent that reads an action reads this
clipped mean. A stochastic action (`~ normal(std = ...)`) is Gaussian around
the clipped mean; `sample` clips the draw to the range again. `log_prob` is the
density of the *unclipped* Gaussian (no point mass on the bounds): demonstrated
actions lie inside the range, and the smooth density keeps the imitation
gradient informative where a clipped (censored) likelihood would be flat.

Priors. `log_prior(params)` is the sum over weights that declare a prior
(`~ normal(0.3, 0.1)`) of its log density at the CONSTRAINED value, each element
of an array weight counted once (`priors.log_density`). It has no Jacobian term
of the constraint transform: maximising likelihood + log_prior in the
unconstrained space finds the mode of the posterior of the constrained weights,
as Stan's optimizer does by default (docs/language.md, "Priors"). Weights
without a prior contribute 0.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from ..check import priors, typed as T
from ..analysis import transforms
from ..messages import ice
from ..check.typed import TypedProgram

Params = dict[str, Any]
Arrays = dict[str, jax.Array]

# What each typed op lowers to, spelled as source text so `emit` prints exactly
# the function the in-process lowering calls.
BINARY_OPS = {
    "add": "jnp.add", "sub": "jnp.subtract", "mul": "jnp.multiply", "div": "jnp.divide", "pow": "jnp.power",
    "eq": "jnp.equal", "ne": "jnp.not_equal", "lt": "jnp.less", "le": "jnp.less_equal",
    "gt": "jnp.greater", "ge": "jnp.greater_equal", "and": "jnp.logical_and", "or": "jnp.logical_or",
}
UNARY_OPS = {"neg": "jnp.negative", "not": "jnp.logical_not"}
FUNCTIONS = {
    "abs": "jnp.abs", "exp": "jnp.exp", "log": "jnp.log", "sqrt": "jnp.sqrt", "tanh": "jnp.tanh",
    "sigmoid": "jax.nn.sigmoid", "relu": "jax.nn.relu", "softplus": "jax.nn.softplus", "sin": "jnp.sin",
    "cos": "jnp.cos", "square": "jnp.square", "sign": "jnp.sign",
    "atan2": "jnp.arctan2", "min": "jnp.minimum", "max": "jnp.maximum", "clip": "jnp.clip",
    "isfinite": "jnp.isfinite",
}
REDUCTIONS = {"sum": "jnp.sum", "mean": "jnp.mean", "max": "jnp.max", "min": "jnp.min", "norm": "jnp.linalg.norm"}
ACTIVATIONS = {"tanh": "jnp.tanh", "relu": "jax.nn.relu"}


def resolve(source: str) -> Callable:
    """"jax.nn.sigmoid" -> the function itself."""
    head, *rest = source.split(".")
    obj: Any = {"jnp": jnp, "jax": jax}[head]
    for part in rest:
        obj = getattr(obj, part)
    return obj


_BINARY = {k: resolve(v) for k, v in BINARY_OPS.items()}
_UNARY = {k: resolve(v) for k, v in UNARY_OPS.items()}
_FUNCS = {k: resolve(v) for k, v in FUNCTIONS.items()}
_REDUCE = {k: resolve(v) for k, v in REDUCTIONS.items()}


def dtype_of(t: T.Type):
    return jnp.bool_ if t.base == T.BOOL else jnp.float32


def int_exponent(e: T.TExpr) -> Union[int, None]:
    """`x ^ 2` lowers to `integer_pow` (as `x ** 2` in hand-written JAX does)."""
    if isinstance(e, T.Const) and not e.type.shape and not isinstance(e.value, bool):
        v = float(e.value)
        if v.is_integer() and abs(v) <= 64:
            return int(v)
    return None


def needs_broadcast(ndim: int, shape: tuple[int, ...]) -> bool:
    """Rank promotion is an error under `jax_numpy_rank_promotion="raise"`:
    a non-scalar operand of lower rank is broadcast to the result explicitly."""
    return 0 < ndim < len(shape)


def _fit(x, shape: tuple[int, ...]):
    return jnp.broadcast_to(x, shape) if needs_broadcast(jnp.ndim(x), shape) else x


def mlp_block(m: T.Mlp):
    """The flax module of an `mlp(...)` node (`mlp_block.MlpBlock`, imported here only
    when a program has one: flax costs about 90 ms to import)."""
    from ._mlp_block import MlpBlock

    return MlpBlock(tuple(m.hidden), m.out, resolve(ACTIVATIONS[m.activation]))


def all_mlps(tp: TypedProgram) -> dict[str, T.Mlp]:
    """Every mlp node by key, sorted by key (also those inside a noise std)."""
    found = {m.key: m for m in tp.mlps}
    for a in tp.actions:
        if a.std is not None:
            found.update({m.key: m for m in T.mlps_in(a.std)})
    return dict(sorted(found.items()))


# Functions singular at a point their guard can exclude: the argument that is made
# safe inside a guarded branch, and the value put there (see `_Lowering.safe`).
PARTIAL = {"log": 1.0, "sqrt": 1.0}


def guard_applies(cond_shape: tuple[int, ...], arg_shape: tuple[int, ...]) -> bool:
    """Whether a branch's condition of `cond_shape` may stand in front of an argument of
    `arg_shape` position by position: a scalar condition drops the whole branch; an
    array condition only when the argument has its very shape (and, by the caller,
    only along elementwise operations: a reduction, index, stack or mlp in between
    mixes positions)."""
    return cond_shape == () or cond_shape == arg_shape


class _Lowering:
    """Lowers expressions of one program against an environment of values.

    Guarded branches. `if c then log(x) else 0` lowers to `where(c, log(x), 0)`, whose
    value is right but whose gradient is NaN where c is false and x is 0: `where`
    multiplies the discarded branch's derivative by 0, and 0 * inf is NaN (JAX FAQ,
    "gradients contain NaN where using where"). So inside a branch the argument of a
    function singular at a point (log, sqrt, a divisor, the base of a non-integer power)
    is itself `where(c, x, 1)`: the kept positions are unchanged, the discarded ones are
    finite. `self.guards` holds the conditions of the enclosing branches that still
    line up with the positions of the expression being lowered."""

    def __init__(self, tp: TypedProgram):
        self.nodes = all_mlps(tp)
        self.mlps = {k: mlp_block(m) for k, m in self.nodes.items()}
        self.guards: list[tuple[tuple[int, ...], Any]] = []  # (shape of the condition, its value)

    def safe(self, x, safe_value: float = 1.0):
        """`x` where every applicable enclosing condition holds, `safe_value` elsewhere."""
        held = [g for shape, g in self.guards if guard_applies(shape, jnp.shape(x))]
        if not held:
            return x
        cond = held[0]
        for g in held[1:]:
            cond = jnp.logical_and(cond, g)
        return jnp.where(cond, x, safe_value)

    def branch(self, e: T.TExpr, cond_shape: tuple[int, ...], cond, env, params):
        self.guards.append((cond_shape, cond))
        try:
            return self.expr(e, env, params)
        finally:
            self.guards.pop()

    def mixed(self, e: T.TExpr, env, params):
        """Lower `e` under an operation that mixes positions: only scalar conditions still apply."""
        saved = self.guards
        self.guards = [(shape, g) for shape, g in saved if shape == ()]
        try:
            return self.expr(e, env, params)
        finally:
            self.guards = saved

    def expr(self, e: T.TExpr, env: dict, params: Params):
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise ice(f"no lowering for {type(e).__name__}")
        return method(e, env, params)

    def expr_Const(self, e: T.Const, env, params):
        if not e.type.shape:
            return bool(e.value) if e.type.base == T.BOOL else float(e.value)
        return np.asarray(e.value, dtype=np.bool_ if e.type.base == T.BOOL else np.float32)

    def expr_Ref(self, e: T.Ref, env, params):
        return env[e.name]

    def expr_Unary(self, e: T.Unary, env, params):
        return _UNARY[e.op](self.expr(e.x, env, params))

    def expr_Binary(self, e: T.Binary, env, params):
        left = _fit(self.expr(e.l, env, params), e.type.shape)
        n = int_exponent(e.r) if e.op == "pow" else None
        if n is not None:
            return jnp.power(left, n)
        right = _fit(self.expr(e.r, env, params), e.type.shape)
        if e.op == "div":
            right = self.safe(right)
        elif e.op == "pow":
            left = self.safe(left)
        return _BINARY[e.op](left, right)

    def expr_Select(self, e: T.Select, env, params):
        c = self.expr(e.cond, env, params)
        shape = e.cond.type.shape
        a = self.branch(e.a, shape, c, env, params)
        b = self.branch(e.b, shape, jnp.logical_not(c), env, params)
        return jnp.where(*(_fit(x, e.type.shape) for x in (c, a, b)))

    def expr_Apply(self, e: T.Apply, env, params):
        args = [_fit(self.expr(x, env, params), e.type.shape) for x in e.args]
        if e.fn in PARTIAL:
            args[0] = self.safe(args[0], PARTIAL[e.fn])
        if e.fn == "nan_to_num":
            x, nan, posinf, neginf = args
            return jnp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)
        return _FUNCS[e.fn](*args)

    def expr_Reduce(self, e: T.Reduce, env, params):
        return _REDUCE[e.fn](self.mixed(e.x, env, params), axis=e.axis)

    def expr_Index(self, e: T.Index, env, params):
        x = self.mixed(e.x, env, params)
        return x[tuple(i if isinstance(i, int) else slice(*i) for i in e.items)]

    def expr_Stack(self, e: T.Stack, env, params):
        return jnp.stack([self.mixed(x, env, params) for x in e.items])

    def expr_Mlp(self, e: T.Mlp, env, params):
        x = jnp.concatenate([jnp.ravel(jnp.asarray(self.mixed(i, env, params), jnp.float32)) for i in e.inputs])
        return self.mlps[e.key].apply({"params": params[e.key]}, x)


def _value(x, t: T.Type):
    """A node's value with exactly its declared dtype and shape."""
    x = jnp.asarray(x, dtype_of(t))
    return x if x.shape == t.shape else jnp.broadcast_to(x, t.shape)


def _clip(x, lo: float, hi: float):
    if lo == -math.inf and hi == math.inf:
        return x
    return jnp.clip(x, None if lo == -math.inf else lo, None if hi == math.inf else hi)


class TransformGroup(NamedTuple):
    """Weights constrained by one transform of one kind (`transforms.kind`), applied
    once to all of them: their unconstrained params ravelled into one vector, the
    bounds per element, the values sliced back. XLA then compiles one kernel per
    kind instead of one per weight (16 weights in 3 groups on the Car Racing
    example): 0.76 of the CPU time per call at batch 20 and 64, the same at batch 1
    (docs/performance.md, "Grouped weight transforms"). The values are the
    per-weight transforms' (`emit` still prints one line per weight) to within one
    float32 rounding: a bound of 0 or a width of 1 that the per-weight form leaves
    out is an exact `0 +` or `1 *` here, but XLA's vectorised exp may differ from
    its scalar one in the last bit (tests/compiler/backend/test_lower_groups.py)."""

    kind: str
    weights: tuple  # the typed weights, in declaration order
    offset: Any     # (n,) float32 per ravelled element: its lower bound ("interval", "lower"), upper ("upper")
    width: Any      # (n,) float32 hi - lo ("interval"; else None), rounded once from float64 as the
                    # per-weight `(hi - lo) * x` rounds it

    def constrain(self, params: Params) -> Arrays:
        if len(self.weights) == 1 or self.kind == "none":
            return {w.name: transforms.constrain(params[w.name], w.lo, w.hi, jnp) for w in self.weights}
        u = jnp.concatenate([jnp.ravel(params[w.name]) for w in self.weights])
        if self.kind == "interval":
            x = self.offset + self.width * jax.nn.sigmoid(u)
        elif self.kind == "lower":
            x = self.offset + jnp.exp(u)
        else:
            x = self.offset - jnp.exp(u)
        out, at = {}, 0
        for w in self.weights:
            size = math.prod(w.type.shape)
            out[w.name] = x[at:at + size].reshape(w.type.shape)
            at += size
        return out


def transform_groups(weights) -> list[TransformGroup]:
    """The weights grouped by the kind of their constraint transform (first appearance order)."""
    by_kind: dict[str, list] = {}
    for w in weights:
        by_kind.setdefault(transforms.kind(w.lo, w.hi), []).append(w)
    groups = []
    for k, ws in by_kind.items():
        def ends(end: Callable[[Any], float]):
            return np.concatenate([np.full(math.prod(w.type.shape), end(w), np.float32) for w in ws])
        offset = ends(lambda w: w.hi) if k == "upper" else ends(lambda w: w.lo) if k != "none" else None
        width = ends(lambda w: w.hi - w.lo) if k == "interval" else None
        groups.append(TransformGroup(k, tuple(ws), offset, width))
    return groups


class CompiledPolicy(NamedTuple):
    """A lowered policy: pure functions plus the schema. Shapes are unbatched;
    `jax.vmap(policy.apply, in_axes=(None, 0))` runs a batch."""

    init: Callable[[jax.Array], Params]                       # key -> params
    apply: Callable[[Params, Arrays], tuple[Arrays, Arrays]]  # -> (actions, latents)
    distribution: Callable[[Params, Arrays], tuple[Arrays, Arrays, Arrays]]  # -> (mean, std, latents)
    sample: Callable[[Params, Arrays, jax.Array], tuple[Arrays, Arrays]]     # -> (actions, latents)
    log_prob: Callable[[Params, Arrays, Arrays], jax.Array]   # -> scalar
    log_prior: Callable[[Params], jax.Array]                  # -> scalar: the declared priors' log density
    constrain: Callable[[Params], Arrays]                     # params -> weight values
    unconstrain: Callable[[dict], Params]                     # weight values (+ mlp params) -> params
    program: TypedProgram
    # Memory (docs/language.md, "Memory"): the state at the start of an episode ({} without states),
    # and the step functions that carry it; they serve memoryless programs too (state {}).
    state0: dict = {}                                          # state name -> initial value (its dtype, shape)
    step_distribution: Callable = None  # (params, obs, state) -> (mean, std, latents, next_state)
    step_sample: Callable = None        # (params, obs, state, key) -> (actions, latents, next_state)
    step_log_prob: Callable = None      # (params, obs, actions, state) -> (logp, next_state)

    # One lowering is one policy: caches keyed on it (runtime/rl/collect.py) hash it by identity, as
    # they did before `state0` (a dict, unhashable) joined the fields; equality follows the hash.
    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


def lower(tp: TypedProgram, grouped: bool = True) -> CompiledPolicy:
    """Lower a checked program to a `CompiledPolicy` (see the module docstring).
    `grouped=False` constrains each weight by its own transform, as `emit` prints
    them (`TransformGroup`; benchmarks/bench_lowering.py times both)."""
    low = _Lowering(tp)
    weights = {w.name: w for w in tp.weights}
    stochastic = tuple(a for a in tp.actions if a.std is not None)

    groups = transform_groups(tp.weights) if grouped else [transform_groups([w])[0] for w in tp.weights]

    def constrain(params: Params) -> Arrays:
        out: Arrays = {}
        for group in groups:
            out.update(group.constrain(params))
        return {w.name: out[w.name] for w in tp.weights}

    def unconstrain(values: dict) -> Params:
        out: Params = {}
        for name, v in values.items():
            if name in low.mlps:
                out[name] = v
            elif name in weights:
                w = weights[name]
                out[name] = transforms.unconstrain(jnp.asarray(v, jnp.float32), w.lo, w.hi, jnp)
            else:
                raise KeyError(f'"{name}" is neither a weight nor an mlp of policy "{tp.name}"')
        return out

    def init(key: jax.Array) -> Params:
        params: Params = {}
        for w in tp.weights:
            u = transforms.unconstrain(np.asarray(w.init, np.float64), w.lo, w.hi, np)
            params[w.name] = jnp.asarray(np.broadcast_to(u, w.type.shape), jnp.float32)
        if low.mlps:
            keys = jax.random.split(key, len(low.mlps))
            for k, (name, block) in zip(keys, low.mlps.items()):
                params[name] = block.init(k, jnp.zeros((low.nodes[name].in_size,), jnp.float32))["params"]
        return params

    def step_forward(params: Params, obs: Arrays, state: Arrays) -> tuple[Arrays, Arrays, Arrays, Arrays]:
        """One step: (mean, std, latents, next_state); `state` holds every state's value at its start."""
        env: dict[str, Any] = {}
        for o in tp.obs:
            x = jnp.asarray(obs[o.name], jnp.float32)
            if x.shape != o.type.shape:
                raise ValueError(f'obs "{o.name}" has shape {x.shape} but is declared {o.type}; '
                                 f"apply is unbatched: use jax.vmap for a batch")
            env[o.name] = x
        env.update(constrain(params))
        for st in tp.states:
            if st.name not in state:
                raise ValueError(f'the state has no value for "{st.name}" (start from policy.state0)')
            x = jnp.asarray(state[st.name], dtype_of(st.type))
            if x.shape != st.type.shape:
                raise ValueError(f'state "{st.name}" has shape {x.shape} but is declared {st.type}; '
                                 f"the step is unbatched: use jax.vmap for a batch")
            env[st.name] = x
        mean: Arrays = {}
        std: Arrays = {}
        for node in tp.nodes:
            value = _value(low.expr(node.expr, env, params), node.type)
            if isinstance(node, T.Action):
                value = mean[node.name] = _clip(value, node.lo, node.hi)
                if node.std is not None:
                    std[node.name] = _value(low.expr(node.std, env, params), node.type)
            env[node.name] = value
        latents = {lat.name: env[lat.name] for lat in tp.latents}
        next_state: Arrays = {}
        for st in tp.states:  # traced under its name: its value at the start of the step
            latents[st.name] = env[st.name]
            value = _value(low.expr(st.update, env, params), st.type)
            next_state[st.name] = value if st.type.base == T.BOOL else _clip(value, st.lo, st.hi)
        return mean, std, latents, next_state

    def forward(params: Params, obs: Arrays) -> tuple[Arrays, Arrays, Arrays]:
        mean, std, latents, _ = step_forward(params, obs, {})
        return mean, std, latents

    def apply(params: Params, obs: Arrays) -> tuple[Arrays, Arrays]:
        mean, _, latents = forward(params, obs)
        return mean, latents

    def sample(params: Params, obs: Arrays, key: jax.Array) -> tuple[Arrays, Arrays]:
        actions, latents, _ = step_sample(params, obs, {}, key)
        return actions, latents

    def step_sample(params: Params, obs: Arrays, state: Arrays, key: jax.Array) -> tuple[Arrays, Arrays, Arrays]:
        mean, std, latents, next_state = step_forward(params, obs, state)
        actions = dict(mean)
        keys = jax.random.split(key, len(stochastic)) if stochastic else ()
        for k, a in zip(keys, stochastic):
            noise = jax.random.normal(k, a.type.shape, jnp.float32)
            actions[a.name] = _clip(mean[a.name] + std[a.name] * noise, a.lo, a.hi)
        return actions, latents, next_state

    def log_prob(params: Params, obs: Arrays, actions: Arrays) -> jax.Array:
        return step_log_prob(params, obs, actions, {})[0]

    def step_log_prob(params: Params, obs: Arrays, actions: Arrays, state: Arrays) -> tuple[jax.Array, Arrays]:
        mean, std, _, next_state = step_forward(params, obs, state)
        total = jnp.zeros((), jnp.float32)
        for a in stochastic:
            z = (jnp.asarray(actions[a.name], jnp.float32) - mean[a.name]) / std[a.name]
            total = total + jnp.sum(-0.5 * jnp.square(z) - jnp.log(std[a.name]) - 0.5 * math.log(2 * math.pi))
        return total, next_state

    def log_prior(params: Params) -> jax.Array:
        values = constrain(params)
        total = jnp.zeros((), jnp.float32)
        for w in tp.weights:
            if w.prior is not None:
                total = total + jnp.sum(priors.log_density(w.prior.family, w.prior.args, values[w.name], jnp))
        return total

    state0 = {st.name: jnp.asarray(np.broadcast_to(np.asarray(st.init, np.bool_ if st.type.base == T.BOOL
                                                              else np.float32), st.type.shape))
              for st in tp.states}
    if tp.states:  # the memoryless entry points would have to make up a state: they refuse
        entries = [_needs_state(tp, f, s) for f, s in (
            ("apply", "step_distribution"), ("distribution", "step_distribution"), ("sample", "step_sample"),
            ("log_prob", "step_log_prob"))]
    else:
        entries = [jax.jit(f) for f in (apply, forward, sample, log_prob)]
    return CompiledPolicy(
        init=init,
        apply=entries[0],
        distribution=entries[1],
        sample=entries[2],
        log_prob=entries[3],
        log_prior=jax.jit(log_prior),
        constrain=constrain,
        unconstrain=unconstrain,
        program=tp,
        state0=state0,
        step_distribution=jax.jit(step_forward),
        step_sample=jax.jit(step_sample),
        step_log_prob=jax.jit(step_log_prob),
    )


def _needs_state(tp: TypedProgram, name: str, instead: str) -> Callable:
    """What a stateful program's `apply`, `distribution`, `sample` and `log_prob` are: a function that
    says to use the step function, which carries the state (never a silent initial state)."""
    names = ", ".join(f'"{st.name}"' for st in tp.states)

    def refuse(*args, **kwargs):
        raise ValueError(f'policy "{tp.name}" has memory (state {names}), so `{name}` cannot run it: call '
                         f"`{instead}` with a state, starting from `policy.state0`, and carry the state it returns")

    refuse.__name__ = name
    return refuse


__all__ = ["Arrays", "CompiledPolicy", "Params", "TransformGroup", "lower", "transform_groups"]

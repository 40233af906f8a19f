"""Back ends that write a checked program out as text.

    emit_python(tp) -> str   a standalone, readable JAX module (imports jax only)
    emit_hlo(tp)    -> str   StableHLO of `apply` for one unbatched obs
    emit_json(tp, intervals=None) -> str   the checked graph, for tools

The Python module computes what `lower(tp).apply` computes, op for op: both
print/call the functions in `lower`'s tables. Its `constrain` is written one
line per weight, as `lower(tp, grouped=False)` computes it; `lower` groups the
weights by transform, which can differ in the last bit (`lower.TransformGroup`). This module imports jax only
inside `emit_python`/`emit_hlo` (through `lower`), so `emit_json` stays cheap.
"""

from __future__ import annotations

import functools
import hashlib
import json
import keyword
import math
from typing import Any, Mapping, Optional

from ..check import priors, typed as T
from ..analysis import transforms
from ..messages import ice, source_lines
from ..check.typed import TypedProgram
from ..util.text import constraint

# Names the generated module uses itself; a Pol name equal to one gets a trailing "_".
_RESERVED = {"jax", "jnp", "params", "obs", "weights", "std", "key", "keys", "apply", "distribution",
             "init_params", "constrain", "unconstrain", "log_prior", "SOURCE_SHA256", "_mlp", "_mlp_init"}

_HELPERS = '''
def _mlp(p, inputs, activation, scalar):
    """Dense layers p["Dense_0"], ..., activation after all but the last (flax.linen.Dense layout)."""
    x = jnp.concatenate([jnp.ravel(jnp.asarray(i, jnp.float32)) for i in inputs])
    n = len(p)
    for i in range(n):
        x = x @ p[f"Dense_{i}"]["kernel"] + p[f"Dense_{i}"]["bias"]
        if i < n - 1:
            x = activation(x)
    return x[0] if scalar else x


def _mlp_init(key, sizes):
    """flax.linen.Dense's defaults: lecun_normal kernels, zero biases (same distribution, not the same draw)."""
    keys = jax.random.split(key, len(sizes) - 1)
    init = jax.nn.initializers.lecun_normal()
    return {f"Dense_{i}": {"kernel": init(keys[i], (n_in, n_out), jnp.float32),
                           "bias": jnp.zeros((n_out,), jnp.float32)}
            for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]))}
'''


def sha256(tp: TypedProgram) -> str:
    return hashlib.sha256(tp.source.encode("utf-8")).hexdigest()


def _lit(v: float) -> str:
    """A Python literal for a float, as read back exactly."""
    v = float(v)
    if math.isnan(v):
        return "jnp.nan"
    if math.isinf(v):
        return "jnp.inf" if v > 0 else "-jnp.inf"
    return repr(v)


def _f32(a) -> str:
    """A float32 array as a (nested) literal of the shortest decimals that read back exactly."""
    import numpy as np

    if a.ndim == 0:
        x = np.float32(a)
        return "jnp.inf" if x == np.inf else "-jnp.inf" if x == -np.inf else str(x)
    return "[" + ", ".join(_f32(x) for x in a) + "]"


def _nested(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_nested(x) for x in v) + "]"
    return repr(bool(v)) if isinstance(v, bool) else _lit(v)


_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "eq": "==", "ne": "!=",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# Python's binding strength of each infix op (unary minus sits between * and **).
_PREC = {"pow": 5, "mul": 4, "div": 4, "add": 3, "sub": 3,
         "eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1}
_NEG = 4.5


def _precedence(e: T.TExpr) -> float:
    if isinstance(e, T.Binary) and e.op in _INFIX:
        return _PREC[e.op]
    if isinstance(e, T.Unary) and e.op == "neg":
        return _NEG
    if isinstance(e, T.Const) and not e.type.shape and not isinstance(e.value, bool) and e.value < 0:
        return _NEG  # printed as "-1.0"
    return 99  # an atom or a call


class _Printer:
    """Prints typed expressions as jnp source, mirroring `lower._Lowering`."""

    def __init__(self, tp: TypedProgram):
        from . import lower

        self.lower = lower
        self.guards: list[tuple[tuple[int, ...], str]] = []  # (shape of an enclosing branch's condition, its text)
        names = [d.name for g in (tp.obs, tp.weights, tp.latents, tp.actions, tp.states) for d in g]
        taken = set(names) | _RESERVED
        self.py: dict[str, str] = {}
        for n in names:
            p = n
            while keyword.iskeyword(p) or p in _RESERVED or (p != n and p in taken):
                p += "_"
            taken.add(p)
            self.py[n] = p

    # The guarded-branch rule of `lower._Lowering` (see its docstring), on source text.
    def safe(self, text: str, shape: tuple[int, ...], value: float = 1.0) -> Optional[str]:
        """`where(conditions, text, value)`, or None when no enclosing condition applies."""
        held = [g for gshape, g in self.guards if self.lower.guard_applies(gshape, shape)]
        if not held:
            return None
        cond = held[0]
        for g in held[1:]:
            cond = f"jnp.logical_and({cond}, {g})"
        return f"jnp.where({cond}, {text}, {_lit(value)})"

    def branch(self, e: T.TExpr, shape: tuple[int, ...], cond: str, fit_to: tuple[int, ...]) -> str:
        self.guards = self.guards + [(shape, cond)]
        try:
            return self.fit(e, fit_to)
        finally:
            self.guards = self.guards[:-1]

    def mixed(self, e: T.TExpr) -> str:
        saved = self.guards
        self.guards = [(shape, g) for shape, g in saved if shape == ()]
        try:
            return self.expr(e)
        finally:
            self.guards = saved

    def expr(self, e: T.TExpr) -> str:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise ice(f"no printer for {type(e).__name__}")
        return method(e)

    # A "Python scalar" is a literal-only expression: it must become a jax value before
    # an infix operator, or `1.0 / 0.0` would raise instead of giving inf.
    @staticmethod
    def pyscalar(e: T.TExpr) -> bool:
        return isinstance(e, T.Const) or (isinstance(e, T.Unary) and e.op == "neg" and isinstance(e.x, T.Const))

    def operand(self, e: T.TExpr, parent: float, side: str) -> str:
        """`e` printed as an operand of an operator of precedence `parent`, parenthesised
        where Python would read it differently (or chain a comparison)."""
        s = self.expr(e)
        p = _precedence(e)
        tight = parent in (_PREC["pow"], _PREC["eq"]) or side == "right"
        return f"({s})" if p < parent or (p == parent and tight) else s

    def fit(self, e: T.TExpr, shape: tuple[int, ...]) -> str:
        s = self.expr(e)
        return f"jnp.broadcast_to({s}, {shape})" if self.lower.needs_broadcast(e.type.ndim, shape) else s

    def expr_Const(self, e: T.Const) -> str:
        if not e.type.shape:
            return repr(bool(e.value)) if e.type.base == T.BOOL else _lit(e.value)
        dtype = "jnp.bool_" if e.type.base == T.BOOL else "jnp.float32"
        return f"jnp.asarray({_nested(e.value)}, {dtype})"

    def expr_Ref(self, e: T.Ref) -> str:
        return self.py[e.name]

    def expr_Unary(self, e: T.Unary) -> str:
        if e.op == "neg":
            x = self.expr(e.x)
            return f"-({x})" if _precedence(e.x) <= _NEG else f"-{x}"
        return f"{self.lower.UNARY_OPS[e.op]}({self.expr(e.x)})"

    def expr_Binary(self, e: T.Binary) -> str:
        shape = e.type.shape
        parent = _PREC.get(e.op, 0)

        def side(x: T.TExpr, which: str) -> str:
            if self.lower.needs_broadcast(x.type.ndim, shape):
                return self.fit(x, shape)
            return self.operand(x, parent, which) if e.op in _INFIX else self.expr(x)

        n = self.lower.int_exponent(e.r) if e.op == "pow" else None
        left, right = side(e.l, "left"), (str(n) if n is not None else side(e.r, "right"))
        fitted = lambda x: shape if self.lower.needs_broadcast(x.type.ndim, shape) else x.type.shape  # noqa: E731
        if e.op == "div":
            right = self.safe(self.fit(e.r, shape), fitted(e.r)) or right
        elif e.op == "pow" and n is None:
            left = self.safe(self.fit(e.l, shape), fitted(e.l)) or left
        if e.op not in _INFIX:
            return f"{self.lower.BINARY_OPS[e.op]}({left}, {right})"
        if self.pyscalar(e.l) and (self.pyscalar(e.r) or n is not None):
            left = f"{'jnp.bool_' if e.l.type.base == T.BOOL else 'jnp.float32'}({left})"
        return f"{left} {_INFIX[e.op]} {right}"

    def expr_Select(self, e: T.Select) -> str:
        cond, shape = self.expr(e.cond), e.cond.type.shape
        a = self.branch(e.a, shape, cond, e.type.shape)
        b = self.branch(e.b, shape, f"jnp.logical_not({cond})", e.type.shape)
        return f"jnp.where({self.fit(e.cond, e.type.shape)}, {a}, {b})"

    def expr_Apply(self, e: T.Apply) -> str:
        args = [self.fit(a, e.type.shape) for a in e.args]
        if e.fn in self.lower.PARTIAL:
            x = e.args[0]
            args[0] = self.safe(args[0], e.type.shape if self.lower.needs_broadcast(x.type.ndim, e.type.shape)
                                else x.type.shape, self.lower.PARTIAL[e.fn]) or args[0]
        if e.fn == "nan_to_num":
            return f"jnp.nan_to_num({args[0]}, nan={args[1]}, posinf={args[2]}, neginf={args[3]})"
        return f"{self.lower.FUNCTIONS[e.fn]}({', '.join(args)})"

    def expr_Reduce(self, e: T.Reduce) -> str:
        axis = "" if e.axis is None else f", axis={e.axis}"
        return f"{self.lower.REDUCTIONS[e.fn]}({self.mixed(e.x)}{axis})"

    def expr_Index(self, e: T.Index) -> str:
        items = ", ".join(str(i) if isinstance(i, int) else f"{i[0]}:{i[1]}" for i in e.items)
        base = self.mixed(e.x)
        if _precedence(e.x) < 99:
            base = f"({base})"
        return f"{base}[{items}]"

    def expr_Stack(self, e: T.Stack) -> str:
        return f"jnp.stack([{', '.join(self.mixed(i) for i in e.items)}])"

    def expr_Mlp(self, e: T.Mlp) -> str:
        inputs = ", ".join(self.mixed(i) for i in e.inputs)
        act = self.lower.ACTIVATIONS[e.activation]
        return f"_mlp(params[{e.key!r}], [{inputs}], {act}, scalar={e.out == 0})"

    def value(self, e: T.TExpr, t: T.Type) -> str:
        """`e` as a value of exactly type `t` (dtype and shape), like `lower._value`."""
        s = self.expr(e)
        if e.type.shape != t.shape:
            s = f"jnp.broadcast_to({s}, {t.shape})"
        elif self.pyscalar(e):
            s = f"jnp.asarray({s}, {'jnp.bool_' if t.base == T.BOOL else 'jnp.float32'})"
        return s


def _escape_char(c: str) -> str:
    return "\\" + c if c in '\\"' else f"\\x{ord(c):02x}" if (ord(c) < 0x20 and c not in "\n\t") or c == "\x7f" else c


def _in_docstring(text: str) -> str:
    """`text` made safe inside a triple-quoted docstring, its value unchanged: backslashes,
    every double quote (a doc ending in `"` would otherwise close the docstring early) and
    control characters other than newline and tab are escaped (a NUL cannot be in source)."""
    return "".join(map(_escape_char, text))


def _comment(doc: Optional[str]) -> str:
    """A doc string as a trailing comment: one line, control characters shown as escapes."""
    if not doc:
        return ""
    line = " ".join(doc.split())
    return "  # " + "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or c == "\x7f" else c for c in line)


def _clip_source(s: str, lo: float, hi: float) -> str:
    if lo == -math.inf and hi == math.inf:
        return s
    lo_s = "None" if lo == -math.inf else _lit(lo)
    hi_s = "None" if hi == math.inf else _lit(hi)
    return f"jnp.clip({s}, {lo_s}, {hi_s})"


def _constrain_source(u: str, lo: float, hi: float) -> str:
    """`transforms.constrain` as source text, with the bounds filled in."""
    k = transforms.kind(lo, hi)
    if k == "interval":
        x = f"jax.nn.sigmoid({u})"
        x = x if hi - lo == 1 else f"{_lit(hi - lo)} * {x}"
        return x if lo == 0 else f"{_lit(lo)} + {x}"
    if k == "lower":
        return f"jnp.exp({u})" if lo == 0 else f"{_lit(lo)} + jnp.exp({u})"
    if k == "upper":
        return f"-jnp.exp({u})" if hi == 0 else f"{_lit(hi)} - jnp.exp({u})"
    return u


def _unconstrain_source(x: str, lo: float, hi: float) -> str:
    """`transforms.unconstrain` as source text, with the bounds filled in."""
    k = transforms.kind(lo, hi)
    if k == "interval":
        return f"jnp.log({x} - {_lit(lo)}) - jnp.log({_lit(hi)} - {x})"
    if k == "lower":
        return f"jnp.log({x} - {_lit(lo)})"
    if k == "upper":
        return f"jnp.log({_lit(hi)} - {x})"
    return x


def _weights_lines(tp: TypedProgram) -> list[str]:
    lines = ["def constrain(params):",
             '    """params -> {weight name: value}: Stan\'s transforms from the unconstrained space."""',
             "    return {"]
    for w in tp.weights:
        lines.append(f"        {w.name!r}: {_constrain_source(f'params[{w.name!r}]', w.lo, w.hi)},"
                     f"  # {constraint(w.lo, w.hi)}")
    lines += ["    }", "", "",
              "def unconstrain(values):",
              '    """{weight name: value} -> params; entries that are not weights (mlp params) pass through."""',
              "    inverse = {"]
    for w in tp.weights:
        lines.append(f"        {w.name!r}: lambda x: {_unconstrain_source('x', w.lo, w.hi)},")
    lines += ["    }",
              "    return {name: inverse[name](jnp.asarray(v, jnp.float32)) if name in inverse else v",
              "            for name, v in values.items()}"]
    return lines


def _prior_lines(tp: TypedProgram) -> list[str]:
    """`log_prior(params)`, as `lower`'s: the declared priors' log density at the constrained
    values (no Jacobian term), summed over every element."""
    lines = ["def log_prior(params):",
             '    """The sum of the weights\' declared log prior densities at constrain(params)."""',
             "    weights = constrain(params)",
             "    total = jnp.zeros((), jnp.float32)"]
    for w in tp.weights:
        if w.prior is not None:
            x = f"weights[{w.name!r}]"
            lines.append(f"    total = total + jnp.sum({priors.density_source(w.prior.family, w.prior.args, x)})"
                         f"  # ~ {w.prior}")
    lines.append("    return total")
    return lines


def _init_lines(tp: TypedProgram) -> list[str]:
    import numpy as np

    lines = ["def init_params(key=None):",
             '    """Initial params: weights from their declared inits (unconstrained), mlps drawn from `key`',
             "    (default PRNGKey(0)) with flax.linen.Dense's initialisers, in the layout flax produces.\"\"\"",
             "    params = {"]
    for w in tp.weights:
        u = transforms.unconstrain(np.asarray(w.init, np.float64), w.lo, w.hi, np).astype(np.float32)
        value = _f32(np.broadcast_to(u, w.type.shape))
        lines.append(f"        {w.name!r}: jnp.asarray({value}, jnp.float32),  # = {_nested(w.init)}")
    lines.append("    }")
    mlps = {m.key: m for m in _mlps(tp)}
    if mlps:
        lines += ["    key = jax.random.PRNGKey(0) if key is None else key",
                  f"    keys = jax.random.split(key, {len(mlps)})"]
        for i, (k, m) in enumerate(mlps.items()):
            lines.append(f"    params[{k!r}] = _mlp_init(keys[{i}], {[m.in_size, *m.hidden, m.out or 1]})")
    lines.append("    return params")
    return lines


def _forward_lines(tp: TypedProgram, pr: _Printer) -> list[str]:
    """`distribution(params, obs)`: one line per obs, weight, latent and action; with states,
    `step_distribution(params, obs, state)`, which also reads the states and returns the next ones."""
    if tp.states:
        lines = ["def step_distribution(params, obs, state):",
                 '    """One unbatched step: (obs, state) -> (mean, std, latents, next_state). state holds every',
                 "    state's value at the start of the step (init_state() at an episode's start); latents",
                 "    include them under their names; next_state is each `next` expression, clipped to the",
                 '    state\'s range."""',
                 "    weights = constrain(params)"]
    else:
        lines = ["def distribution(params, obs):",
                 '    """One unbatched step: obs (dict of declared shapes) -> (mean, std, latents).',
                 "    mean: every action's mean, clipped to its declared range; std: the Gaussian noise",
                 '    std of each stochastic action, broadcast to its shape."""',
                 "    weights = constrain(params)"]
    for o in tp.obs:
        lines.append(f"    {pr.py[o.name]} = jnp.asarray(obs[{o.name!r}], jnp.float32){_comment(o.doc)}")
    for w in tp.weights:
        lines.append(f"    {pr.py[w.name]} = weights[{w.name!r}]{_comment(w.doc)}")
    for st in tp.states:
        dtype = "jnp.bool_" if st.type.base == T.BOOL else "jnp.float32"
        lines.append(f"    {pr.py[st.name]} = jnp.asarray(state[{st.name!r}], {dtype}){_comment(st.doc)}")
    for node in tp.nodes:
        s = pr.value(node.expr, node.type)
        if isinstance(node, T.Action):
            s = _clip_source(s, node.lo, node.hi)
        lines.append(f"    {pr.py[node.name]} = {s}{_comment(node.doc)}")
    lines.append("    std = {")
    for a in tp.actions:
        if a.std is not None:
            lines.append(f"        {a.name!r}: {pr.value(a.std, a.type)},")
    lines.append("    }")
    actions = ", ".join(f"{a.name!r}: {pr.py[a.name]}" for a in tp.actions)
    latents = "".join(f"\n        {lat.name!r}: {pr.py[lat.name]}," for lat in tp.latents)
    if not tp.states:
        lines.append(f"    return {{{actions}}}, std, {{{latents}\n    }}")
        return lines
    latents += "".join(f"\n        {st.name!r}: {pr.py[st.name]}," for st in tp.states)
    lines.append("    next_state = {")
    for st in tp.states:
        value = pr.value(st.update, st.type)
        if st.type.base == T.REAL:
            value = _clip_source(value, st.lo, st.hi)
        lines.append(f"        {st.name!r}: {value},")
    lines.append("    }")
    lines.append(f"    return {{{actions}}}, std, {{{latents}\n    }}, next_state")
    return lines


def _state_lines(tp: TypedProgram) -> list[str]:
    lines = ["def init_state():",
             '    """Every state\'s value at the start of an episode."""',
             "    return {"]
    for st in tp.states:
        dtype = "jnp.bool_" if st.type.base == T.BOOL else "jnp.float32"
        lines.append(f"        {st.name!r}: jnp.broadcast_to(jnp.asarray({_nested(st.init)}, {dtype}), "
                     f"{tuple(st.type.shape)!r}),")
    lines += ["    }"]
    return lines


_STEP = '''@jax.jit
def step(params, obs, state):
    """One unbatched step: (obs, state) -> (actions, latents, next_state); actions are the clipped means."""
    mean, _, latents, next_state = step_distribution(params, obs, state)
    return mean, latents, next_state'''


_APPLY = '''@jax.jit
def apply(params, obs):
    """One unbatched step: obs -> (actions, latents); actions are the clipped means."""
    mean, _, latents = distribution(params, obs)
    return mean, latents'''


def emit_python(tp: TypedProgram) -> str:
    """A standalone JAX module computing what `lower(tp).apply` computes (see its docstring)."""
    pr = _Printer(tp)
    doc = _in_docstring(f"{tp.name}: {' '.join(tp.doc.split())}" if tp.doc else tp.name)
    head = "\n".join([
        f'"""{doc}',
        "",
        f"Generated by polc from {_in_docstring(tp.file)} (sha256 {sha256(tp)}).",
        "Do not edit: change the .pol and regenerate with `polc compile --emit python`.",
        "",
        "params is a flat dict: params[weight] is the weight\'s UNCONSTRAINED value (float32, declared",
        "shape; `constrain(params)` gives the values), params[mlp key] the flax.linen Dense params of",
        'that block ({"Dense_0": {"kernel", "bias"}, ...}). apply(params, obs) is unbatched:',
        "jax.vmap(apply, in_axes=(None, 0)) runs a batch.",
        '"""',
        "",
        "import jax",
        "import jax.numpy as jnp",
        "",
        f"SOURCE_SHA256 = {sha256(tp)!r}",
    ])
    parts = [head, _HELPERS.strip("\n"), "\n".join(_weights_lines(tp)), "\n".join(_prior_lines(tp)),
             "\n".join(_init_lines(tp))]
    if tp.states:  # memory: init_state() and step(params, obs, state) in place of apply
        parts[0] = parts[0].replace("apply(params, obs) is unbatched:\njax.vmap(apply, in_axes=(None, 0)) runs a batch.",
                                    "step(params, obs, state) is unbatched; init_state() starts an episode:\n"
                                    "jax.vmap(step, in_axes=(None, 0, 0)) runs a batch.")
        parts += ["\n".join(_state_lines(tp)), "\n".join(_forward_lines(tp, pr)), _STEP]
    else:
        parts += ["\n".join(_forward_lines(tp, pr)), _APPLY]
    return "\n\n\n".join(parts) + "\n"


def emit_hlo(tp: TypedProgram) -> str:
    """StableHLO text of `apply(params, obs)` for one unbatched obs (shapes from the schema); with
    states, of `step_distribution(params, obs, state)`, whose last output is the next state."""
    import jax
    import jax.numpy as jnp
    from jax import export

    from .lower import lower

    policy = lower(tp)
    params = jax.eval_shape(policy.init, jax.random.PRNGKey(0))
    obs = {o.name: jax.ShapeDtypeStruct(o.type.shape, jnp.float32) for o in tp.obs}
    if tp.states:
        state = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in policy.state0.items()}
        return export.export(policy.step_distribution)(params, obs, state).mlir_module()
    return export.export(policy.apply)(params, obs).mlir_module()


# ---- the checked graph as JSON ---------------------------------------------------------


def _num(x: Any) -> Any:
    """JSON has no infinities: an open bound is null."""
    if isinstance(x, (list, tuple)):
        return [_num(v) for v in x]
    if hasattr(x, "tolist"):
        return _num(x.tolist())
    if isinstance(x, bool) or x is None:
        return x
    x = float(x)
    return None if math.isinf(x) or math.isnan(x) else x


def _interval(v: Any) -> Any:
    """An analysis interval as [lo, hi] (elementwise for arrays, nulls for open ends).
    Accepts an object with `lo`/`hi`, a (lo, hi) pair, or anything with a `to_json()`."""
    if v is None:
        return None
    if hasattr(v, "to_json"):
        return v.to_json()
    if hasattr(v, "lo") and hasattr(v, "hi"):
        return [_num(v.lo), _num(v.hi)]
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return [_num(v[0]), _num(v[1])]
    return str(v)


@functools.lru_cache(maxsize=2)
def _lines_of(source: str) -> tuple[str, ...]:
    """Split once per program, not once per node (a str caches its hash, so a lookup is O(1))."""
    return tuple(source_lines(source))


def _span(tp: TypedProgram, span) -> dict:
    lines = _lines_of(tp.source)
    text = "\n".join(lines[span.line - 1: span.end_line]) if span.line <= len(lines) else ""
    return {"line": span.line, "column": span.column, "end_line": span.end_line,
            "end_column": span.end_column, "text": text}


def _mlp_json(m: T.Mlp) -> dict:
    return {"key": m.key, "in_size": m.in_size, "hidden": list(m.hidden), "out": m.out,
            "activation": m.activation, "reads": sorted(set().union(*(T.refs(i) for i in m.inputs)))}


def emit_json(tp: TypedProgram, intervals: Optional[Mapping[str, Any]] = None) -> str:
    """The checked graph for tools: every declaration as a node (kind, name, type,
    shape, doc, range or constraint, the names it reads, its interval if given),
    the mlp blocks and the intents. Open bounds are null."""
    intervals = intervals or {}
    nodes: list[dict] = []

    def node(kind: str, d, **extra) -> None:
        n = {"kind": kind, "name": d.name, "type": str(d.type), "base": d.type.base,
             "shape": list(d.type.shape), "doc": d.doc, **extra, "span": _span(tp, d.span)}
        if d.name in intervals:
            n["interval"] = _interval(intervals[d.name])
        nodes.append(n)

    for o in tp.obs:
        extra = {} if o.bounds is None else {"element_ranges": [_num([lo, hi]) for lo, hi in zip(*o.bounds)]}
        node("obs", o, range=_num([o.lo, o.hi]), reads=[], **extra)
    for w in tp.weights:
        node("weight", w, constraint=_num([w.lo, w.hi]), transform=transforms.kind(w.lo, w.hi),
             init=_num(w.init), reads=[],
             prior=None if w.prior is None else {"family": w.prior.family, "args": list(w.prior.args)})
    for d in tp.nodes:
        reads = T.refs(d.expr)
        extra: dict = {}
        if isinstance(d, T.Action):
            extra["range"] = _num([d.lo, d.hi])
            extra["noise"] = None if d.std is None else {"dist": "normal", "std_reads": sorted(T.refs(d.std))}
            reads |= T.refs(d.std) if d.std is not None else set()
        mlps = T.mlps_in(d.expr) + (T.mlps_in(d.std) if isinstance(d, T.Action) and d.std is not None else [])
        node("latent" if isinstance(d, T.Latent) else "action", d, reads=sorted(reads),
             mlps=[m.key for m in mlps], **extra)
    for st in tp.states:  # `reads`: what its `next` expression reads (one step late)
        node("state", st, range=_num([st.lo, st.hi]) if st.type.base == T.REAL else None, init=_num(st.init),
             reads=sorted(T.refs(st.update)), modes=[{"name": n, "value": v} for n, v in T.state_modes(tp, st)])
    intents = []
    for i in tp.intents:
        if isinstance(i, T.MonoIntent):
            intents.append({"kind": "monotone", "target": i.target, "direction": i.direction, "var": i.var,
                            "text": i.text, "line": i.span.line})
        else:
            intents.append({"kind": "range", "target": i.target, "lo": _num(i.lo), "hi": _num(i.hi),
                            "lo_strict": i.lo_strict, "hi_strict": i.hi_strict, "text": i.text,
                            "line": i.span.line})
    graph = {
        "policy": tp.name, "doc": tp.doc, "file": tp.file, "sha256": sha256(tp),
        "nodes": nodes, "order": [d.name for d in tp.nodes],
        "mlps": [_mlp_json(m) for m in _mlps(tp)], "intents": intents,
    }
    return json.dumps(graph, indent=2) + "\n"


def _mlps(tp: TypedProgram) -> list[T.Mlp]:
    """Every mlp block, including any inside a noise std, sorted by key."""
    found = {m.key: m for m in tp.mlps}
    for a in tp.actions:
        if a.std is not None:
            found.update({m.key: m for m in T.mlps_in(a.std)})
    return [found[k] for k in sorted(found)]


__all__ = ["emit_hlo", "emit_json", "emit_python", "sha256"]

"""Differential testing: the JAX lowering against the NumPy reference interpreter.

Hypothesis writes random well-typed Pol programs as text (every op, function,
reduction, indexing form, if/else, vector literals, mlps, noisy actions); each is
parsed and checked, then the lowering must agree with `reference.evaluate` on
random observations and perturbed weights (every row of a vmapped batch; its first row
also unbatched, which must give the same), and the
gradient of the log-likelihood must be finite. Expressions are kept smooth and
bounded where gradients are taken (log(1 + x^2), x / (1 + y^2), ...), since a
NaN gradient there would be the program's fault, not the compiler's.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import example, given, HealthCheck, settings
from hypothesis import strategies as st

from polc.analysis import reference, transforms
from polc.check.program import check_program
from polc.backend.lower import lower
from polc.frontend.parse import parse_program
from tiers import examples

SHAPES = [(), (2,), (3,), (2, 3)]
NUMBERS = ["0.5", "1", "2", "0.25", "3", "1.5"]
UNARY_FUNCS = ["abs", "tanh", "sigmoid", "relu", "softplus", "sin", "cos", "square", "sign"]
COMPARE = ["<", "<=", ">", ">=", "==", "!="]


def type_text(shape: tuple[int, ...]) -> str:
    return "real" + (f"[{', '.join(map(str, shape))}]" if shape else "")


def broadcastable_to(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Shapes (from SHAPES) that broadcast to exactly `shape` without changing it."""
    return [s for s in SHAPES if len(s) <= len(shape) and shape[len(shape) - len(s):] == s]


class Writer:
    """Writes random expressions of a requested base and shape over the names declared so far."""

    def __init__(self, draw):
        self.draw = draw
        self.names: dict[str, tuple[str, tuple[int, ...]]] = {}
        self.mlps = 0

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def number(self) -> str:
        n = self.pick(NUMBERS)
        return self.pick([n, f"(-{n})"])

    def literal(self, shape: tuple[int, ...]) -> str:
        if not shape:
            return self.number()
        return "[" + ", ".join(self.literal(shape[1:]) for _ in range(shape[0])) + "]"

    def leaf(self, base: str, shape: tuple[int, ...]) -> str:
        names = sorted(n for n, t in self.names.items() if t == (base, shape))
        if base == "bool":
            return self.pick(names + (["true", "false"] if not shape else [])) if names or not shape else \
                f"({self.real(shape, 0)} > 0)"
        if names and self.pick([True, True, True, False]):
            return self.pick(names)
        # A smaller name broadcast up to `shape` keeps the inputs flowing (rather than constants).
        smaller = sorted(n for n, t in self.names.items() if t[0] == "real" and t[1] in broadcastable_to(shape))
        if smaller and shape:
            return f"({self.pick(smaller)} + {self.literal(shape)})"
        return self.pick(smaller) if smaller else self.literal(shape)

    def real(self, shape: tuple[int, ...], depth: int) -> str:
        if depth <= 0:
            return self.leaf("real", shape)
        kind = self.pick(["leaf", "neg", "arith", "arith", "div", "pow", "func", "func", "binfunc", "clip",
                          "select", "reduce", "index", "stack", "mlp"])
        sub = self.pick(broadcastable_to(shape))
        a = lambda: self.real(shape, depth - 1)  # noqa: E731
        b = lambda: self.real(sub, depth - 1)  # noqa: E731
        if kind == "leaf":
            return self.leaf("real", shape)
        if kind == "neg":
            return f"-{self.real(shape, depth - 1)}"
        if kind == "arith":
            x, y = a(), b()
            x, y = self.pick([(x, y), (y, x)])
            return f"({x} {self.pick(['+', '-', '*'])} {y})"
        if kind == "div":
            return f"({a()} / (1 + square({b()})))"
        if kind == "pow":
            return self.pick([f"({a()}) ^ 2", f"(1 + abs({a()})) ^ 0.5", f"2 ^ tanh({a()})"])
        if kind == "func":
            x = a()
            return self.pick([f"{self.pick(UNARY_FUNCS)}({x})", f"exp(tanh({x}))", f"log(1 + square({x}))",
                              f"sqrt(1 + square({x}))"])
        if kind == "binfunc":
            x, y = a(), b()
            f = self.pick(["min", "max"])
            return self.pick([f"{f}({x}, {y})", f"{f}({y}, {x})", f"atan2({x}, 1 + square({y}))"])
        if kind == "clip":
            lo, hi = sorted(self.draw(st.lists(st.sampled_from([-1.5, -0.5, 0.0, 0.5, 1.0, 2.0]), min_size=2,
                                               max_size=2, unique=True)))
            return self.pick([f"clip({a()}, {lo}, {hi})", f"clip({a()}, {b()}, {self.real(sub, depth - 1)})"])
        if kind == "select":
            cond = self.boolean(self.pick(broadcastable_to(shape)), depth - 1)
            x, y = a(), b()
            x, y = self.pick([(x, y), (y, x)])
            return self.pick([f"(if {cond} then {x} else {y})", f"where({cond}, {x}, {y})"])
        if kind == "reduce":
            return self.reduce(shape, depth)
        if kind == "index":
            return self.index(shape, depth)
        if kind == "stack" and shape:
            return "[" + ", ".join(self.real(shape[1:], depth - 1) for _ in range(shape[0])) + "]"
        if kind == "mlp" and shape in ((), (2,), (3,)) and self.mlps < 1:
            self.mlps += 1
            inputs = ", ".join(self.real(self.pick(SHAPES), depth - 1) for _ in range(self.pick([1, 2])))
            out = f", out = {shape[0]}" if shape else ""
            return f"mlp({inputs}; hidden = [{self.pick([3, 4])}]{out}, activation = {self.pick(['tanh', 'relu'])})"
        return self.leaf("real", shape)

    def reduce(self, shape: tuple[int, ...], depth: int) -> str:
        f = self.pick(["sum", "mean", "max", "min", "norm"])
        if shape == ():
            x = self.real(self.pick([(2,), (3,), (2, 3)]), depth - 1)
            axis = ""
        elif shape in ((2,), (3,)):
            x = self.real((2, 3), depth - 1)
            axis = self.pick(["; axis = 1", "; axis = -1"]) if shape == (2,) else "; axis = 0"
        else:
            return self.leaf("real", shape)
        if f == "norm":
            x = f"1 + square({x})"  # keeps the norm's gradient finite
        return f"{f}({x}{axis})"

    def index(self, shape: tuple[int, ...], depth: int) -> str:
        forms = {
            (): [((3,), "[{i3}]"), ((2,), "[{i2}]"), ((2, 3), "[{i2}, {i3}]")],
            (2,): [((3,), "[1:3]"), ((2, 3), "[:, {i3}]"), ((2, 3), "[0:2, -1]")],
            (3,): [((2, 3), "[{i2}]"), ((2, 3), "[{i2}, :]"), ((3,), "[0:3]"), ((3,), "[:]")],
            (2, 3): [((2, 3), "[0:2]"), ((2, 3), "[:, 0:3]")],
        }[shape]
        base, items = self.pick(forms)
        items = items.format(i2=self.pick(["0", "1", "-1"]), i3=self.pick(["0", "1", "2", "-2"]))
        return f"({self.real(base, depth - 1)}){items}"

    def boolean(self, shape: tuple[int, ...], depth: int) -> str:
        if depth <= 0:
            return self.leaf("bool", shape)
        kind = self.pick(["leaf", "compare", "compare", "and", "or", "not", "eq"])
        if kind == "compare":
            x, y = self.real(shape, depth - 1), self.real(self.pick(broadcastable_to(shape)), depth - 1)
            return f"({x} {self.pick(COMPARE)} {y})"
        if kind in ("and", "or", "eq"):
            op = {"and": "and", "or": "or", "eq": self.pick(["==", "!="])}[kind]
            x, y = self.boolean(shape, depth - 1), self.boolean(self.pick(broadcastable_to(shape)), depth - 1)
            return f"({x} {op} {y})"
        if kind == "not":
            return f"(not {self.boolean(shape, depth - 1)})"
        return self.leaf("bool", shape)


@st.composite
def programs(draw) -> str:
    """A random well-typed Pol program, declarations in shuffled order."""
    w = Writer(draw)
    decls = []
    for i in range(draw(st.integers(1, 3))):
        shape = w.pick(SHAPES)
        rng = w.pick(["", " in [-2, 2]", " >= -1", " in [0, 1]"])
        decls.append(f'obs o{i} : {type_text(shape)}{rng} "observation {i}"')
        w.names[f"o{i}"] = ("real", shape)
    for i in range(draw(st.integers(0, 3))):
        shape = w.pick([(), (3,)])
        rng, init = w.pick([("", "0.3"), (" >= 0", "0.5"), (" <= 1", "-0.5"), (" in [-1, 2]", "0.25"),
                            (" >= -2", "[-1.5, 0, 2]" if shape else "1")])
        decls.append(f"weight w{i} : {type_text(shape)}{rng} = {init}")
        w.names[f"w{i}"] = ("real", shape)
    n_latents, n_actions = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    kinds = ["latent"] * n_latents + ["action"] * n_actions
    kinds = kinds[:1] + draw(st.permutations(kinds[1:]))
    for i, kind in enumerate(kinds):
        depth = draw(st.integers(1, 3))
        if kind == "latent":
            base = w.pick(["real", "real", "real", "bool"])
            shape = w.pick(SHAPES)
            expr = w.real(shape, depth) if base == "real" else w.boolean(shape, depth)
            declared = f" : {base}" + (f"[{', '.join(map(str, shape))}]" if shape else "") if w.pick([0, 1]) else ""
            decls.append(f"latent n{i}{declared} = {expr}")
        else:
            shape = w.pick([(), (2,), (3,)])
            rng = w.pick(["", " in [-1, 1]", " >= 0", " <= 0.5", " in [-3, 3]"])
            expr = w.real(w.pick(broadcastable_to(shape)), depth)
            noise = w.pick(["", f" ~ normal(std = 0.1 + softplus({w.real(w.pick(broadcastable_to(shape)), 1)}))",
                            " ~ normal(std = 0.2)"])
            decls.append(f"action n{i} : {type_text(shape)}{rng} = {expr}{noise}")
        w.names[f"n{i}"] = (base if kind == "latent" else "real", shape)
    return "\n".join(draw(st.permutations(decls))) + "\n"


def random_obs(tp, rng: np.random.Generator, batch: int) -> dict:
    out = {}
    for o in tp.obs:
        lo, hi = max(o.lo, -2.0), min(o.hi, 2.0)
        out[o.name] = rng.uniform(lo, hi, (batch,) + o.type.shape).astype(np.float32)
    return out


def assert_close(actual, expected, what: str) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, what
    if expected.dtype == bool:
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    else:
        scale = 1.0 + float(np.max(np.abs(expected), initial=0.0))
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * scale, err_msg=what)


def random_params(tp, policy, rng: np.random.Generator) -> dict:
    """Weights moved off their initial values (so the transforms matter), random mlps.
    (`policy.init` and `policy.unconstrain` are tested in test_lower; here the transform runs in
    NumPy, as jax's eager ops would compile a program for each new shape.)"""
    params = {w.name: transforms.unconstrain(np.broadcast_to(np.asarray(w.init, np.float32), w.type.shape),
                                             w.lo, w.hi, np).astype(np.float32) for w in tp.weights}
    params = {k: v + rng.normal(0.0, 0.7, v.shape).astype(np.float32) for k, v in params.items()}
    for key, variables in reference.random_mlp_params(tp, rng).items():
        params[key] = jax.tree.map(lambda a: np.asarray(a, np.float32), variables["params"])
    return params


B = 3


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=programs(), seed=st.integers(0, 2**31 - 1))
@example(text='obs o0 : real "observation 0"\nweight w0 : real[3] in [-1, 2] = 0.25\nlatent n1 = max(w0)\n'
              'action n4 : real = n1\n', seed=2)  # found by hypothesis: XLA at -O0 made max's gradient inf
def test_lowering_agrees_with_the_reference_interpreter(text, seed):
    tp, _ = check_program(parse_program(text, "random.pol"))
    policy = lower(tp)
    rng = np.random.default_rng(seed)
    params = random_params(tp, policy, rng)
    batch = random_obs(tp, rng, B)

    # One compile per program: the batch through vmap, its first row alone (a program's
    # unbatched path, as a rollout of one environment runs it), the gradient and the constrained
    # weights; what comes back is read in NumPy (jax's eager ops compile one program per shape).
    # Not with XLA's backend optimisations off: that saved 5% here, and under it XLA:CPU gave an
    # infinite gradient for `max` of a vector weight (finite at the default level).
    @jax.jit
    def run(params, batch):
        vmapped = jax.vmap(policy.distribution, in_axes=(None, 0))(params, batch)
        obs = {k: v[0] for k, v in batch.items()}
        one = policy.distribution(params, obs)
        mean, std, _ = one
        actions = {k: jax.lax.stop_gradient(mean[k] + 0.3 * std.get(k, 0.0)) for k in mean}

        def objective(p):
            mean, _ = policy.apply(p, obs)
            return policy.log_prob(p, obs, actions) + sum(jnp.sum(v) for v in mean.values())

        return vmapped, one, jax.value_and_grad(objective)(params), policy.constrain(params)

    vmapped, one, (objective, grads), constrained = jax.tree.map(np.asarray, run(params, batch))
    weights = {k: np.broadcast_to(np.asarray(v, np.float64), (B,) + np.shape(v)) for k, v in constrained.items()}
    ref = reference.run(tp, weights, batch, mlp_params={k: v for k, v in params.items() if "." in k}, batch=B)

    rows = [jax.tree.map(lambda x, i=i: x[i], vmapped) for i in range(B)]
    for i, (mean, std, latents) in enumerate(rows):
        assert set(latents) == {lat.name for lat in tp.latents} and set(mean) == {a.name for a in tp.actions}
        for name, value in {**latents, **mean}.items():
            assert_close(value, ref.values[name][i], f"{name} in\n{text}")
        for name, value in std.items():
            assert_close(value, ref.stds[name][i], f"std of {name} in\n{text}")
    for got, want in zip(jax.tree.leaves(one), jax.tree.leaves(rows[0])):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    assert math.isfinite(float(objective)), text
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads)), text

"""Grouped weight transforms (`lower.transform_groups`): one transform per kind of
constraint, the values and gradients of one transform per weight to within one
float32 rounding (XLA's vectorised exp and its scalar one may differ in the last bit)."""

import glob
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from polc.analysis import transforms
from polc.backend.lower import transform_groups

from test_lower import compile_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.pol"), recursive=True))

# Every kind, bounds of 0 and width 1 (the per-weight form leaves their operation out),
# bounds that round in float32 (0.1, 0.9: float32(0.9 - 0.1) != float32(0.9) - float32(0.1)),
# arrays and scalars mixed in one group.
MIXED = """
obs x : real[3]
weight a : real >= 0 = 1
weight b : real >= -2.5 = 1
weight c : real[3] >= 0.1 = 0.5
weight d : real <= 0 = -1
weight e : real[2] <= 3 = 1
weight f : real in [0, 1] = 0.5
weight g : real in [0.1, 0.9] = 0.3
weight h : real[3] in [-1, 2] = 0.2
weight free : real = 0.7
weight lone_upper_pair : real <= 1 = 0
latent s = sum(x * c + h) * a + b + d + sum(e) + f + g + free + lone_upper_pair "everything"
action y : real = s
"""


def per_weight(policy, params):
    """What `constrain` computed before grouping: one transform per weight."""
    return {w.name: transforms.constrain(params[w.name], w.lo, w.hi, jnp) for w in policy.program.weights}


def assert_within_an_ulp(x, y, name: str):
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    ulp = np.spacing(np.maximum(np.abs(x), np.abs(y)))
    assert np.all(np.abs(x - y) <= ulp), f"{name}: {x} vs {y}"


def random_params(policy, seed: int):
    rng = np.random.default_rng(seed)
    params = dict(policy.init(jax.random.PRNGKey(0)))
    for w in policy.program.weights:
        params[w.name] = jnp.asarray(rng.normal(0.0, 3.0, w.type.shape), jnp.float32)
    return params


def sources():
    with open(os.path.join(ROOT, "examples/car_racing/initial.pol")) as f:
        yield "car_racing/initial.pol", f.read()
    yield "mixed", MIXED


@pytest.mark.parametrize("name,text", list(sources()), ids=lambda x: x if len(x) < 40 else "")
def test_grouped_values_and_gradients_equal_the_per_weight_transforms_to_one_rounding(name, text):
    policy = compile_text(text)
    grouped, single = jax.jit(policy.constrain), jax.jit(lambda p: per_weight(policy, p))
    for seed in range(5):
        params = random_params(policy, seed)
        a, b = grouped(params), single(params)
        assert sorted(a) == sorted(b) == sorted(w.name for w in policy.program.weights)
        for k in a:
            assert a[k].shape == b[k].shape and a[k].dtype == b[k].dtype
            assert_within_an_ulp(a[k], b[k], k)
        ga = jax.grad(lambda p: sum(jnp.sum(jnp.sin(v)) for v in policy.constrain(p).values()))(params)
        gb = jax.grad(lambda p: sum(jnp.sum(jnp.sin(v)) for v in per_weight(policy, p).values()))(params)
        for k in ga:
            assert_within_an_ulp(ga[k], gb[k], k)


def test_one_transform_per_kind_of_constraint():
    policy = compile_text(MIXED)
    groups = {g.kind: [w.name for w in g.weights] for g in transform_groups(policy.program.weights)}
    assert groups == {"lower": ["a", "b", "c"], "upper": ["d", "e", "lone_upper_pair"],
                      "interval": ["f", "g", "h"], "none": ["free"]}
    jaxpr = str(jax.make_jaxpr(policy.constrain)(policy.init(jax.random.PRNGKey(0))))
    assert jaxpr.count(" exp ") == 2 and jaxpr.count(" logistic ") == 1, jaxpr


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_example_groups_each_weight_once(path):
    with open(path) as f:
        policy = compile_text(f.read())
    names = [w.name for g in transform_groups(policy.program.weights) for w in g.weights]
    assert sorted(names) == sorted(w.name for w in policy.program.weights)
    params = policy.init(jax.random.PRNGKey(0))
    values = policy.constrain(params)
    for w in policy.program.weights:
        np.testing.assert_allclose(np.asarray(values[w.name]), np.broadcast_to(w.init, w.type.shape), rtol=1e-5,
                                   err_msg=w.name)

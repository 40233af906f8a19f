"""Stan's constraint transforms, shared by the reference interpreter (numpy) and the lowering (jax)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from polc.analysis import transforms

INF = math.inf
BOUNDS = [(-INF, INF), (0.0, INF), (-2.5, INF), (-INF, 0.0), (-INF, 3.0), (0.0, 1.0), (-1.0, 1.0), (10.0, 10.5)]


def inside(lo: float, hi: float) -> np.ndarray:
    """Points strictly inside (lo, hi), some very close to each finite bound."""
    if lo > -INF and hi < INF:
        w = hi - lo
        return lo + w * np.array([1e-6, 0.01, 0.3, 0.5, 0.9, 1 - 1e-6])
    if lo > -INF:
        return lo + np.array([1e-6, 0.01, 1.0, 7.0, 1e4])
    if hi < INF:
        return hi - np.array([1e-6, 0.01, 1.0, 7.0, 1e4])
    return np.array([-1e4, -3.0, 0.0, 0.25, 1e4])


@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_constrain_inverts_unconstrain_in_float64(lo, hi):
    x = inside(lo, hi)
    u = transforms.unconstrain(x, lo, hi, np)
    assert np.all(np.isfinite(u))
    np.testing.assert_allclose(transforms.constrain(u, lo, hi, np), x, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_constrain_inverts_unconstrain_in_float32_jax(lo, hi):
    x = inside(lo, hi)
    u = transforms.unconstrain(jnp.asarray(x, jnp.float32), lo, hi, jnp)
    back = transforms.constrain(u, lo, hi, jnp)
    assert back.dtype == jnp.float32
    scale = max([1.0] + [abs(b) for b in (lo, hi) if math.isfinite(b)])
    np.testing.assert_allclose(np.asarray(back), x.astype(np.float32), rtol=1e-5, atol=1e-6 * scale)


@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_unconstrain_inverts_constrain(lo, hi):
    u = np.linspace(-8.0, 8.0, 17)
    np.testing.assert_allclose(transforms.unconstrain(transforms.constrain(u, lo, hi, np), lo, hi, np), u,
                               rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_constrained_values_respect_the_constraint_for_any_u(lo, hi):
    u = np.array([-700.0, -80.0, -1.0, 0.0, 1.0, 80.0, 700.0]) if hi < INF and lo > -INF else \
        np.array([-700.0, -80.0, -1.0, 0.0, 1.0, 80.0, 300.0])
    x = transforms.constrain(u, lo, hi, np)  # warnings are errors: no overflow warnings either
    assert np.all(x >= lo) and np.all(x <= hi)
    assert not np.any(np.isnan(x))


@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_gradients_are_finite(lo, hi):
    u = jnp.linspace(-30.0, 30.0, 13)
    g = jax.grad(lambda v: jnp.sum(transforms.constrain(v, lo, hi, jnp)))(u)
    assert np.all(np.isfinite(np.asarray(g)))
    x = jnp.asarray(inside(lo, hi)[1:-1], jnp.float32)
    g = jax.grad(lambda v: jnp.sum(transforms.unconstrain(v, lo, hi, jnp)))(x)
    assert np.all(np.isfinite(np.asarray(g)))


def test_interval_transform_is_the_scaled_sigmoid():
    u = np.array([-2.0, 0.0, 3.0])
    np.testing.assert_allclose(transforms.constrain(u, -1.0, 3.0, np), -1.0 + 4.0 / (1.0 + np.exp(-u)))
    assert transforms.constrain(np.array(0.0), 2.0, 4.0, np) == pytest.approx(3.0)


def test_one_sided_transforms_follow_stan():
    u = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(transforms.constrain(u, 0.5, INF, np), 0.5 + np.exp(u))
    np.testing.assert_allclose(transforms.constrain(u, -INF, -0.5, np), -0.5 - np.exp(u))
    np.testing.assert_array_equal(transforms.constrain(u, -INF, INF, np), u)


def test_kind_names_each_constraint():
    assert [transforms.kind(lo, hi) for lo, hi in [(-INF, INF), (0, INF), (-INF, 0), (0, 1)]] == \
        ["none", "lower", "upper", "interval"]


def test_the_numpy_path_never_imports_jax():
    import subprocess
    import sys

    code = ("import sys, numpy as np; from polc.analysis import transforms; "
            "transforms.constrain(np.zeros(3), 0.0, 1.0, np); transforms.unconstrain(np.full(3, 0.5), 0.0, 1.0, np); "
            "assert 'jax' not in sys.modules, 'jax was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_zero_bounds_and_unit_widths_add_no_operations():
    u = jnp.zeros(())
    assert len(jax.make_jaxpr(lambda v: transforms.constrain(v, 0.0, INF, jnp))(u).eqns) == 1  # exp
    assert len(jax.make_jaxpr(lambda v: transforms.constrain(v, -INF, 0.0, jnp))(u).eqns) == 2  # exp, neg
    assert len(jax.make_jaxpr(lambda v: transforms.constrain(v, 0.0, 1.0, jnp))(u).eqns) == 1  # logistic
    assert float(transforms.constrain(u, 0.0, 1.0, jnp)) == 0.5
    assert float(transforms.constrain(u, -INF, 0.0, jnp)) == -1.0

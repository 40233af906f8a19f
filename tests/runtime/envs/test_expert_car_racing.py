"""The privileged Car Racing expert: returns on unseen seeds, determinism, its pieces."""

from __future__ import annotations

import numpy as np
import pytest

from polc.runtime import envs
from polc.runtime.envs.car_racing_expert import CarRacingExpert, ExpertConfig, speed_profile

SPEC = envs.get("car_racing")


def episode(seed: int) -> tuple[float, list]:
    env = SPEC.make()
    env.reset(seed=seed)
    expert = SPEC.expert(env)
    total, actions = 0.0, []
    while True:
        a = expert.act(env)
        actions.append(a)
        _, r, term, trunc, _ = env.step(a)
        total += r
        if term or trunc:
            return total, actions


def test_two_unseen_seeds_quick():
    returns = [episode(s)[0] for s in SPEC.eval_seeds[:2]]
    assert min(returns) >= 900, returns


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_ten_unseen_seeds_mean_at_least_900():
    returns = [episode(s)[0] for s in SPEC.eval_seeds[:10]]
    assert np.mean(returns) >= 900, returns


@pytest.mark.slow
def test_fifty_unseen_seeds_mean_at_least_900():
    returns = [episode(s)[0] for s in SPEC.eval_seeds[:50]]
    assert np.mean(returns) >= 900, returns


def test_deterministic_by_seed():
    r1, a1 = episode(3)
    r2, a2 = episode(3)
    assert r1 == r2 and len(a1) == len(a2)
    assert all(x[k] == y[k] for x, y in zip(a1, a2) for k in x)


def test_actions_are_float32_scalars_in_range():
    env = SPEC.make(seed=0)
    env.reset()
    a = SPEC.expert(env).act(env)
    assert list(a) == ["steer", "gas", "brake"]
    for name, value in a.items():
        f = SPEC.schema.action_field(name)
        assert value.dtype == np.float32 and value.shape == ()
        assert f.lo <= value <= f.hi


def test_expert_replans_for_a_new_track():
    env = SPEC.make()
    env.reset(seed=0)
    expert = CarRacingExpert()
    first = expert.plan(env)
    assert expert.plan(env) is first
    env.reset(seed=1)
    assert expert.plan(env) is not first and expert.plan(env).geo.n == len(env.unwrapped.track)


def test_speed_profile_slows_before_a_corner():
    cfg = ExpertConfig()
    n = 200
    beta = np.zeros(n)
    beta[100:110] = np.linspace(0, -1.5, 10)  # a sharp right-hand corner ...
    beta[110:] = -1.5
    v = speed_profile(beta, np.full(n, 3.5), cfg)
    assert v[105] < 70 and v[50] == cfg.v_top
    assert np.all(np.diff(v[60:104]) <= 1e-9)  # ... braked for ahead of it, monotonically
    assert np.all(v[:-1] <= np.sqrt(np.roll(v, -1)[:-1] ** 2 + 2 * cfg.a_brake * 3.5) + 1e-9)


def test_recovery_slows_down_off_the_road():
    env = SPEC.make()
    env.reset(seed=0)
    expert = CarRacingExpert()
    plan = expert.plan(env)
    geo = plan.geo
    i = 60
    on = expert._target_speed(plan, i, geo.xy[i], float(geo.beta[i]))
    off = expert._target_speed(plan, i, geo.xy[i] + 10.0 * geo.right[i], float(geo.beta[i]))
    skew = expert._target_speed(plan, i, geo.xy[i], float(geo.beta[i]) + 1.0)
    assert off == skew == min(on, ExpertConfig().recover_speed)
    assert on > ExpertConfig().recover_speed

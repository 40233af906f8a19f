"""The fast paths of RL collection and rollouts (issue 18) against the straightforward
code they stand in for, bit for bit: Car Racing's observations computed for every env
of a step at once (`observe_packed_many`, used by `PackedEnvs` when it defers them), their
raw actions made at once (`raw_actions`) and stepped past their wrappers (`step_many`, with
`PackedEnvs` doing the wrappers' work), and `FiniteActions`' scalar check."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from polc.runtime import envs
from polc.runtime.envs import car_racing as cr
from polc.runtime.trace import vector
from polc.runtime.trace.rollout import TraceLayout

CAR = envs.get("car_racing")


def actions(rng, n):
    return [{"steer": np.float32(rng.uniform(-1, 1)), "gas": np.float32(rng.uniform(0, 1)),
             "brake": np.float32(rng.uniform(0, 0.2))} for _ in range(n)]


def test_observations_of_many_envs_at_once_are_each_envs_own_bit_for_bit():
    made = [CAR.make() for _ in range(4)]
    for seed, env in enumerate(made):
        env.reset(seed=seed)
    u = [e.unwrapped for e in made]
    rng = np.random.default_rng(0)
    for _ in range(250):
        for env, act in zip(made, actions(rng, len(made))):
            env.step(act)
        many = cr.observe_packed_many(u)
        assert many.dtype == np.float32 and many.shape == (len(u), cr._LO.size)
        for j, env in enumerate(u):
            assert many[j].tobytes() == cr.observe_packed(env, env.geometry).tobytes()


def test_row_dots_are_the_1d_at_of_each_row_bit_for_bit():
    rng = np.random.default_rng(4)
    rows = rng.normal(size=(3000, 2)) * rng.choice([1e-3, 1.0, 100.0], size=(3000, 1))
    vectors = rng.normal(size=(3000, 2, 2))
    dots = cr.row_dots(rows, vectors)
    want = np.array([[r @ v[0], r @ v[1]] for r, v in zip(rows, vectors)])
    assert dots.tobytes() == want.tobytes()


def test_row_dots_keep_a_rounding_the_plain_sum_would_lose():
    """Where this machine's BLAS rounds a 1-d `@` unlike a product-then-sum (FMA kernels),
    the plain sum would change the observations' last bits; where it rounds alike (seen on an
    AMD EPYC's OpenBLAS kernel), there is nothing to show, and the bit-for-bit test above holds."""
    rng = np.random.default_rng(4)
    rows = rng.normal(size=(3000, 2)) * rng.choice([1e-3, 1.0, 100.0], size=(3000, 1))
    vectors = rng.normal(size=(3000, 2, 2))
    want = np.array([[r @ v[0], r @ v[1]] for r, v in zip(rows, vectors)])
    if np.array_equal((rows[:, None] * vectors).sum(-1), want):
        pytest.skip("this machine's BLAS rounds a 1-d @ as a product-then-sum: no difference to keep")
    assert cr.row_dots(rows, vectors).tobytes() == want.tobytes()


def test_observations_at_once_around_the_lap_seam():
    env = CAR.make()
    env.reset(seed=5)
    u = env.unwrapped
    geo = u.geometry
    for i in (geo.n - 13, geo.n - 12, geo.n - 1, 0, 1):
        for along in (-1.0, 1.0):  # just behind and just past point i
            u.car.hull.position = tuple(geo.xy[i] + along * geo.forward[i])
            assert cr.observe_packed_many([u])[0].tobytes() == cr.observe_packed(u, geo).tobytes()


def _layout():
    import polc

    policy = polc.load("examples/car_racing/initial.pol").compile()
    return TraceLayout(policy.program, CAR.schema)


def reference_steps(seeds, acts, layout):
    """The envs stepped one by one, each observation dict packed field by field."""
    made = [CAR.make() for _ in seeds]
    for env, s in zip(made, seeds):
        env.reset(seed=s)
    out = []
    for step_acts in acts:
        step = []
        for env, act in zip(made, step_acts):
            obs, r, term, trunc, _ = env.step(act)
            row = np.concatenate([np.ravel(obs[name]) for name, *_ in layout.obs_fields])
            step.append((row, r, term, trunc))
        out.append(step)
    return out


def test_packed_envs_defer_car_racing_observations_and_give_the_same_steps():
    layout = _layout()
    seeds = [3, 4, 5]
    packed = vector.PackedEnvs(CAR, len(seeds), layout.obs_fields)
    assert packed._batch.tolist() == [0, 1, 2] and all(u.defer_observation for u in packed._batch_envs)
    act_fields = (("steer", 0, 1, ()), ("gas", 1, 1, ()), ("brake", 2, 1, ()))
    rng = np.random.default_rng(1)
    acts = [actions(rng, len(seeds)) for _ in range(120)]
    ref = reference_steps(seeds, acts, layout)
    packed.reset(seeds)
    for step_acts, want in zip(acts, ref):
        a = np.array([[x["steer"], x["gas"], x["brake"]] for x in step_acts], np.float32)
        rows, rewards, term, trunc = packed.step(a, act_fields)
        for j, (obs, r, t, tr) in enumerate(want):
            assert rows[j].tobytes() == obs.tobytes()
            assert rewards[j] == r and term[j] == t and trunc[j] == tr
            assert packed._batch_envs[j].packed_obs.tobytes() == obs.tobytes()
    packed.close()


class Shift(gym.ObservationWrapper):
    def observation(self, obs):
        return {k: v + np.float32(1) if k == "speed" else v for k, v in obs.items()}


def test_an_env_under_a_wrapper_that_reads_observations_is_not_deferred():
    layout = _layout()

    class Spec:
        schema = CAR.schema

        @staticmethod
        def make():
            return Shift(CAR.make())

    packed = vector.PackedEnvs(Spec, 2, layout.obs_fields)
    assert len(packed._batch) == 0 and not any(e.unwrapped.defer_observation for e in packed.envs)
    rows = packed.reset([0, 1])
    at = next(start for name, start, *_ in layout.obs_fields if name == "speed")
    rows, *_ = packed.step(np.zeros((2, 3), np.float32), (("steer", 0, 1, ()), ("gas", 1, 1, ()),
                                                           ("brake", 2, 1, ())))
    assert np.all(rows[:, at] >= 1.0)  # the wrapper's observation, not the env's own row
    packed.close()


@pytest.mark.parametrize("bad", [np.float32("nan"), np.float64("inf"), float("-inf")])
def test_finite_actions_refuses_a_non_finite_scalar_as_it_refuses_an_array(bad):
    messages = []
    for value in (bad, np.array([bad])):  # the scalar fast path, and the array path it skips
        env = CAR.make()
        env.reset(seed=10_000)
        with pytest.raises(envs.NonFiniteAction) as e:
            env.step({"steer": np.float32(0), "gas": value, "brake": np.float32(0)})
        assert env.unwrapped.last_raw_action is None  # the simulator never saw it
        messages.append(str(e.value))
    kind = "NaN" if np.isnan(bad) else ("+inf" if bad > 0 else "-inf")
    assert messages[0].startswith(f'the policy\'s action "gas" is {kind} at step 0 of the episode with seed 10000')
    assert messages[1].startswith(f'the policy\'s action "gas" is {kind} (elements [0]) at step 0')


def test_raw_actions_of_many_rows_are_raw_action_of_each_bit_for_bit():
    fields = (("gas", 0, 1, ()), ("steer", 1, 1, ()), ("brake", 2, 1, ()))
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, np.nan, np.inf, -np.inf, 0.5, 1e-40], np.float32)
    rng = np.random.default_rng(3)
    rows = np.concatenate([np.stack(np.meshgrid(special, special, special), -1).reshape(-1, 3),
                           rng.uniform(-1.5, 1.5, (500, 3)).astype(np.float32)])
    many = cr.raw_actions(rows, fields)
    assert many.dtype == np.float64 and many.shape == (len(rows), 3)
    for row, got in zip(rows, many):
        want = cr.raw_action({"gas": row[0], "steer": row[1], "brake": row[2]})
        assert got.tobytes() == want.tobytes()  # -0.0 stays -0.0 and NaN stays NaN, as min/max leave them
    with pytest.raises(KeyError, match="missing 'brake'"):
        cr.raw_actions(rows, fields[:2])


class ShortLimit:
    """Car Racing with a 30-step time limit, to see where the packed envs truncate."""

    schema = CAR.schema
    max_steps = 30

    @staticmethod
    def make():
        from polc.runtime.envs.finite import FiniteActions

        return FiniteActions(gym.make(CAR.schema.env_id, max_episode_steps=30))


def test_packed_envs_step_past_the_wrappers_and_truncate_where_the_time_limit_does():
    layout = _layout()
    packed = vector.PackedEnvs(ShortLimit, 2, layout.obs_fields)
    assert packed._direct and packed._wrapped == [] and packed._limit.tolist() == [30.0, 30.0]
    act_fields = (("steer", 0, 1, ()), ("gas", 1, 1, ()), ("brake", 2, 1, ()))
    ref = [ShortLimit.make() for _ in range(2)]
    rng = np.random.default_rng(2)
    for episode in range(2):  # a second episode after the reset: the count starts again
        packed.reset([7, 8])
        for env, s in zip(ref, (7, 8)):
            env.reset(seed=s)
        for t in range(30):
            acts = actions(rng, 2)
            a = np.array([[x["steer"], x["gas"], x["brake"]] for x in acts], np.float32)
            rows, rewards, term, trunc = packed.step(a, act_fields)
            for j, (env, act) in enumerate(zip(ref, acts)):
                obs, r, te, tr, _ = env.step(act)
                assert rewards[j] == r and term[j] == te and trunc[j] == tr == (t == 29)
                assert env.unwrapped.last_raw_action.tobytes() == packed._batch_envs[j].last_raw_action.tobytes()
        with pytest.raises(RuntimeError, match="without a reset"):
            packed.step(a, act_fields)
    packed.close()


def test_packed_envs_refuse_a_non_finite_action_as_finite_actions_does():
    layout = _layout()
    packed = vector.PackedEnvs(CAR, 2, layout.obs_fields)
    assert packed._direct
    act_fields = (("steer", 0, 1, ()), ("gas", 1, 1, ()), ("brake", 2, 1, ()))
    with pytest.raises(gym.error.ResetNeeded):
        packed.step(np.zeros((2, 3), np.float32), act_fields)
    packed.reset([10_000, 10_001])
    for _ in range(3):
        packed.step(np.zeros((2, 3), np.float32), act_fields)
    bad = np.zeros((2, 3), np.float32)
    bad[1, 2] = np.nan
    with pytest.raises(envs.NonFiniteAction) as e:
        packed.step(bad, act_fields)
    assert str(e.value).startswith('the policy\'s action "brake" is NaN at step 3 of the episode with seed 10001')
    assert packed._elapsed.tolist() == [3, 3]  # neither env was stepped
    packed.close()

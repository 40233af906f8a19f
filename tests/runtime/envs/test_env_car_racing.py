"""The semantic Car Racing environment ("polc/CarRacing-v0").

Bit-identical rewards/terminations against the stock CarRacing-v3, real frames
when asked for, observations inside the schema, and the sign conventions
(positive = right / clockwise) checked on placed and driven cars.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from polc.runtime import envs
from polc.runtime.envs.car_racing import (CAR_RACING, TRACK_HALF_WIDTH, SemanticCarRacing, observe,
                                          raw_action, sharp_corner_flags)

SPEC = envs.get("car_racing")


def drive_both(seed: int, actions) -> tuple[list, list]:
    """Step ours and the stock env with the same seed; stock gets the raw array ours passes down."""
    ours, stock = SPEC.make(), gym.make("CarRacing-v3")
    ours.reset(seed=seed)
    stock.reset(seed=seed)
    a_out, b_out = [], []
    for act in actions:
        _, r, term, trunc, _ = ours.step(act)
        raw = ours.unwrapped.last_raw_action.copy()
        _, r2, term2, trunc2, _ = stock.step(raw)
        a_out.append((r, term, trunc))
        b_out.append((r2, term2, trunc2))
        if term or trunc or term2 or trunc2:
            break
    assert np.array_equal(np.array(ours.unwrapped.car.hull.position), np.array(stock.unwrapped.car.hull.position))
    return a_out, b_out


def random_actions(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    a = rng.uniform([-1, 0, 0], [1, 1, 0.3], size=(n, 3)).astype(np.float32)
    return [{"steer": x[0], "gas": x[1], "brake": x[2]} for x in a]


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_random_actions_give_bit_identical_rewards_and_terminations():
    ours, stock = drive_both(3, random_actions(320, 0))
    assert len(ours) == 320
    assert ours == stock  # exact float equality, step by step


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_expert_driving_gives_bit_identical_rewards_over_tiles():
    env = SPEC.make()
    env.reset(seed=11)
    expert = SPEC.expert(env)
    actions = []
    for _ in range(300):
        a = expert.act(env)
        actions.append(a)
        env.step(a)
    ours, stock = drive_both(11, actions)
    assert len(ours) == 300
    assert ours == stock
    assert sum(r for r, _, _ in ours) > 150  # it did collect tiles


def test_leaving_the_playfield_is_gymnasiums_minus_100():
    results = []
    for env, action in ((SPEC.make(), {"steer": 0.0, "gas": 0.0, "brake": 0.0}),
                        (gym.make("CarRacing-v3"), np.zeros(3))):
        env.reset(seed=1)
        env.unwrapped.car.hull.position = (1000.0, 0.0)  # PLAYFIELD is 333
        _, r, term, trunc, info = env.step(action)
        results.append((r, term, trunc, info["lap_finished"]))
    assert results[0] == results[1] == (-100, True, False, False)


def test_time_limit_is_the_stock_1000_steps():
    env = SPEC.make()
    assert env.spec.max_episode_steps == 1000 == SPEC.max_steps
    env.reset(seed=2)
    zero = {"steer": 0.0, "gas": 0.0, "brake": 0.0}
    for t in range(1000):
        _, _, term, trunc, _ = env.step(zero)
        assert not term
        assert trunc == (t == 999)


def test_rgb_array_rendering_gives_real_frames():
    env = SPEC.make(render_mode="rgb_array")
    env.reset(seed=4)
    for _ in range(60):
        env.step({"steer": 0.0, "gas": 0.5, "brake": 0.0})
    frame = env.render()
    assert frame.shape == (400, 600, 3) and frame.dtype == np.uint8
    colours = {tuple(c) for c in frame.reshape(-1, 3)[::97]}
    assert len(colours) > 5  # road, grass, car, text: not a blank image
    assert frame.std() > 10


def check_obs(obs: dict, space: gym.spaces.Dict) -> None:
    assert list(obs) == [f.name for f in CAR_RACING.obs]
    for f in CAR_RACING.obs:
        x = obs[f.name]
        assert isinstance(x, np.ndarray) and x.dtype == np.float32 and x.shape == f.shape, f.name
        assert np.all(x.astype(np.float64) >= f.lo) and np.all(x.astype(np.float64) <= f.hi), (f.name, x)
    assert np.all(np.abs(obs["tiles"][:, 2].astype(np.float64)) <= math.pi)
    assert set(np.unique(obs["tiles"][:, 3])) <= {0.0, 1.0}
    assert space.contains(obs)


@pytest.mark.parametrize("driver", ["expert", "random"])
def test_observations_stay_in_the_schema_over_an_episode(driver):
    env = SPEC.make(seed=21)
    obs, _ = env.reset()
    expert = SPEC.expert(env)
    actions = iter(random_actions(1000, 5))
    done, steps = False, 0
    while not done:
        check_obs(obs, env.observation_space)
        a = expert.act(env) if driver == "expert" else next(actions)
        obs, _, term, trunc, _ = env.step(a)
        done, steps = term or trunc, steps + 1
    check_obs(obs, env.observation_space)
    assert steps > 300


def test_gymnasium_env_checker_passes():
    from gymnasium.utils.env_checker import check_env

    check_env(SPEC.make().unwrapped, skip_render_check=True)


def test_make_seed_makes_the_first_reset_deterministic():
    a, _ = SPEC.make(seed=7).reset()
    b, _ = SPEC.make(seed=7).reset()
    c, _ = SPEC.make().reset(seed=7)
    for k in a:
        assert np.array_equal(a[k], b[k]) and np.array_equal(a[k], c[k])


def test_sharp_corner_flags_match_gymnasiums_kerbs():
    env = SPEC.make()
    for seed in (0, 1, 2):
        env.reset(seed=seed)
        u = env.unwrapped
        kerb, tile = [], -1
        for _, colour in u.road_poly:  # each tile's polygon, then its kerb polygon if it has one
            if isinstance(colour, tuple):
                kerb[tile] = True
            else:
                tile += 1
                kerb.append(False)
        assert np.array_equal(sharp_corner_flags(u.track), np.array(kerb))
        assert any(kerb)


def place(env, i: int, lateral: float = 0.0, dheading: float = 0.0) -> dict:
    """Put the car at centreline point i, `lateral` units to the right, heading
    `dheading` rad counter-clockwise from the track, and observe without stepping."""
    u = env.unwrapped
    geo = u.geometry
    p = geo.xy[i] + lateral * geo.right[i]
    u.car.hull.position = (float(p[0]), float(p[1]))
    u.car.hull.angle = float(geo.beta[i] + dheading)
    return observe(u, geo)


def test_right_of_centre_is_positive_offset():
    env = SPEC.make()
    env.reset(seed=5)
    obs = place(env, 40, lateral=3.0)
    assert obs["offset"] == pytest.approx(3.0 / TRACK_HALF_WIDTH, abs=1e-3)
    assert place(env, 40, lateral=-3.0)["offset"] < 0


def test_car_pointing_left_of_the_track_sees_positive_heading_error():
    env = SPEC.make()
    env.reset(seed=5)
    obs = place(env, 40, dheading=0.3)  # counter-clockwise = rotated left
    assert obs["heading_err"] == pytest.approx(0.3, abs=1e-5)  # the track turns right relative to the car
    assert obs["tiles"][0, 2] == pytest.approx(0.3, abs=0.05)


def test_right_hand_corner_tiles_are_right_and_turn_right():
    env = SPEC.make()
    env.reset(seed=5)
    geo = env.unwrapped.geometry
    turn = np.array([sum(math.remainder(geo.beta[(k + 1) % geo.n] - geo.beta[k % geo.n], 2 * math.pi)
                         for k in range(i, i + 12)) for i in range(geo.n)])
    i = int(np.argmin(turn))  # beta decreasing = clockwise = a right-hand corner
    assert turn[i] < -0.5
    tiles = place(env, i)["tiles"]
    assert tiles[-1, 0] > 0.3 and tiles[-1, 2] > 0.5
    assert np.all(tiles[:, 1] > 0)  # all ahead
    assert np.all(np.diff(tiles[:, 2]) > -1e-3)  # the heading keeps turning right
    # and a left-hand corner mirrors it
    j = int(np.argmax(turn))
    tiles = place(env, j)["tiles"]
    assert tiles[-1, 0] < -0.3 and tiles[-1, 2] < -0.5


def test_positive_steer_turns_right():
    env = SPEC.make()
    env.reset(seed=3)
    car = env.unwrapped.car
    a0, p0 = car.hull.angle, np.array(car.hull.position)
    for _ in range(30):
        obs, *_ = env.step({"steer": 1.0, "gas": 0.3, "brake": 0.0})
    assert obs["ang_vel"] > 0.3
    assert obs["steer_ind"] > 0.9
    right = np.array([math.cos(a0), math.sin(a0)])  # the car's starting right-hand side
    assert (np.array(car.hull.position) - p0) @ right > 0.5
    for _ in range(30):
        obs, *_ = env.step({"steer": -1.0, "gas": 0.3, "brake": 0.0})
    assert obs["ang_vel"] < 0 and obs["steer_ind"] < -0.9


def test_raw_action_passes_steer_unchanged_and_clips():
    raw = raw_action({"steer": np.float32(0.25), "gas": 2.0, "brake": -1.0})
    assert raw.dtype == np.float64 and raw.tolist() == [0.25, 1.0, 0.0]
    with pytest.raises(KeyError, match="steer, gas, brake"):
        raw_action({"steer": 0.0, "gas": 0.0})


def test_the_registry():
    assert "car_racing" in envs.names()
    assert SPEC.schema is CAR_RACING and CAR_RACING.env_id in gym.registry
    assert isinstance(gym.make("polc/CarRacing-v0").unwrapped, SemanticCarRacing)
    assert set(SPEC.demo_seeds).isdisjoint(SPEC.eval_seeds[:1000])
    assert list(SPEC.eval_seeds[:2]) == [10_000, 10_001]
    with pytest.raises(KeyError, match="known: car_racing"):
        envs.get("nope")


# The first version of `observe` (before it read the points ahead as slices), kept here
# only as the reference the fast one must match bit for bit.
def reference_observe(env, geo) -> dict:
    from polc.runtime.envs import car_racing as cr

    car, hull = env.car, env.car.hull
    px, py = hull.position
    p = np.array((px, py))
    a = hull.angle
    c, s = math.cos(a), math.sin(a)
    d = geo.xy - p
    i0 = int(np.argmin(np.einsum("ij,ij->i", d, d)))
    rel0 = p - geo.xy[i0]
    start = i0 + 1 if rel0 @ geo.forward[i0] > 0 else i0
    idx = (start + np.arange(cr.N_TILES_AHEAD)) % geo.n
    rel = geo.xy[idx] - p
    buf = np.empty(cr._LO.size)
    tiles = buf[:48].reshape(12, 4)
    tiles[:, 0] = (rel[:, 0] * c + rel[:, 1] * s) / cr.TILE_SCALE
    tiles[:, 1] = (rel[:, 1] * c - rel[:, 0] * s) / cr.TILE_SCALE
    tiles[:, 2] = (a - geo.beta[idx] + np.pi) % (2 * np.pi) - np.pi
    tiles[:, 3] = geo.sharp[idx]
    vx, vy = hull.linearVelocity
    w = car.wheels
    rim = w[0].wheel_rad / 100.0
    buf[48:] = ((vy * c - vx * s) / 100.0, -(w[0].joint.angle + w[1].joint.angle) / (2 * cr.STEER_LOCK),
                -hull.angularVelocity, w[0].omega * rim, w[1].omega * rim, w[2].omega * rim, w[3].omega * rim,
                float(rel0 @ geo.right[i0]) / TRACK_HALF_WIDTH, math.remainder(a - geo.beta[i0], 2 * math.pi),
                not w[0].tiles, not w[1].tiles, not w[2].tiles, not w[3].tiles, env.tile_visited_count / geo.n)
    out = buf.astype(np.float32)
    np.clip(out, cr._LO, cr._HI, out=out)
    return {name: out[sl].reshape(shape) for name, sl, shape in cr._VIEWS}


def assert_same_obs(obs: dict, ref: dict) -> None:
    assert list(obs) == list(ref)
    for k in ref:
        assert obs[k].dtype == ref[k].dtype and obs[k].shape == ref[k].shape
        assert obs[k].tobytes() == ref[k].tobytes(), k  # bit for bit


def test_observe_is_bit_identical_to_the_reference_over_driven_episodes():
    for seed in (0, 3):
        env = SPEC.make()
        obs, _ = env.reset(seed=seed)
        u = env.unwrapped
        assert_same_obs(obs, reference_observe(u, u.geometry))
        assert u.packed_obs.dtype == np.float32 and obs["tiles"].base is u.packed_obs
        for act in random_actions(300, seed):
            obs, *_ = env.step(act)
            assert_same_obs(obs, reference_observe(u, u.geometry))


def test_observe_is_bit_identical_to_the_reference_around_the_lap_seam():
    env = SPEC.make()
    env.reset(seed=5)
    u = env.unwrapped
    n = u.geometry.n
    for i in (n - 13, n - 12, n - 2, n - 1, 0, 1):
        for lateral, dheading in ((0.0, 0.0), (2.0, 0.4), (-3.0, -2.5)):
            for along in (-1.0, 1.0):  # just behind and just past point i
                obs = place(env, i, lateral, dheading)
                geo = u.geometry
                u.car.hull.position = tuple(np.array(u.car.hull.position) + along * geo.forward[i])
                assert_same_obs(observe(u, geo), reference_observe(u, geo))


def test_raw_action_reads_scalars_and_zero_d_arrays_alike():
    for v in (0.25, np.float32(0.25), np.float64(0.25), np.array(0.25), np.array([0.25])):
        assert raw_action({"steer": v, "gas": v, "brake": v}).tolist() == [0.25, 0.25, 0.25]


def test_nearest_is_the_first_argmin_of_the_squared_distances():
    env = SPEC.make()
    env.reset(seed=2)
    geo = env.unwrapped.geometry
    rng = np.random.default_rng(0)
    for p in np.concatenate([geo.xy[:50] + rng.normal(0, 5, (50, 2)), rng.uniform(-300, 300, (200, 2)),
                             (geo.xy[:20] + geo.xy[1:21]) / 2]):  # midpoints: near-ties
        d = geo.xy - p
        assert geo.nearest(p) == int(np.argmin(np.einsum("ij,ij->i", d, d)))


def car_state(env) -> np.ndarray:
    """Every number of the simulation a step changes, as float64 bits (signed zeros apart)."""
    u = env.unwrapped
    car = u.car
    values = [car.fuel_spent, u.reward, u.prev_reward, u.tile_visited_count, u.t]
    for body in [car.hull] + list(car.wheels):
        values += [*body.position, body.angle, *body.linearVelocity, body.angularVelocity]
    for w in car.wheels:
        values += [w.omega, w.phase, w.gas, w.brake, w.steer, w.joint.angle, w.joint.motorSpeed, len(w.tiles)]
    return np.array(values, np.float64).view(np.int64)


def braking_actions(n: int, seed: int) -> list[dict]:
    """Full-range actions: hard and partial braking, full lock, no gas, -0.0."""
    rng = np.random.default_rng(seed)
    a = rng.uniform([-1.2, -0.2, -0.2], [1.2, 1.2, 1.2], size=(n, 3)).astype(np.float32)
    a[::7, 2] = 0.95   # wheels blocked
    a[3::7, 2] = 0.0   # no brake while the wheels turn
    a[::11, 1] = -0.0  # a negative zero reaches gymnasium as it is
    return [{"steer": x[0], "gas": x[1], "brake": x[2]} for x in a]


@pytest.mark.slow  # 2 s: left to the full suite (make test-fast runs the tests below it)
@pytest.mark.parametrize("seed, driver", [(4, "random"), (6, "braking"), (11, "expert")])
def test_the_scalar_car_is_gymnasiums_car_bit_for_bit(seed, driver):
    from polc.runtime.envs.car_dynamics import ScalarCar
    from polc.runtime.envs.car_racing import TrackGeometry

    ours, stock = SPEC.make(), gym.make("CarRacing-v3")
    ours.reset(seed=seed)
    stock.reset(seed=seed)
    assert type(ours.unwrapped.car) is ScalarCar and type(stock.unwrapped.car) is not ScalarCar
    geo = TrackGeometry(stock.unwrapped.track)
    actions = None if driver == "expert" else {"random": random_actions, "braking": braking_actions}[driver](400, seed)
    expert = SPEC.expert(ours)
    for k in range(400):
        act = actions[k] if actions is not None else expert.act(ours)
        obs, r, term, trunc, _ = ours.step(act)
        _, r2, term2, trunc2, _ = stock.step(ours.unwrapped.last_raw_action.copy())
        assert (r, term, trunc) == (r2, term2, trunc2), k
        assert np.array_equal(car_state(ours), car_state(stock)), k
        assert_same_obs(obs, observe(stock.unwrapped, geo))
        if term or trunc:
            break


def test_the_scalar_cars_sign_and_clip_are_numpys():
    from polc.runtime.envs.car_dynamics import _clip01, _sign

    def bits(v) -> bytes:
        return np.float64(v).tobytes()

    for x in (2.5, -2.5, 0.0, -0.0, 1e-300, float("nan"), float("inf"), -float("inf"), 3, -3, 0,
              np.float64(-0.0), np.float64(0.7)):
        assert bits(_sign(x)) == bits(np.sign(x)), x  # the same value, signed zeros and NaN's bits included
        assert isinstance(_sign(x), int) == isinstance(np.sign(x), np.integer), x  # an int for an int
        assert bits(_clip01(x)) == bits(np.clip(x, 0, 1)), x

"""The tasks of the memory construct examples (runtime/envs/memory_tasks.py, examples/memory/*/):
each is seeded by its reset, its schema file hides the privileged fields and names what the
example's program reads, and the dynamics a memory is needed for hold (a grasp needs a dwell and
may slip, a settled object drops when the grip opens, a disturbance is constant). NumPy only, no
rollouts of a policy."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import polc
from polc.runtime.envs import memory_tasks as mt
from polc.runtime.envs.gym_env import resolve

ROOT = Path(__file__).resolve().parents[3]
MEMORY = ROOT / "examples" / "memory"
TASKS = {"pid": mt.POINT_MASS_ID, "lowpass": mt.POINT_MASS_ID, "latch": mt.GRIP_ID, "timer": mt.BOUNCE_ID,
         "rate_limit": mt.HEADING_ID, "oscillator": mt.GAIT_ID, "pick_place": mt.PICK_PLACE_ID}
HIDDEN = {"pid": {"true_position", "velocity", "disturbance"}, "lowpass": {"true_position", "velocity"},
          "latch": {"present"}, "timer": {"to_bounce"}, "rate_limit": set(), "oscillator": set(),
          "pick_place": {"held", "grasp_p"}}


def test_every_example_program_has_a_task():
    assert set(TASKS) == {p.stem for p in MEMORY.glob("*.pol")}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_schema_names_what_the_program_reads_and_hides_the_rest(name):
    spec = resolve(str(MEMORY / name / "env.toml"))
    assert spec.source.env_id.endswith(TASKS[name])
    hidden = {f.name for f in spec.schema.obs if f.hidden}
    assert hidden == HIDDEN[name]
    program = polc.load(str(MEMORY / f"{name}.pol"), analyze=False)
    assert {o.name for o in program.typed.obs} == {f.name for f in spec.schema.policy_obs()}
    assert {a.name for a in program.typed.actions} == {f.name for f in spec.schema.actions}


@pytest.mark.parametrize("env_id", sorted(set(TASKS.values())))
def test_an_episode_is_fixed_by_its_seed_and_stays_in_its_box(env_id):
    def episode(seed):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(0)
        rows, rewards = [obs], []
        for _ in range(40):
            obs, r, term, trunc, _ = env.step(env.action_space.sample() * 0 + rng.uniform(
                env.action_space.low, env.action_space.high).astype(np.float32))
            rows.append(obs)
            rewards.append(r)
            if term or trunc:
                break
        space = env.observation_space
        assert all(space.contains(o) for o in rows), env_id
        return np.array(rows), np.array(rewards)

    a, b, c = episode(3), episode(3), episode(4)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not (a[0].shape == c[0].shape and np.array_equal(a[0], c[0]))


def test_the_point_mass_disturbance_is_constant_and_refused_beyond_the_motor():
    env = mt.PointMass(max_disturbance=0.4)
    obs, _ = env.reset(seed=1)
    d = obs[4]
    assert 0 < abs(d) <= 0.4
    for _ in range(10):
        obs, *_ = env.step(np.zeros(1))
        assert obs[4] == d
    with pytest.raises(ValueError, match="max_disturbance must be at most 1"):
        mt.PointMass(max_disturbance=2)
    with pytest.raises(ValueError, match="noise must be a finite number >= 0, not -0.1"):
        mt.PointMass(noise=-0.1)


def test_the_grip_drops_a_held_object_it_opens_on():
    env = mt.Grip()
    obs, _ = env.reset(seed=0)
    while not env.present:  # the empty hand: its vibration reads up to 0.4
        assert obs[0] <= 0.4
        obs, reward, *_ = env.step(np.zeros(1))
        assert reward == 0
    assert obs[0] >= 0.8  # the object arrives
    obs, reward, term, *_ = env.step(np.ones(1))
    assert reward == 1 and not term and 0.25 <= obs[0] <= 0.45  # settled: below any "on" level
    obs, reward, term, *_ = env.step(np.zeros(1))
    assert reward == -20 and term and obs[1] == 0


def test_a_bounce_pays_for_the_paddle_speed_built_up_before_it():
    env = mt.Bounce()
    obs, _ = env.reset(seed=0)
    k = int(obs[1])  # steps to the first bounce
    for i in range(k):
        obs, reward, *_ = env.step(np.ones(1))
        assert obs[0] == (1.0 if i == k - 1 else 0.0)
    assert reward == pytest.approx(2.0 * (1 - 0.6 ** k) - 0.1)  # the push of every step before it counts
    assert obs[1] == env.period  # the next one a period later
    env = mt.Bounce()
    env.reset(seed=0)
    for i in range(k):  # pushing only at the bounce's own step is too late for most of it
        obs, reward, *_ = env.step(np.ones(1) if i == k - 1 else np.zeros(1))
    assert reward == pytest.approx(2.0 * 0.4 - 0.1)


def _pick_place_at_object(seed: int) -> mt.PickPlace:
    env = mt.PickPlace()
    env.reset(seed=seed)
    env.gx, env.gz = env.ox, 0.0
    return env


def test_a_grasp_is_tried_only_after_the_dwell_and_a_slip_shows_when_lifting():
    closed = np.array([0, 0, 1, 0], np.float32)
    lift = np.array([0, 1, 1, 0], np.float32)
    outcomes = set()
    for seed in range(30):
        env = _pick_place_at_object(seed)
        env.p = 0.5
        for k in range(mt.PickPlace.DWELL - 1):
            obs, *_ = env.step(closed)
            assert obs[2] == 0.5 and not env.held  # touching; not decided yet
        obs, *_ = env.step(closed)  # the dwell's last step: the grasp is tried
        assert obs[2] == 0.5
        held = env.held
        obs, *_ = env.step(lift)
        assert obs[2] == (1.0 if held else 0.0)  # the load comes on, or the object slipped
        assert obs[0] == pytest.approx(0.0 if held else env.ox - env.gx)
        outcomes.add(held)
    assert outcomes == {True, False}


def test_lifting_before_the_dwell_never_grasps_and_giving_up_ends_the_episode():
    env = _pick_place_at_object(0)
    env.p = 1.0
    for _ in range(mt.PickPlace.DWELL - 2):
        env.step(np.array([0, 0, 1, 0], np.float32))
    obs, reward, term, *_ = env.step(np.array([0, 1, 1, 0], np.float32))  # the dwell's 4th closed step lifts
    assert not env.held and obs[2] == 0 and not term
    obs, reward, term, *_ = env.step(np.array([0, 0, 0, 1], np.float32))
    assert term and reward == 0


def test_carrying_the_held_object_to_the_goal_succeeds():
    env = _pick_place_at_object(2)
    env.held, env.gz = True, 0.3
    reward, term = 0.0, False
    for _ in range(40):
        obs, reward, term, *_ = env.step(np.array([np.clip(5 * (env.goal - env.ox), -1, 1), 0, 1, 0], np.float32))
        if term:
            break
    assert term and reward == 1.0 and abs(obs[3]) < mt.PickPlace.GOAL

"""door_mjx: its schema and `polc check --env door_mjx`, the C MuJoCo gymnasium env
and its expert, and the MJX brax Env stepped against C MuJoCo for the same controls.

Tolerance of the MJX-vs-C comparison: the MJX env computes in float32 and the
C env in float64 with the same MJCF, so over a closed-loop expert episode
(actions computed from the C env, replayed in MJX) the packed observations
agree within 1e-3 (metres / radians; measured: 5e-5, the CG solver's few
iterations in float32), the rewards within 1e-3 and the metric within 1e-3 m.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from polc.cli import main
from polc.runtime import envs
from polc.runtime.envs import door_mjx_scene as S
from polc.runtime.envs.door_mjx_gym import raw_action

SPEC = envs.get("door_mjx")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
INITIAL = os.path.join(ROOT, "examples", "door_mjx", "initial.pol")
DEMO = os.path.join(ROOT, "examples", "door_mjx", "demo.parquet")
TOL = 1e-3


@pytest.fixture(scope="module")
def env():
    e = SPEC.make()
    yield e
    e.close()


def expert_actions(env, seed: int, steps: int = S.MAX_STEPS) -> tuple[list[dict], list[dict]]:
    """The expert's observations (before each action) and actions over one episode."""
    obs, _ = env.reset(seed=seed)
    expert = SPEC.expert(env)
    seen, acts = [], []
    for _ in range(steps):
        seen.append(obs)
        a = expert.act(env)
        acts.append(a)
        obs, *_ = env.step(a)
    return seen, acts


def test_schema_fields_and_registry():
    assert [f.name for f in S.DOOR_MJX.obs] == ["hand", "handle", "prev_hand", "prev_handle", "goal",
                                                  "door_angle"]
    assert [f.name for f in S.DOOR_MJX.actions] == ["dx", "dy", "dz"]
    assert S.OBS_SIZE == 16
    assert SPEC.max_steps == 500 and SPEC.metric.key == "min_handle_to_target"
    assert not SPEC.metric.higher_is_better
    assert "door_mjx" in envs.names()


def test_polc_check_env_accepts_the_example(capsys):
    assert main(["check", "--env", "door_mjx", INITIAL]) == 0
    out, err = capsys.readouterr()
    assert "0 warnings" in out + err and "error" not in (out + err).lower()


def test_polc_check_env_names_a_missing_observation(tmp_path, capsys):
    bad = tmp_path / "bad.pol"
    bad.write_text(Path(INITIAL).read_text() + 'obs door_angel : real in [0, 1.6] "a typo"\n')
    assert main(["check", "--env", "door_mjx", str(bad)]) == 1
    out, err = capsys.readouterr()
    assert 'has no observation "door_angel". Did you mean "door_angle"?' in out + err


def test_observations_stay_in_their_ranges_and_seeds_fix_the_door(env):
    space = env.observation_space
    seen, _ = expert_actions(env, seed=3, steps=200)
    for obs in seen:
        assert space.contains(obs)
        for f in S.DOOR_MJX.obs:
            assert obs[f.name].dtype == np.float32 and obs[f.name].shape == f.shape
    door3 = env.unwrapped.door.copy()
    env.reset(seed=4)
    assert not np.allclose(env.unwrapped.door, door3)
    env.reset(seed=3)
    assert np.array_equal(env.unwrapped.door, door3)
    assert np.all(door3 >= S.DOOR_LO) and np.all(door3 <= S.DOOR_HI)


def test_raw_action_clips_and_names_missing_keys():
    assert raw_action({"dx": 2.0, "dy": -3.0, "dz": 0.5}).tolist() == [1.0, -1.0, 0.5]
    with pytest.raises(KeyError, match="door_mjx action needs keys dx, dy, dz"):
        raw_action({"dx": 0.0})


def test_the_expert_opens_the_door_on_unseen_seeds(env):
    for seed in SPEC.eval_seeds[:2]:
        seen, _ = expert_actions(env, seed)
        cols = {"obs.handle": np.stack([o["handle"] for o in seen]), "obs.goal": np.stack([o["goal"] for o in seen])}
        assert SPEC.metric.of_episode(cols) < 0.01  # a shut door reads 0.42 m
        assert seen[0]["door_angle"] == 0.0 and env.unwrapped.angle > 1.1


def test_the_demo_is_the_expert_from_seed_0(env):
    from polc.runtime.io.table import read_table

    table = read_table(DEMO)
    seen, acts = expert_actions(env, seed=0)
    np.testing.assert_array_equal(table.column("action.dx"), np.array([a["dx"] for a in acts], np.float32))


@pytest.fixture(scope="module")
def mjx_env():
    """DoorMJX and its jitted reset_to, step and reset, compiled (on first call) with XLA's
    optimisations off while the module's MJX tests run: their time is compiling MJX's door."""
    import jax

    from polc.runtime.envs.door_mjx import DoorMJX

    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        e = DoorMJX()
        yield e, jax.jit(e.reset_to), jax.jit(e.step), jax.jit(e.reset)
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


@pytest.mark.slow
def test_mjx_step_matches_c_mujoco_for_the_same_controls(env, mjx_env):
    """The expert drives the C env; MJX replays the same controls from the same door."""
    import jax.numpy as jnp

    e, reset_to, step, _ = mjx_env
    env.reset(seed=SPEC.eval_seeds[0])
    c = env.unwrapped
    state = reset_to(jnp.asarray(c.door, jnp.float32))
    np.testing.assert_allclose(np.asarray(state.obs), c.flat_obs(), atol=TOL)
    expert = SPEC.expert(env)
    metric, worst = 0.0, 0.0
    distances = []
    for _ in range(S.MAX_STEPS):
        distances.append(c.handle_distance())
        a = expert.act(env)
        state = step(state, jnp.asarray([a[k] for k in S.ACTION_NAMES]))
        _, reward, *_ = env.step(a)
        worst = max(worst, float(np.max(np.abs(np.asarray(state.obs) - c.flat_obs()))))
        assert abs(float(state.reward) - reward) < TOL
        metric += float(state.metrics["min_handle_to_target"])
    assert worst < TOL
    assert abs(metric - min(distances)) < TOL  # the telescoping sum is the episode's minimum
    assert metric < 0.01 and float(state.done) == 0.0


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_mjx_reset_draws_doors_in_range_and_packs_obs_in_schema_order(mjx_env):
    import jax

    e, _, _, reset = mjx_env
    assert (e.observation_size, e.action_size, e.backend) == (16, 3, "mjx")
    doors = []
    for k in range(3):
        state = reset(jax.random.PRNGKey(k))
        obs = S.unpack_obs(np.asarray(state.obs))
        np.testing.assert_array_equal(obs["hand"], obs["prev_hand"])
        np.testing.assert_allclose(obs["hand"], S.HAND_START, atol=1e-6)
        door = np.asarray(state.pipeline_state.mocap_pos[0])
        np.testing.assert_allclose(obs["goal"], S.goal_of(door), atol=1e-6)
        assert np.all(door >= S.DOOR_LO - 1e-6) and np.all(door <= S.DOOR_HI + 1e-6)
        doors.append(door)
    assert len({tuple(d) for d in doors}) == 3

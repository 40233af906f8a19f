"""The Meta-World door environment ("polc/DoorOpen-v0"), its expert and its metric.

Observations named and shaped as the schema says and inside its ranges over
whole episodes (and for every door angle), one configuration per seed and
evaluation seeds disjoint from demonstration seeds, metaworld's scripted expert
opening the door (its min handle-to-target distance is small), the metric and
Meta-World's success flag as `polc eval --env door` reports them, and
`polc check --env door` on the example.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from polc.cli import main
from polc.runtime import envs
from polc.runtime.envs.door import (DOOR, DOOR_METRIC, GOAL_OFFSET, HANDLE_HI, HANDLE_LO, handle_to_target,
                                    observe, raw_action)
from polc.runtime.envs.metric import RETURN
from polc.runtime.trace.evaluate import eval_seeds

SPEC = envs.get("door")
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "examples", "door")
INITIAL = os.path.join(EXAMPLES, "initial.pol")
DEMO = os.path.join(EXAMPLES, "demo.parquet")
NAMES = ["hand", "grip", "handle", "handle_quat", "prev_hand", "prev_grip", "prev_handle", "prev_handle_quat",
         "goal"]


@pytest.fixture(scope="module")
def env():
    e = SPEC.make()
    yield e
    e.close()


def check_obs(obs: dict, space) -> None:
    assert list(obs) == NAMES
    for f in DOOR.obs:
        x = obs[f.name]
        assert isinstance(x, np.ndarray) and x.dtype == np.float32 and x.shape == f.shape, f.name
        assert np.all(x.astype(np.float64) >= f.lo) and np.all(x.astype(np.float64) <= f.hi), (f.name, x)
    assert space.contains(obs)


def expert_episode(env, seed: int) -> tuple[dict, list]:
    """Columns obs.* (T, ...) of one expert episode, and its infos."""
    obs, info = env.reset(seed=seed)
    expert = SPEC.expert(env)
    expert.reset()
    rows, infos, done = [], [info], False
    while not done:
        rows.append(obs)
        obs, _, term, trunc, info = env.step(expert.act(env))
        infos.append(info)
        done = term or trunc
    return {f"obs.{k}": np.stack([r[k] for r in rows]) for k in NAMES}, infos


def test_schema_is_the_papers_layout_with_the_examples_names():
    assert [f.name for f in DOOR.obs] == NAMES
    assert {f.name: f.shape for f in DOOR.obs} == {
        "hand": (3,), "grip": (), "handle": (3,), "handle_quat": (4,), "prev_hand": (3,), "prev_grip": (),
        "prev_handle": (3,), "prev_handle_quat": (4,), "goal": (3,)}
    assert [(f.name, f.shape, f.lo, f.hi) for f in DOOR.actions] == [
        (n, (), -1.0, 1.0) for n in ("dx", "dy", "dz", "grab")]
    assert all(f.doc for f in DOOR.obs + DOOR.actions)
    assert SPEC.max_steps == 500 and DOOR.env_id == "polc/DoorOpen-v0"


def test_polc_check_accepts_the_example_against_the_door(capsys):
    assert main(["check", "--env", "door", INITIAL]) == 0
    out, err = capsys.readouterr()
    assert "0 warnings" in out + err and "error" not in (out + err).lower()


def test_random_actions_keep_observations_in_the_schema_for_500_steps(env):
    obs, _ = env.reset(seed=3)
    assert env.spec.max_episode_steps == 500
    rng = np.random.default_rng(0)
    steps, done = 0, False
    while not done:
        check_obs(obs, env.observation_space)
        a = rng.uniform(-1, 1, 4)
        obs, _, term, trunc, _ = env.step(dict(zip(("dx", "dy", "dz", "grab"), a)))
        done, steps = term or trunc, steps + 1
        assert not term
    check_obs(obs, env.observation_space)
    assert steps == 500


def test_previous_step_fields_are_the_last_steps_fields(env):
    obs, _ = env.reset(seed=4)
    for k in ("hand", "grip", "handle", "handle_quat"):
        assert np.array_equal(obs[k], obs["prev_" + k])  # right after a reset
    before = obs
    obs, *_ = env.step({"dx": 1.0, "dy": 0.0, "dz": -1.0, "grab": 1.0})
    for k in ("hand", "grip", "handle", "handle_quat"):
        assert np.array_equal(obs["prev_" + k], before[k])
    assert obs["hand"][0] > before["hand"][0] and obs["hand"][2] < before["hand"][2]  # +x, -z as asked


def test_handle_stays_in_its_range_at_every_door_angle_and_position(env):
    """The range is geometric: every configuration corner, the hinge swept past its limits."""
    sim = env.unwrapped.sim
    space = sim._random_reset_space
    for corner in ([0, 0], [0, 1], [1, 0], [1, 1]):
        env.reset(seed=0)
        sim._last_rand_vec = np.where(corner + [0], space.high, space.low)
        flat, _ = sim.reset()
        for angle in np.linspace(-2.2, 0.2, 25):
            sim._set_obj_xyz(np.array(angle))
            h = sim.data.geom("handle").xpos
            assert np.all(h >= HANDLE_LO + 0.02) and np.all(h <= HANDLE_HI - 0.02), (corner, angle, h)


def test_seeds_select_configurations_deterministically(env):
    a, _ = SPEC.make(seed=7).reset()
    b, _ = env.reset(seed=7)
    for k in NAMES:
        assert np.array_equal(a[k], b[k])
    door = env.unwrapped.door_position
    space = env.unwrapped.sim._random_reset_space
    assert np.array_equal(door, np.random.default_rng(7).uniform(space.low, space.high))  # the documented map
    assert np.allclose(b["goal"], door + GOAL_OFFSET)
    c, _ = env.reset(seed=8)
    assert not np.array_equal(c["handle"], b["handle"]) and not np.array_equal(c["goal"], b["goal"])
    np.testing.assert_array_equal(b["hand"], c["hand"])  # the hand always starts at the same place


def test_evaluation_configurations_are_disjoint_from_demonstration_ones(env):
    seeds = eval_seeds(SPEC, 10)
    assert seeds == list(range(10_000, 10_010)) and not set(seeds) & set(SPEC.demo_seeds)
    space = env.unwrapped.sim._random_reset_space

    def door(seed: int) -> tuple:
        return tuple(np.random.default_rng(seed).uniform(space.low, space.high))

    demo_doors = {door(s) for s in SPEC.demo_seeds}
    assert len(demo_doors) == 1000 and not {door(s) for s in seeds} & demo_doors
    env.reset(seed=10_000)
    assert tuple(env.unwrapped.door_position) == door(10_000)


def test_gymnasium_env_checker_passes():
    from gymnasium.utils.env_checker import check_env

    check_env(SPEC.make().unwrapped, skip_render_check=True)


def test_actions_are_clipped_and_named():
    assert list(raw_action({"dx": 2, "dy": -3, "dz": 0.5, "grab": np.float32(1)})) == [1.0, -1.0, 0.5, 1.0]
    with pytest.raises(KeyError, match="dx, dy, dz, grab; missing 'grab'"):
        raw_action({"dx": 0, "dy": 0, "dz": 0})


def test_observe_splits_metaworlds_vector_in_the_papers_order():
    flat = np.arange(39) / 100.0
    obs = observe(flat)
    assert obs["hand"].tolist() == pytest.approx([0.0, 0.01, 0.02])
    assert float(obs["grip"]) == pytest.approx(0.03)
    assert obs["handle"].tolist() == pytest.approx([0.04, 0.05, 0.06])
    assert obs["handle_quat"].tolist() == pytest.approx([0.07, 0.08, 0.09, 0.10])
    assert obs["prev_hand"].tolist() == pytest.approx([0.18, 0.19, 0.20])
    assert float(obs["prev_grip"]) == pytest.approx(0.21)
    assert obs["prev_handle"].tolist() == pytest.approx([0.22, 0.23, 0.24])
    assert obs["goal"].tolist() == pytest.approx([0.36, 0.37, 0.38])


def test_expert_opens_the_door_and_the_metric_says_so(env):
    columns, infos = expert_episode(env, 10_000)
    d = handle_to_target(columns)
    assert len(d) == 500 and d[0] == pytest.approx(0.547, abs=0.01)  # a closed door
    assert DOOR_METRIC.of_episode(columns) == pytest.approx(d.min()) and d.min() < 0.05
    # the metric's per-step values are the env's own info["handle_to_target"] of the same states
    np.testing.assert_allclose(d, [i["handle_to_target"] for i in infos[:500]], atol=1e-6)
    assert env.unwrapped.sim.data.joint("doorjoint").qpos[0] < -1.0  # swung open (rad)


def test_metrics_of_the_registered_environments():
    assert SPEC.metric is DOOR_METRIC and not DOOR_METRIC.higher_is_better and not DOOR_METRIC.is_return
    assert envs.get("car_racing").metric is RETURN and RETURN.higher_is_better and RETURN.is_return
    assert RETURN.of_episode({"reward": np.array([1.0, 2.5])}) == 3.5


def test_shipped_demonstration_is_one_expert_episode_from_seed_0():
    from polc.runtime.io.table import read_table

    assert os.path.getsize(DEMO) < 200_000
    t = read_table(DEMO)
    assert t.metadata["seeds"] == [0] and t.metadata["env"]["id"] == DOOR.env_id and t.num_rows == 500
    assert "polc demos door --episodes 1 --seed 0" in t.metadata["command"]
    columns = {c: t.column(c) for c in ("obs.handle", "obs.goal")}
    assert DOOR_METRIC.of_episode(columns) < 0.05
    assert np.all(t.column("action.grab") == 1.0)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_polc_eval_reports_the_door_metric(tmp_path, capsys):
    pol = tmp_path / "still.pol"  # a policy that never moves: the door stays shut
    pol.write_text(Path(INITIAL).read_text().replace("clip(move[0], -1, 1)", "0").replace(
        "clip(move[1], -1, 1)", "0").replace("clip(move[2], -1, 1)", "0"))
    code = main(["eval", str(pol), "--env", "door", "--seeds", "1", "--n-envs", "1", "--json", "-q"])
    out, _ = capsys.readouterr()
    assert code == 0
    doc = json.loads(out)
    assert doc["metric"] == "min_handle_to_target" and doc["higher_is_better"] is False
    assert doc["per_seed"][0]["seed"] == 10_000 and doc["per_seed"][0]["steps"] == 500
    assert doc["mean"] == doc["per_seed"][0]["min_handle_to_target"] == pytest.approx(0.547, abs=0.01)
    assert doc["success_rate"] == 0.0 and doc["per_seed"][0]["success"] is False  # a shut door never succeeds


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_polc_eval_reports_metaworlds_success_flag_of_each_episode(env, capsys):
    assert SPEC.success == "success"
    assert main(["eval", "--expert", "--env", "door", "--seeds", "2", "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr()[0])
    by_hand = [any(i.get("success") for i in expert_episode(env, s)[1]) for s in (10_000, 10_001)]
    assert [r["success"] for r in doc["per_seed"]] == by_hand == [True, True]
    assert doc["success_rate"] == 1.0


@pytest.mark.slow
def test_expert_and_fitted_example_over_ten_unseen_seeds(tmp_path, capsys):
    """The README's numbers: the expert near 0.022 m; the fitted initial structure
    does not open the door (about 0.54 m, the paper's initial structure: 0.548).

    The fit is written as fitted (`--check-episodes 0`): with its closed-loop check, `polc fit`
    keeps the declared weights instead (0.22 on its training seeds against the fit's 0.54), so
    this test had been evaluating those, not the fit it names, and spent ten more door episodes
    on the check."""
    assert main(["eval", "--expert", "--env", "door", "--seeds", "10", "--json", "-q"]) == 0
    expert = json.loads(capsys.readouterr()[0])
    assert expert["episodes"] == 10 and expert["mean"] < 0.03
    params = str(tmp_path / "door.params")
    assert main(["fit", INITIAL, "--demos", DEMO, "-o", params, "--check-episodes", "0", "-q"]) == 0
    capsys.readouterr()
    assert main(["eval", INITIAL, "--params", params, "--env", "door", "--seeds", "10", "--json", "-q"]) == 0
    fitted = json.loads(capsys.readouterr()[0])
    assert expert["mean"] < 0.5 < fitted["mean"] <= 0.56  # the fit (0.5444 here); the declared weights score 0.2275

"""`polc demos ENV --from-minari DATASET` (issue 13): a Minari dataset the test records
itself (no download) becomes a demonstration whose observations and actions carry the
schema's names, for a flat-Box env through its schema file and for a Dict env."""

from __future__ import annotations

import warnings

import gymnasium as gym
import minari
import numpy as np
import pytest

from polc.runtime.io.table import read_table
from test_gym_env import DICT_ENV, FLAT_ENV, SCHEMA
from toy_cli import polc

# Minari 0.5.4's DataCollector removes its TemporaryDirectory with shutil.rmtree and never calls
# cleanup(), so the object warns when collected; the directory is gone either way.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning",
                                        "ignore:Implicitly cleaning up:ResourceWarning")


@pytest.fixture
def datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    return tmp_path


def record(env_id: str, dataset_id: str, episodes: int = 2, steps: int = 15):
    """Random pushes for `steps` steps per episode, recorded with Minari's own collector."""
    env = minari.DataCollector(gym.make(env_id, max_episode_steps=steps), data_format="arrow")  # pyarrow: no h5py
    for k in range(episodes):
        env.reset(seed=k)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    with warnings.catch_warnings():  # Minari's advice on metadata a test dataset does not need
        warnings.simplefilter("ignore", UserWarning)
        dataset = env.create_dataset(dataset_id=dataset_id, algorithm_name="random")
    env.close()
    return dataset


def test_a_flat_box_dataset_is_named_by_the_schema_file(datasets, capsys):
    schema = datasets / "flat.toml"
    schema.write_text(SCHEMA)
    dataset = record("gym_test_envs:FlatReach-v0", "polc/flat-reach-v0")
    out = str(datasets / "demo.parquet")
    code, _, err = polc(capsys, "demos", FLAT_ENV, "--schema", str(schema), "--from-minari", "polc/flat-reach-v0",
                        "-o", out)
    assert code == 0, err
    table = read_table(out)
    episodes = list(dataset.iterate_episodes())
    assert table.metadata["source"] == {"minari": "polc/flat-reach-v0"}
    assert table.num_rows == sum(len(ep.actions) for ep in episodes)
    first = episodes[0]
    n = len(first.actions)
    assert np.allclose(table.column("obs.pos")[:n], first.observations[:n, 0])
    assert np.allclose(table.column("obs.target")[:n], np.clip(first.observations[:n, 2], -1, 1))
    assert np.allclose(table.column("action.push")[:n], first.actions[:, 0])
    assert np.allclose(table.column("reward")[:n], first.rewards)


def test_a_dict_dataset_is_named_by_its_keys(datasets, capsys):
    record("gym_test_envs:DictReach-v0", "polc/dict-reach-v0")
    out = str(datasets / "demo.parquet")
    code, _, err = polc(capsys, "demos", DICT_ENV, "--from-minari", "polc/dict-reach-v0", "-o", out)
    assert code == 0, err
    assert set(read_table(out).names("obs")) == {"pos", "vel", "target"}


def test_a_missing_dataset_is_a_usage_error_that_lists_the_local_ones(datasets, capsys):
    record("gym_test_envs:DictReach-v0", "polc/dict-reach-v0")
    code, _, err = polc(capsys, "demos", DICT_ENV, "--from-minari", "polc/nothing-v0", "-o",
                        str(datasets / "d.parquet"))
    assert code == 2 and "no local Minari dataset 'polc/nothing-v0'" in err and "polc/dict-reach-v0" in err
    assert not (datasets / "d.parquet").exists()

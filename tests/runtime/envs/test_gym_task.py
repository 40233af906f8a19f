"""Starting a task on a gymnasium environment: `polc schema` (a starter .pol that
checks against the env, or a starter schema file) and `polc init-task` (a task
folder that never overwrites a file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from polc.runtime.envs.gym_env import resolve
from toy_cli import polc

FLAT_ENV = "gym:gym_test_envs:FlatReach-v0"
DICT_ENV = "gym:gym_test_envs:DictReach-v0"


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_schema_writes_a_starter_pol_that_checks_and_fits(tmp_path, capsys):
    pol, demo, params = (str(tmp_path / n) for n in ("starter.pol", "demo.parquet", "fit.params"))
    assert polc(capsys, "schema", DICT_ENV, "-o", pol)[0] == 0
    text = Path(pol).read_text()
    assert "obs vel    : real " in text and "obs pos    : real in [-3, 3]" in text
    assert "action push : real in [-1, 1] = clip(lin_push, -1, 1)" in text
    code, _, err = polc(capsys, "check", "--env", DICT_ENV, pol)
    assert code == 0 and "0 warnings" in err
    assert polc(capsys, "demos", DICT_ENV, "--expert", "gym_test_envs:expert", "--episodes", "2", "-o", demo,
                "-q")[0] == 0
    assert polc(capsys, "fit", pol, "--demos", demo, "--env", DICT_ENV, "-o", params, "--epochs", "50",
                "--restarts", "1", "-q")[0] == 0


def test_schema_toml_is_a_starter_schema_file(tmp_path, capsys):
    code, out, _ = polc(capsys, "schema", FLAT_ENV, "--toml")
    assert code == 0 and out.startswith(f'env = "{FLAT_ENV}"') and "[obs.o3]\nindex = 3\nrange = [0, 10]" in out
    (tmp_path / "env.toml").write_text(out)
    assert [f.name for f in resolve(str(tmp_path / "env.toml")).schema.actions] == ["a0"]


def test_init_task_writes_a_folder_and_never_overwrites(tmp_path, capsys):
    d = tmp_path / "task"
    code, _, err = polc(capsys, "init-task", FLAT_ENV, "-o", str(d), "--env-kwargs", '{"gain": 3.0}')
    assert code == 0 and "rename and document the components" in err
    assert sorted(p.name for p in d.iterdir()) == ["env.toml", "initial.pol", "task.md"]
    assert "[kwargs]\ngain = 3.0" in (d / "env.toml").read_text()
    assert resolve(str(d / "env.toml")).source.kwargs == (("gain", 3.0),)
    assert polc(capsys, "check", "--env", str(d / "env.toml"), str(d / "initial.pol"))[0] == 0
    assert "## Observations" in (d / "task.md").read_text()
    before = (d / "initial.pol").read_text()
    code, _, err = polc(capsys, "init-task", FLAT_ENV, "-o", str(d))
    assert code == 2 and "exists; init-task never overwrites a file" in err
    assert (d / "initial.pol").read_text() == before


def test_init_task_with_a_schema_file_keeps_its_names(tmp_path, capsys):
    from test_gym_env import SCHEMA

    schema = tmp_path / "mine.toml"
    schema.write_text(SCHEMA.replace('env = "gym:gym_test_envs:FlatReach-v0"\n', ""))
    d = tmp_path / "t"
    assert polc(capsys, "init-task", FLAT_ENV, "--schema", str(schema), "-o", str(d))[0] == 0
    assert (d / "env.toml").read_text().startswith(f'env = "{FLAT_ENV}"')
    assert "obs target : real in [-1, 1]" in (d / "initial.pol").read_text()


def test_init_task_refuses_a_built_in_env_and_a_bad_schema_writes_nothing(tmp_path, capsys):
    code, _, err = polc(capsys, "init-task", "car_racing", "-o", str(tmp_path / "a"))
    assert code == 2 and "starts a task on a gym:ID environment" in err
    bad = tmp_path / "bad.toml"
    bad.write_text("[obs.x]\nindex = 99\n[actions.push]\nindex = 0\n")
    code, _, err = polc(capsys, "init-task", FLAT_ENV, "--schema", str(bad), "-o", str(tmp_path / "b"))
    assert code == 2 and "line 2" in err and not (tmp_path / "b").exists()


def test_a_task_folder_with_env_toml_needs_no_env_flag(tmp_path, capsys):
    """`polc refine DIR/` on what init-task wrote finds DIR/env.toml itself."""
    from polc.runtime.task import load_task

    d = tmp_path / "t"
    assert polc(capsys, "init-task", FLAT_ENV, "-o", str(d))[0] == 0
    (d / "demo.parquet").write_bytes(b"")  # load_task only needs it to exist
    assert load_task(str(d)).env == str(d / "env.toml")
    assert load_task(str(d), env="other").env == "other"


def test_the_starter_leaves_out_an_observation_that_echoes_an_action(tmp_path, capsys):
    pol = str(tmp_path / "starter.pol")
    assert polc(capsys, "schema", "car_racing", "-o", pol)[0] == 0
    text = Path(pol).read_text()
    assert "# obs steer_ind is left out: it echoes steer, so a fit would copy the last action (W0509" in text
    assert "obs steer_ind" not in text.replace("# obs steer_ind", "") and "* steer_ind" not in text
    code, _, err = polc(capsys, "check", "--env", "car_racing", pol)
    assert code == 0 and "0 warnings" in err


def test_the_starter_connects_every_observation_element_to_every_action_element():
    """Reacher-v5's shapes: each torque element is its own linear function of every element of
    every observation (one named weight per pair), so fitting can learn a linear policy; an
    image-sized observation enters by its mean instead of thousands of weights."""
    import jax
    import numpy as np

    import polc
    from polc.runtime.envs.schema import EnvSchema, Field
    from polc.runtime.envs.starter import starter_pol

    schema = EnvSchema("reacher", "Reacher-v5", "1",
                       (Field("qvel", (2,), -100, 100, "joint velocities"), Field("dist", (), 0, 1, "distance"),
                        Field("pixels", (16, 8), 0, 1, "an image")),
                       (Field("torque", (2,), -1, 1, "joint torques"), Field("grip", (), 0, 1, "grip")))
    text = starter_pol(schema, "env.toml")
    for line in ['weight w_torque_qvel   : real[2, 2] = 0 "torque[i] per unit of qvel[j], element [i, j]"',
                 'weight w_torque_dist   : real[2]    = 0 "torque[i] per unit of dist, element [i]"',
                 'weight w_torque_pixels : real[2]    = 0 "torque[i] per unit of the mean of pixels, element [i]"',
                 'weight w_grip_qvel   : real[2] = 0   "grip per unit of qvel[j], element [j]"',
                 'weight w_grip_dist   : real    = 0   "grip per unit of dist"']:
        assert line in text, text
    assert "sum(w_torque_qvel * qvel; axis = 1)" in text and "sum(w_grip_qvel * qvel)" in text
    assert polc.fmt.format_text(text) == text  # laid out as polc fmt writes it
    policy = polc.loads(text, "starter.pol").compile()
    params = policy.init(jax.random.PRNGKey(0))
    w = np.array([[0.1, -0.2], [0.3, 0.05]], np.float32)
    params = {**params, "w_torque_qvel": w, "w_torque_dist": np.array([0.2, -0.1], np.float32)}
    obs = {"qvel": np.array([1.0, -2.0], np.float32), "dist": np.float32(0.5), "pixels": np.zeros((16, 8), np.float32)}
    mean, latents = policy.apply(params, obs)
    expected = w @ obs["qvel"] + np.array([0.2, -0.1]) * 0.5
    assert np.allclose(np.asarray(latents["lin_torque"]), expected, atol=1e-6)

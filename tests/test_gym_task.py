"""Starting a task on a gymnasium environment: `polc schema` (a starter .pol that
checks against the env, or a starter schema file) and `polc init-task` (a task
folder that never overwrites a file)."""

from __future__ import annotations

from pathlib import Path

from polc.runtime.envs.gym_env import resolve
from toy_cli import polc

FLAT_ENV = "gym:gym_test_envs:FlatReach-v0"
DICT_ENV = "gym:gym_test_envs:DictReach-v0"


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
    from polc.runtime.refine.loop import load_task

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

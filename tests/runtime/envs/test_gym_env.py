"""Any Gymnasium environment through polc (issue 13): an environment defined
here in the tests (never registered by polc) with Dict spaces, the same one
behind flat Boxes with a schema file, every schema-file error, and user experts
(one that works, one that raises, one that forgets an action)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from polc.runtime import envs
from polc.runtime.envs.errors import SchemaFileError
from polc.runtime.envs.gym_env import resolve
from polc.runtime.io.table import read_table
from toy_cli import polc

DICT_ENV = "gym:gym_test_envs:DictReach-v0"
FLAT_ENV = "gym:gym_test_envs:FlatReach-v0"

POLICY = '''policy reach "PD control of a point mass"
obs pos    : real in [-3, 3] "position"
obs vel    : real            "velocity"
obs target : real in [-1, 1] "target position"
weight kp : real >= 0 = 0.5 "push per unit of distance"
weight kd : real >= 0 = 0.2 "damping"
weight s  : real in [0.01, 1] = 0.3
latent err = target - pos "distance to go"
action push : real in [-1, 1] = kp * err - kd * vel ~ normal(std = s)
'''

SCHEMA = '''env = "gym:gym_test_envs:FlatReach-v0"
[obs.pos]
index = 0
doc = "position"
[obs.vel]
index = 1
doc = "velocity"
unit = "m/s"
[obs.target]
index = 2
range = [-1, 1]
[actions.push]
index = 0
'''


@pytest.fixture
def pol(tmp_path):
    path = tmp_path / "reach.pol"
    path.write_text(POLICY)
    return str(path)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_dict_space_env_goes_through_every_command(tmp_path, pol, capsys):
    demo, params, trace = (str(tmp_path / n) for n in ("demo.parquet", "fit.params", "trace.parquet"))
    assert polc(capsys, "check", "--env", DICT_ENV, pol)[0] == 0
    code, _, err = polc(capsys, "demos", DICT_ENV, "--expert", "gym_test_envs:expert", "--episodes", "4",
                        "-o", demo, "-q")
    assert code == 0 and "4 episode(s), 160 steps" in err
    t = read_table(demo)
    assert t.metadata["env"]["name"] == DICT_ENV and t.metadata["env"]["id"] == "gym_test_envs:DictReach-v0"
    assert "--expert gym_test_envs:expert" in t.metadata["command"]
    np.testing.assert_allclose(t.column("action.push"), np.clip(
        1.5 * (t.column("obs.target") - t.column("obs.pos")) - t.column("obs.vel"), -1, 1), atol=1e-6)

    code, _, _ = polc(capsys, "fit", pol, "--demos", demo, "--env", DICT_ENV, "-o", params, "--epochs", "300",
                      "--restarts", "1", "--lr", "0.05", "--prior-scale", "inf", "--check-episodes", "0", "-q")
    w = json.loads(Path(params).read_text())["weights"]
    assert code == 0 and w["kp"] == pytest.approx(1.5, rel=0.1) and w["kd"] == pytest.approx(1.0, rel=0.15)

    code, _, err = polc(capsys, "rollout", pol, "--params", params, "--env", DICT_ENV, "--episodes", "2",
                        "-o", trace, "-q")
    assert code == 0 and {"latent.err", "obs.vel", "action.push"} <= set(read_table(trace).columns)
    code, out, _ = polc(capsys, "eval", pol, "--params", params, "--env", DICT_ENV, "--seeds", "3", "--json")
    result = json.loads(out)
    assert code == 0 and [r["seed"] for r in result["per_seed"]] == [10_000, 10_001, 10_002]


def test_a_flat_box_env_with_a_schema_file(tmp_path, pol, capsys):
    schema, demo = tmp_path / "flat.toml", str(tmp_path / "demo.parquet")
    schema.write_text(SCHEMA)
    spec = resolve(FLAT_ENV, schema=str(schema))
    assert [f.name for f in spec.schema.obs] == ["pos", "vel", "target"]  # the gain (index 3) is left out
    vel = spec.schema.obs_field("vel")
    assert vel.lo == -np.inf and vel.hi == np.inf and vel.doc == "velocity [m/s]"
    assert polc(capsys, "check", "--env", str(schema), pol)[0] == 0
    code, _, err = polc(capsys, "demos", FLAT_ENV, "--schema", str(schema), "--expert", "gym_test_envs:raw_expert",
                        "--episodes", "2", "-o", demo, "-q")
    assert code == 0 and "2 episode(s), 80 steps" in err  # an expert that returns the env's own array
    t = read_table(demo)
    assert t.metadata["env"]["schema_file"] == str(schema.resolve()) and t.names("action") == ["push"]
    # the env.toml beside the .pol file is the schema when no --schema is given
    (tmp_path / "env.toml").write_text(SCHEMA)
    code, out, _ = polc(capsys, "eval", pol, "--env", FLAT_ENV, "--seeds", "2", "--json")
    assert code == 0 and len(json.loads(out)["per_seed"]) == 2


def test_env_kwargs_reach_gymnasium_make(tmp_path, capsys):
    schema = tmp_path / "flat.toml"
    schema.write_text(SCHEMA + '[obs.gain]\nindex = 3\n')
    demo = str(tmp_path / "d.parquet")
    code, _, _ = polc(capsys, "demos", FLAT_ENV, "--schema", str(schema), "--env-kwargs", '{"gain": 3.5}',
                      "--expert", "gym_test_envs:expert", "-o", demo, "-q")
    t = read_table(demo)
    assert code == 0 and np.all(t.column("obs.gain") == 3.5) and t.metadata["env"]["kwargs"] == {"gain": 3.5}
    code, _, err = polc(capsys, "demos", FLAT_ENV, "--schema", str(schema), "--env-kwargs", "{gain: 1}",
                        "--expert", "gym_test_envs:expert", "-o", demo, "-q")
    assert code == 2 and "--env-kwargs is not valid JSON" in err


def test_a_flat_box_without_a_schema_prints_a_starter_file(tmp_path, capsys):
    code, _, err = polc(capsys, "demos", FLAT_ENV, "--expert", "gym_test_envs:expert", "-o",
                        str(tmp_path / "d.parquet"))
    assert code == 2 and "has a flat observation space" in err and "--schema FILE.toml" in err
    starter = err[err.index('env = "'):]
    (tmp_path / "starter.toml").write_text(starter)  # the starter file is itself a valid schema
    spec = resolve(str(tmp_path / "starter.toml"))
    assert [f.name for f in spec.schema.obs] == ["o0", "o1", "o2", "o3"] and spec.schema.actions[0].name == "a0"


@pytest.mark.parametrize("edit, line, message", [
    (("doc = \"position\"", "doc = \"position\"\nshape = 3"), 5, 'unknown key "shape" in [obs.pos]'),
    (("[obs.target]\nindex = 2", "[obs.target]\nindex = [1, 3]"), 10, "[obs.target] overlaps [obs.vel] at component 1"),
    (("[obs.target]\nindex = 2", "[obs.target]\nindex = 7"), 10, "index 7 is out of bounds"),
    (("[actions.push]\nindex = 0\n", ""), None, "it declares no actions"),
    (("[obs.vel]", "[obs.if]"), 5, '"if" is not a valid Pol name'),
    (("[obs.vel]", "[obs.2vel]"), 5, '"2vel" is not a valid Pol name'),
    (("range = [-1, 1]", "range = [1, -1]"), 11, "range of [obs.target] must be [lo, hi] with lo < hi"),
    (("[actions.push]\nindex = 0", "[actions.push]\nindex = 0\nrange = [-2, 2]"), 14,
     "range [-2, 2] is not inside the bounds [-1, 1]"),
    (("env =", "env ="), None, None),  # the unedited file is fine
    (("unit = \"m/s\"", "unit = \"m/s\"\nechoes = \"pull\""), 9,
     '[obs.vel] echoes "pull", which is not an action of this file; its actions are push'),
    (("unit = \"m/s\"", "unit = \"m/s\"\nechoes = 3"), 9, "echoes of [obs.vel] must name an action"),
    (("[actions.push]\nindex = 0", "[actions.push]\nindex = 0\nechoes = \"push\""), 14,
     "echoes belongs in an [obs] table"),
    (("index = 0\ndoc", "index = 0\ndoc = = 1\n"), 4, "not valid TOML"),
])
def test_schema_file_errors_name_the_line(tmp_path, edit, line, message):
    path = tmp_path / "bad.toml"
    path.write_text(SCHEMA.replace(*edit, 1))
    if message is None:
        assert resolve(str(path)).schema.actions[0].name == "push"
        return
    with pytest.raises(SchemaFileError) as e:
        resolve(str(path))
    assert message in str(e.value) and e.value.line == line
    assert str(e.value).startswith(f"{path}, line {line}:" if line else f"{path}:")


def test_an_echo_declared_in_the_schema_file_reaches_polc_check(tmp_path, pol, capsys):
    """`echoes = "push"` on [obs.vel]: the schema carries it, and `polc check --env` warns
    (W0509) at the read of vel in push's mean."""
    path = tmp_path / "echo.toml"
    path.write_text(SCHEMA.replace('unit = "m/s"', 'unit = "m/s"\nechoes = "push"'))
    assert resolve(str(path)).schema.echoes() == {"vel": ("push",)}
    code, _, err = polc(capsys, "check", "--env", str(path), pol)
    assert code == 0 and "W0509" in err and 'The action "push" depends on the observation "vel"' in err
    assert "- kd * vel ~ normal" in err and 'constrain "kd"' in err


def test_an_action_component_without_a_field_is_an_error(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(SCHEMA.replace("gym_test_envs:FlatReach-v0", "LunarLanderContinuous-v3"))
    with pytest.raises(SchemaFileError, match=r"no action covers component\(s\) \[1\]"):
        resolve(str(path))


def test_schema_errors_are_clear_cli_errors_and_check_diagnostics(tmp_path, pol, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(SCHEMA.replace("index = 2", "index = 9"))
    code, _, err = polc(capsys, "demos", FLAT_ENV, "--schema", str(bad), "-o", str(tmp_path / "d.parquet"))
    assert code == 2 and f"polc: {bad}, line 10: [obs.target] index 9 is out of bounds" in err
    code, _, err = polc(capsys, "check", "--env", str(bad), pol)
    assert code == 1 and "E0508" in err and "cannot be loaded" in err and "line 10" in err
    code, _, err = polc(capsys, "demos", "gym:NoSuchEnv-v9", "-o", str(tmp_path / "d.parquet"))
    assert code == 2 and 'gymnasium cannot make "NoSuchEnv-v9"' in err


@pytest.mark.parametrize("expert, code, message", [
    ("gym_test_envs:raising_expert", 1, "raised RuntimeError: the expert's sensor is unplugged (at step 0"),
    ("gym_test_envs:forgetful_expert", 1, "returned no action 'push' (it returned 'pull')"),
    ("gym_test_envs:nobody", 1, "'gym_test_envs' has no function 'nobody'"),
    ("nowhere.py:act", 1, "cannot read the expert 'nowhere.py': no such file"),
    ("act", 1, "--expert takes FILE.py:FUNCTION or MODULE:FUNCTION"),
])
def test_expert_errors(tmp_path, capsys, expert, code, message):
    out = tmp_path / "d.parquet"
    got, _, err = polc(capsys, "demos", DICT_ENV, "--expert", expert, "--episodes", "2", "-o", str(out))
    assert got == code and message in err and not out.exists()


def test_a_gym_env_without_an_expert_says_how_to_give_one(tmp_path, capsys):
    code, _, err = polc(capsys, "demos", DICT_ENV, "-o", str(tmp_path / "d.parquet"))
    assert code == 1 and "--expert FILE.py:FUNCTION" in err


def test_an_expert_from_a_file_and_the_spec_pickles(tmp_path, capsys):
    import pickle

    (tmp_path / "mine.py").write_text("def act(obs):\n    return {'push': 0.5}\n")
    demo = str(tmp_path / "d.parquet")
    code, _, _ = polc(capsys, "demos", DICT_ENV, "--expert", f"{tmp_path / 'mine.py'}:act", "-o", demo, "-q")
    assert code == 0 and np.all(read_table(demo).column("action.push") == 0.5)
    spec = envs.get(DICT_ENV)
    env = pickle.loads(pickle.dumps(spec)).make()
    obs, _ = env.reset(seed=1)
    assert set(obs) == {"pos", "vel", "target"} and env.step({"push": 1.0})[1] < 0


def test_a_schema_file_sets_the_metric_and_the_solved_threshold(tmp_path, pol, capsys):
    schema = tmp_path / "env.toml"
    schema.write_text(SCHEMA.replace('[obs.pos]', 'solved_at = -0.05\nmax_steps = 25\n[metric]\nfunction = "gym_test_envs:closeness"\n'
                                                  'reduce = "max"\nname = "closest approach"\n[obs.pos]', 1))
    spec = resolve(str(schema))
    assert spec.metric.key == "closest_approach" and spec.metric.reduce == "max" and spec.solved_at == -0.05
    assert spec.max_steps == 25  # the file's episode limit replaces the id's 40
    code, out, _ = polc(capsys, "eval", pol, "--env", str(schema), "--seeds", "2", "--json")
    result = json.loads(out)
    assert code == 0 and result["metric"] == "closest_approach"
    assert [r["steps"] for r in result["per_seed"]] == [25, 25]
    assert resolve(DICT_ENV).solved_at is None  # the test env registers no reward_threshold


@pytest.mark.parametrize("table, message", [
    ('[metric]\nreduce = "median"\n', "reduce of [metric] must be sum, min, max or mean"),
    ('[metric]\nfunction = "gym_test_envs:nothing"\n', 'the [metric] function "gym_test_envs:nothing" cannot be'),
    ('[metric]\nweight = 1\n', 'unknown key "weight" in [metric]'),
])
def test_metric_table_errors(tmp_path, table, message):
    schema = tmp_path / "env.toml"
    schema.write_text(SCHEMA + table)
    with pytest.raises(SchemaFileError, match=re.escape(message)):
        resolve(str(schema))


def test_eval_scores_a_users_expert_as_it_scores_a_policy(capsys):
    import json

    code, out, err = polc(capsys, "eval", "--expert", "gym_test_envs:expert", "--env", DICT_ENV, "--episodes", "3",
                          "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["policy"] == "expert gym_test_envs:expert"
    assert [s["seed"] for s in result["per_seed"]] == [10000, 10001, 10002]
    code, _, err = polc(capsys, "eval", "--expert", "gym_test_envs:no_such", "--env", DICT_ENV, "--episodes", "1")
    assert code in (1, 2) and "no_such" in err


def test_check_takes_the_schema_file_as_every_other_command_does(tmp_path, pol, capsys):
    """`polc check --env gym:ID --schema lander.toml P.pol`, the issue's own command."""
    schema = tmp_path / "mine.toml"  # not beside the .pol: only --schema can find it
    schema.write_text(SCHEMA)
    code, _, err = polc(capsys, "check", "--env", FLAT_ENV, "--schema", str(schema), pol)
    assert code == 0, err
    schema.write_text(SCHEMA.replace("[obs.pos]\nindex = 0", "[obs.pos]\nindex = 9"))
    code, _, err = polc(capsys, "check", "--env", FLAT_ENV, "--schema", str(schema), pol)
    assert code == 1 and "E0508" in err and "mine.toml" in err
    code, _, err = polc(capsys, "check", "--env", "car_racing", "--schema", str(schema), pol)
    assert code == 1 and "for gym:ID environments" in err
    code, _, err = polc(capsys, "check", "--env", FLAT_ENV, "--env-kwargs", "[1]", pol)
    assert code == 2 and "must be a JSON object" in err


def test_metric_flag_scores_an_episode_by_a_function_of_its_steps(pol, capsys):
    """`--metric MODULE:FUNCTION` (the issue's contract): one value per step, summed."""
    code, out, err = polc(capsys, "eval", pol, "--env", DICT_ENV, "--metric", "gym_test_envs:closeness",
                          "--episodes", "2", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["metric"] == "gym_test_envs_closeness"
    plain = json.loads(polc(capsys, "eval", pol, "--env", DICT_ENV, "--episodes", "2", "--json")[1])
    assert "metric" not in plain or plain["metric"] != result["metric"]
    code, _, err = polc(capsys, "eval", pol, "--env", DICT_ENV, "--metric", "gym_test_envs:nothing")
    assert code != 0 and "--metric gym_test_envs:nothing" in err and "cannot be loaded" in err
    code, _, err = polc(capsys, "eval", pol, "--env", "car_racing", "--metric", "gym_test_envs:closeness")
    assert code == 2 and "are for gym:ID environments" in err

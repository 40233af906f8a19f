"""Privileged observations (issue 38): a schema file's `hidden = true` field is in the
environment's observation dict, so a user's expert reads it and demonstrations and traces record
it, while a policy that declares it gets E0510 at `polc check --env` and before any rollout.
FlatReach's fourth component (`gain`) is the hidden field here."""

from __future__ import annotations

import pytest

from polc.runtime.envs.errors import SchemaFileError
from polc.runtime.envs.gym_env import resolve
from polc.runtime.envs.starter import starter_pol, task_md
from polc.runtime.io.table import read_table
from test_gym_env import POLICY, SCHEMA
from toy_cli import polc

HIDDEN = (SCHEMA.replace("FlatReach-v0\"\n", "FlatReach-v0\"\nmax_steps = 20\n")
          .replace("[actions.push]", '[obs.gain]\nindex = 3\ndoc = "actuator gain"\nhidden = true\n\n[actions.push]'))

# An expert that needs the hidden gain: the push that moves the mass by the same amount whatever
# the gain is. Without `hidden` fields it failed with a KeyError on "gain".
EXPERT = '''def act(obs):
    return {"push": float(obs["target"] - obs["pos"]) * 2.0 / float(obs["gain"])}
'''


@pytest.fixture
def task(tmp_path):
    (tmp_path / "env.toml").write_text(HIDDEN)
    (tmp_path / "reach.pol").write_text(POLICY)
    (tmp_path / "expert.py").write_text(EXPERT)
    return tmp_path


def test_a_hidden_field_is_in_the_schema_but_not_for_the_policy(task):
    schema = resolve(str(task / "env.toml")).schema
    assert [f.name for f in schema.obs] == ["pos", "vel", "target", "gain"]
    assert [f.name for f in schema.policy_obs()] == ["pos", "vel", "target"]
    assert schema.obs_field("gain").hidden and not schema.obs_field("pos").hidden


def test_a_schema_without_hidden_fields_keeps_its_version(tmp_path):
    """The version hash (in every params file and trace) is what it was before `hidden` existed."""
    path = tmp_path / "s.toml"
    path.write_text(SCHEMA)
    assert resolve(str(path)).schema.version.endswith("schema 34bfe5530018")


@pytest.mark.slow  # about 2 s on 2 shared cores (a run through the CLI)
def test_the_expert_reads_the_hidden_field_and_the_demonstration_records_it(task, capsys):
    demo = str(task / "demo.parquet")
    code, _, err = polc(capsys, "demos", str(task / "env.toml"), "--expert", f"{task / 'expert.py'}:act",
                        "--episodes", "1", "-o", demo, "-q")
    assert code == 0, err
    table = read_table(demo)
    assert "obs.gain" in table.names() and float(table.column("obs.gain")[0]) == 2.0
    assert "action.push" in table.names()


def test_a_policy_that_declares_a_hidden_field_is_refused_with_e0510(task, capsys):
    pol = task / "leak.pol"
    pol.write_text(POLICY.replace('obs target : real in [-1, 1] "target position"',
                                  'obs target : real in [-1, 1] "target position"\nobs gain : real in [0, 10]'))
    code, _, err = polc(capsys, "check", "--env", str(task / "env.toml"), str(pol))
    assert code == 1 and "Environment error [E0510]" in err and "line 5, column 5" in err and "^^^^" in err
    assert ('The observation "gain" of environment' in err and "is privileged (hidden = true): the expert and "
            "the trace see it, a policy does not." in err)
    assert 'Hint: Remove the declaration and estimate "gain" from what the policy observes: pos in [-3, 3]' in err
    # and before any rollout: eval refuses it the same way
    code, _, err = polc(capsys, "eval", str(pol), "--env", str(task / "env.toml"), "--seeds", "1")
    assert code != 0 and "E0510" in err


@pytest.mark.slow  # about 2 s on 2 shared cores (a run through the CLI)
def test_a_policy_without_the_hidden_field_runs_and_its_trace_records_it(task, capsys):
    code, _, err = polc(capsys, "check", "--env", str(task / "env.toml"), str(task / "reach.pol"))
    assert code == 0 and "E0510" not in err
    trace = str(task / "trace.parquet")
    code, _, err = polc(capsys, "rollout", str(task / "reach.pol"), "--env", str(task / "env.toml"),
                        "--episodes", "1", "-o", trace, "-q")
    assert code == 0, err
    assert "obs.gain" in read_table(trace).names()


def test_unknown_observation_lists_only_what_the_policy_may_read(task, capsys):
    pol = task / "typo.pol"
    pol.write_text(POLICY.replace("obs vel    : real", "obs velo   : real").replace("kd * vel", "kd * velo"))
    code, _, err = polc(capsys, "check", "--env", str(task / "env.toml"), str(pol))
    assert code == 1 and "E0501" in err and "It offers: pos in [-3, 3]" in err and "gain" not in err


@pytest.mark.parametrize("edit, line, message", [
    (("hidden = true", "hidden = 1"), 16, "hidden of [obs.gain] must be true or false, not 1"),
    (("[actions.push]\nindex = 0", "[actions.push]\nindex = 0\nhidden = true"), 20,
     "hidden belongs in an [obs] table (an observation only the expert and the trace see), not [actions.push]"),
    (("hidden = true", 'hidden = true\nechoes = "push"'), 16,
     "[obs.gain] is both hidden and echoes an action"),
])
def test_hidden_errors_name_the_line(tmp_path, edit, line, message):
    path = tmp_path / "bad.toml"
    path.write_text(HIDDEN.replace(*edit, 1))
    with pytest.raises(SchemaFileError) as e:
        resolve(str(path))
    assert message in str(e.value) and e.value.line == line


def test_every_observation_hidden_is_an_error(tmp_path):
    path = tmp_path / "all.toml"
    text = HIDDEN
    for name in ("pos", "vel", "target"):
        text = text.replace(f"[obs.{name}]\n", f"[obs.{name}]\nhidden = true\n")
    path.write_text(text)
    with pytest.raises(SchemaFileError, match="every observation is hidden, so a policy would see nothing"):
        resolve(str(path))


def test_starters_leave_a_hidden_field_out(task):
    schema = resolve(str(task / "env.toml")).schema
    pol = starter_pol(schema, str(task / "env.toml"))
    assert "# obs gain is left out: it is hidden (privileged" in pol and "obs gain" not in pol.replace("# obs gain", "")
    assert "gain" not in task_md(str(task / "env.toml"), schema)


def test_the_partially_observed_pendulum_refuses_the_full_pendulums_policy(capsys):
    """docs/environments.md's example: examples/pendulum/initial.pol reads th_dot, which
    examples/pendulum_partial/env.toml hides; that folder's own initial.pol checks."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "examples"
    env = str(root / "pendulum_partial" / "env.toml")
    code, _, err = polc(capsys, "check", "--env", env, str(root / "pendulum" / "initial.pol"))
    assert code == 1 and "[E0510]" in err and "line 8, column 5 to column 11" in err
    assert 'Hint: Remove the declaration and estimate "th_dot" from what the policy observes: cos_th in [-1, 1], ' \
           "sin_th in [-1, 1]." in err
    code, _, err = polc(capsys, "check", "--env", env, str(root / "pendulum_partial" / "initial.pol"))
    assert code == 0, err

"""Task files and user functions that go wrong (issue 34, item 7): each is one clear sentence and
its exit code, never a Traceback, an internal error, a silent truncation or "nan ± nan"."""

from __future__ import annotations

import re

import pytest

from polc.runtime.envs.errors import GymEnvError, SchemaFileError
from polc.runtime.envs.gym_env import resolve
from polc.runtime.envs.schema_file import read_schema_file
from test_gym_env import POLICY, SCHEMA
from toy_cli import polc

FLAT_ENV = "gym:gym_test_envs:FlatReach-v0"


@pytest.fixture
def task(tmp_path):
    (tmp_path / "reach.pol").write_text(POLICY)
    (tmp_path / "env.toml").write_text(SCHEMA)
    return tmp_path


def test_a_schema_file_nested_5000_deep_is_refused_in_one_sentence(tmp_path):
    path = tmp_path / "env.toml"
    path.write_text(SCHEMA + "deep = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SchemaFileError, match=re.escape(
            f"{path}: not a schema file: its arrays or inline tables nest too deeply for tomllib to read")):
        read_schema_file(str(path))


@pytest.mark.parametrize("steps", [0, 10 ** 18, 1_000_001])
def test_max_steps_is_bounded(tmp_path, steps):
    path = tmp_path / "env.toml"
    path.write_text(SCHEMA.replace("[obs.pos]", f"max_steps = {steps}\n[obs.pos]", 1))
    with pytest.raises(SchemaFileError, match=re.escape(
            f"{path}, line 2: max_steps must be a positive int of at most 1,000,000, not {steps}")):
        read_schema_file(str(path))


def test_a_kwarg_of_the_wrong_kind_fails_check_not_the_rollout(task, capsys):
    toml = task / "env.toml"
    toml.write_text(SCHEMA.replace("[obs.pos]", '[kwargs]\ngain = "string"\n[obs.pos]', 1))
    with pytest.raises(SchemaFileError, match=re.escape(
            f"{toml}, line 3: [kwargs] gain of gym:gym_test_envs:FlatReach-v0 must be a number (its default "
            "is 2.0), not 'string'")):
        resolve(str(toml))
    code, _, err = polc(capsys, "check", "--env", str(toml), str(task / "reach.pol"))
    assert code == 1 and "gain of gym:gym_test_envs:FlatReach-v0 must be a number" in err
    toml.write_text(SCHEMA.replace("[obs.pos]", "[kwargs]\ngain = 3\n[obs.pos]", 1))
    assert resolve(str(toml)).source.kwargs == (("gain", 3),)  # an int is a number
    with pytest.raises(GymEnvError, match=re.escape("--env-kwargs: gain of gym:gym_test_envs:FlatReach-v0 must be "
                                                    "a number (its default is 2.0), not True")):
        resolve(str(toml), kwargs={"gain": True})


@pytest.mark.parametrize("fn, message", [
    ("nan_metric", 'the metric function "gym_test_envs:nan_metric" returned nan at step 0 of an episode of 40 '
                   "steps; a score must be finite."),
    ("short_metric", 'the metric function "gym_test_envs:short_metric" returned 3 values for an episode of 40 '
                     "steps; it must return one number per step."),
    ("text_metric", "the metric function \"gym_test_envs:text_metric\" returned str 'great'; it must return one "
                    "number per step (an array of 40)."),
    ("raising_metric", 'the metric function "gym_test_envs:raising_metric" raised KeyError: \'obs.no_such\' (on an '
                       "episode of 40 steps)."),
])
def test_a_metric_that_is_not_one_finite_number_per_step_fails_the_run(task, capsys, fn, message):
    code, out, err = polc(capsys, "eval", str(task / "reach.pol"), "--env", str(task / "env.toml"), "--seeds", "1",
                          "--metric", f"gym_test_envs:{fn}")
    assert code == 1 and err.strip().endswith(message) and "nan ± nan" not in out


def test_an_expert_returning_three_values_for_a_one_value_action_is_refused(task, capsys):
    code, _, err = polc(capsys, "demos", str(task / "env.toml"), "--expert", "gym_test_envs:three_values_expert",
                        "--episodes", "1", "-o", str(task / "demo.parquet"))
    assert code == 1
    assert ("the expert gym_test_envs:three_values_expert returned ndarray array([0.5, 0. , 0. ], dtype=float32) "
            "(the env's action array has 1 values, not 3)") in err


def test_a_task_folders_own_module_is_named_before_it_is_imported(tmp_path, capsys, monkeypatch):
    """Issue 34, item 9: an env.toml can name a module of its folder (its env, its metric);
    importing it runs its code, so polc says which module and file first."""
    import sys
    import uuid

    module = f"task_env_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "import sys\nprint('MODULE CODE RAN', file=sys.stderr)\n"
        "import gymnasium\n"
        f"gymnasium.register('Local-v0', entry_point='gym_test_envs:FlatReach', max_episode_steps=40)\n")
    (tmp_path / "reach.pol").write_text(POLICY)
    (tmp_path / "env.toml").write_text(SCHEMA.replace("gym_test_envs:FlatReach-v0", f"{module}:Local-v0"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    code, _, err = polc(capsys, "check", "reach.pol")  # no --env: no environment is made
    assert code == 0 and "MODULE CODE RAN" not in err and module not in sys.modules
    code, _, err = polc(capsys, "check", "--env", "env.toml", "reach.pol")
    said = (f'polc: importing module "{module}" ({tmp_path / module}.py) for gym:{module}:Local-v0; this runs '
            "its code.")
    assert code == 0 and said in err and err.index(said) < err.index("MODULE CODE RAN")
    code, _, err = polc(capsys, "check", "--env", "env.toml", "reach.pol")
    assert code == 0 and said not in err  # once per process, and only before the import


def raising_per_step(columns: dict):
    raise KeyError("obs.no_such")


@pytest.mark.slow  # 1.5 s or more (a round is fitted before it is scored): left to the full suite
def test_a_metric_that_raises_during_refine_is_a_resumable_error_not_an_internal_one(tmp_path, capsys):
    """refine scores its rounds with the env's metric too: the same sentence, refine's exit 1."""
    from dataclasses import replace

    from refine_helpers import ANALYSIS, STOP, make_task

    from polc.cli import main
    from polc.runtime import envs
    from polc.runtime.envs import toy
    from polc.runtime.envs.metric import Metric

    envs.add(replace(toy.SPEC, schema=replace(toy.SPEC.schema, name="toy_reach_bad_metric"),
                     metric=Metric("raising", "raising", True, "raises", raising_per_step)))
    task = make_task(tmp_path / "task")
    (task / "task.md").write_text((task / "task.md").read_text().replace("env: toy_reach", "env: toy_reach_bad_metric"))
    session = tmp_path / "manual" / "replies"
    session.mkdir(parents=True)
    for i, text in enumerate([ANALYSIS, STOP]):
        (session / f"{i:03d}.md").write_text(text)
    code = main(["refine", str(task), "-o", str(tmp_path / "run"), "--llm", f"manual:{session.parent}", "--quick",
                 "-q"])
    _, err = capsys.readouterr()
    assert code == 1, err
    assert "Internal compiler error" not in err
    assert "the metric function \"raising\" raised KeyError: 'obs.no_such'" in err
    assert "polc refine --resume" in err

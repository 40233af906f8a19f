"""A validation score the model is told (issue 37, item 1): `--validation-episodes N` runs N
untraced episodes per round on seeds that are neither the demonstration's, nor the traced
training seeds, nor the final evaluation's; the prompt states their mean, spread and worst
two, metrics.json records them, seeds.json names the seeds, and they count as resets. It is on
by default (4 episodes; `--validation-episodes 0` turns it off), except when resuming a run
recorded before the setting existed."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

from refine_helpers import fits_once, task  # noqa: F401  (module fixtures)
from refine_helpers import ANALYSIS, FAST, STOP, run_loop

from polc.runtime.envs import DOOR_METRIC
from polc.runtime.envs.metric import RETURN
from polc.runtime.refine import context
from polc.runtime.refine.dialogue import validation_text
from polc.runtime.refine.record import Round
from polc.runtime.refine.work import Settings, validation_seeds


def test_validation_is_on_by_default_and_zero_turns_it_off():
    import argparse

    from polc.runtime.refine.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    assert Settings().validation_episodes == 4
    assert parser.parse_args(["refine", "examples/door"]).validation_episodes == 4
    assert parser.parse_args(["refine", "examples/door", "--validation-episodes", "0"]).validation_episodes == 0
    assert Settings(validation_episodes=0).validation_episodes == 0


def test_a_run_saved_before_the_setting_existed_resumes_without_validation():
    saved = Settings().to_json()
    assert Settings.from_json(saved).validation_episodes == 4
    assert Settings.from_json({**saved, "validation_episodes": 2}).validation_episodes == 2
    del saved["validation_episodes"]
    assert Settings.from_json(saved).validation_episodes == 0


def test_validation_seeds_skip_the_demonstrations_and_the_training_ones():
    spec = SimpleNamespace(demo_seeds=range(0, 1000))
    assert validation_seeds(spec, [0], [1, 2], 3) == [3, 4, 5]
    assert validation_seeds(spec, [0, 4], [1, 2], 3) == [3, 5, 6]


def test_the_prompt_sentence_says_which_seeds_the_spread_and_the_worst_two():
    val = {"seeds": [3, 4, 5], "returns": [900.0, 700.5, 880.0], "scores": [900.0, 700.5, 880.0],
           "mean": 826.83, "std": 89.9}
    assert validation_text(val, RETURN, "track") == (
        "On 3 validation track(s) (seeds 3, 4, 5: untraced, neither the training tracks above nor the final "
        "evaluation's) the same weights score return 826.8 ± 89.9; worst: 700.5 on seed 4, 880.0 on seed 5")
    door = {"seeds": [3, 4], "returns": [1600.2, 3751.4], "scores": [0.5337, 0.0223], "mean": 0.278, "std": 0.2557,
            "successes": [False, True]}
    assert validation_text(door, DOOR_METRIC, "door").endswith(
        "worst: 0.5337 m on seed 3, 0.0223 m on seed 4; the environment reports success on 1 of 2")


def test_earlier_rounds_keep_their_validation_score_before_and_after_each_revision():
    def val(mean):
        return {"seeds": [3, 4], "returns": [mean - 1, mean + 1], "scores": [mean - 1, mean + 1], "mean": mean,
                "std": 1.0}

    rounds = [Round(0, False, policy_name="a", rollout_seeds=[1], rollout_returns=[883.3], validation=val(907.52),
                    move={"kind": "REVISE", "changes": []}),
              Round(1, False, policy_name="b", rollout_seeds=[1], rollout_returns=[924.2], validation=val(932.0),
                    move={"kind": "STOP"})]
    lines = context.history(rounds, "analysis", RETURN, "track").splitlines()
    assert lines[1] == ('- Round 0: structure "a", return 883.3 on seed 1 on the training track(s), 907.5 ± 1.0 on '
                        'the 2 validation track(s); your move: REVISE.')
    assert lines[3] == ("  Mean return on the training track(s): 883.3 before, 924.2 after (round 1); on the "
                        "validation track(s): 907.5 before, 932.0 after.")
    assert "validation" not in context.history(rounds, "none", RETURN, "track")  # no execution feedback at all


def test_a_run_with_validation_episodes_tells_the_model_and_records_them(task, tmp_path):  # noqa: F811
    settings = dataclasses.replace(FAST, rounds=1, validation_episodes=2)
    loop, model = run_loop(task, tmp_path / "run", [ANALYSIS, STOP], settings)
    m0 = loop.history[0]
    val = m0.validation
    assert len(val["seeds"]) == 2 and not set(val["seeds"]) & set(m0.rollout_seeds)
    assert m0.resets == 2 * 1 + 2  # the traced seed, the same with the declared weights, two validation
    first = model.prompts[0][-1].text
    assert f"On 2 validation seed(s) (seeds {val['seeds'][0]}, {val['seeds'][1]}: untraced" in first
    seeds = json.loads((tmp_path / "run" / "seeds.json").read_text())
    assert seeds["validation"] == val["seeds"] and not set(seeds["validation"]) & set(seeds["eval"])

"""How later rounds' prompts summarise the earlier ones (issue 37, item 3): the move, what the
revision changed declaration by declaration, and the score before and after it, never the
model's own text cut mid-sentence."""

from __future__ import annotations

from polc.runtime.envs.metric import Metric
from polc.runtime.refine.changes import structure_changes
from polc.runtime.refine.context import history as history_text
from polc.runtime.refine.record import Round


def history(rounds, *args, current=None):
    """`context.history` of rounds written as metrics.json has them."""
    return history_text([Round.from_json(m) for m in rounds], *args,
                        current=None if current is None else Round.from_json(current))

BEFORE = '''policy car "drives"
obs speed : real in [0, 2] "speed"
weight k_gas : real >= 0 = 4 "gain"
weight k_old : real = 1
latent err = 1 - speed "speed error"
action gas : real in [0, 1] = clip(k_gas * err + 0 * k_old, 0, 1) ~ normal(std = 0.1)
expect gas decreasing in speed
'''
AFTER = '''policy car "drives, revised"
obs speed : real in [0, 2] "speed, as before"
weight k_gas : real >= 0 = 4   # a comment: no change
  "another doc: no change"
weight k_tc : real in [0, 5] = 2 ~ normal(2, 0.5) "traction"
latent err = 1 - speed "speed error"
action gas : real in [0, 1] = clip(k_gas * err - k_tc * 0.1, 0, 1) ~ normal(std = 0.1)
expect gas decreasing in speed
expect gas >= 0
'''


def test_the_changes_are_declarations_added_changed_and_removed_ignoring_layout_and_docs():
    assert structure_changes(BEFORE, AFTER) == [
        "removed weight k_old",
        "added weight k_tc: `weight k_tc : real in [0, 5] = 2 ~ normal(2, 0.5)`",
        "changed action gas: now `action gas : real in [0, 1] = clip(k_gas * err - k_tc * 0.1, 0, 1) "
        "~ normal(std = 0.1)`",
        "added `expect gas >= 0`",
    ]
    assert structure_changes(BEFORE, BEFORE) == []


def test_a_long_list_of_changes_is_cut_to_whole_lines_and_counted():
    def program(init: int) -> str:
        return "policy p\nobs x : real\n" + "".join(f"weight w{i} : real = {i + init}\n" for i in range(20)) + \
            "action a : real = x ~ normal(std = 0.1)\n"

    lines = structure_changes(program(0), program(10))
    assert len(lines) == 10 and lines[-1] == "and 11 more declarations added, changed or removed"


ROUNDS = [
    {"round": 0, "policy_name": "car", "rollout_seeds": [1, 2], "rollout_returns": [900.0, 800.0],
     "move": {"kind": "REVISE", "summary": "A long text. " * 50, "changes": ["removed weight k_old"]}, "tests": 1},
    {"round": 1, "policy_name": "car", "rollout_seeds": [1, 2], "rollout_returns": [910.0, 830.0],
     "move": {"kind": "REVISE", "summary": "...", "changes": []}},
]


def test_each_earlier_round_says_its_move_its_changes_and_the_score_before_and_after():
    current = {"round": 2, "rollout_seeds": [1, 2], "rollout_returns": [920.0, 900.0]}
    text = history(ROUNDS, "analysis", None, "track", current=current)
    assert text == (
        "Earlier rounds of this run:\n"
        '- Round 0: structure "car", return 900.0 on seed 1, 800.0 on seed 2 on the training track(s); '
        "your move: REVISE (after 1 TEST move(s)).\n"
        "  The revision changed:\n"
        "  - removed weight k_old\n"
        "  Mean return on the training track(s): 850.0 before, 870.0 after (round 1).\n"
        '- Round 1: structure "car", return 910.0 on seed 1, 830.0 on seed 2 on the training track(s); '
        "your move: REVISE.\n"
        "  The revision changed nothing in the declarations.\n"
        "  Mean return on the training track(s): 870.0 before, 910.0 after (round 2).\n")
    assert "A long text" not in text


def test_another_metric_says_its_name_and_direction_and_none_mode_shows_no_score():
    door = Metric("min handle-to-target distance", "min_dist", False, "metres", per_step=len, reduce="min", unit="m")
    rounds = [dict(ROUNDS[0], rollout_scores=[0.5, 0.3])]
    text = history(rounds, "analysis", door, "door", current={"round": 1, "rollout_seeds": [1, 2],
                                                              "rollout_returns": [1.0, 2.0],
                                                              "rollout_scores": [0.02, 0.04]})
    assert "  Mean min handle-to-target distance on the training door(s): 0.4000 before, 0.0300 after (round 1); " \
           "lower is better.\n" in text
    quiet = history(rounds, "none", door, "door")
    assert "Mean" not in quiet and "0.5" not in quiet and "  - removed weight k_old\n" in quiet


def test_a_new_policy_name_is_a_rename():
    assert structure_changes(BEFORE, BEFORE.replace("policy car", "policy car2")) == \
        ["renamed the policy car -> car2"]


def test_a_hash_inside_a_doc_string_is_not_a_comment():
    after = BEFORE.replace('"speed error"', '"speed error (# of m/s)"  # a comment')
    assert structure_changes(BEFORE, after) == []

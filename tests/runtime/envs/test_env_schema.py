"""`check_against_env`: a program's obs/action declarations against an environment's schema.

One test per diagnostic kind (E0500-E0507, W0503), each matching the message
text and the span of the offending name; the shipped Car Racing examples pass cleanly.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import polc
from polc.messages import render
from polc.runtime.envs import get, names
from polc.runtime.envs import schema
from polc.runtime.envs.schema import Field
from polc.runtime.envs import check_against_env

ROOT = Path(__file__).resolve().parents[3]
ACTIONS = """
action steer : real in [-1, 1] = 0
action gas   : real in [0, 1] = 0.5
action brake : real in [0, 1] = 0
"""


def diags(text: str, env: str = "car_racing"):
    program = polc.loads(text, "t.pol", analyze=False)
    return check_against_env(program.typed, env), program.source


def one(text: str, code: str):
    found, source = diags(text)
    assert [d.code for d in found] == [code], [render(d, source) for d in found]
    return found[0], source


def span_text(d, source: str) -> str:
    line = source.splitlines()[d.span.line - 1]
    return line[d.span.column - 1:d.span.end_column - 1]


@pytest.mark.parametrize("path", ["examples/car_racing/initial.pol", "examples/car_racing/near_expert.pol"])
def test_shipped_examples_pass_cleanly(path):
    program = polc.load(str(ROOT / path), analyze=False)
    assert check_against_env(program.typed, "car_racing") == []


def test_the_mlp_reads_the_steering_echo():
    """The paper's MLP takes steer_ind among its inputs: one W0509 at that read, for all three actions."""
    program = polc.load(str(ROOT / "examples/car_racing/mlp.pol"), analyze=False)
    found = check_against_env(program.typed, "car_racing")
    assert [d.code for d in found] == ["W0509"]
    assert span_text(found[0], program.source) == "steer_ind"
    assert found[0].message.startswith('The actions "steer", "gas" and "brake" depend on the observation "steer_ind", '
                                       'which echoes the action "steer"')
    assert "read it only through a weight with a narrow range" in found[0].hint


ECHO_OBS = "obs steer_ind : real in [-1, 1]\nobs heading_err : real\n"


def test_an_echo_read_by_its_own_action_is_warned_at_the_read():
    d, source = one(ECHO_OBS + "weight k_ind : real = 0\nlatent cmd = 0.6 * heading_err + k_ind * steer_ind\n"
                    "action steer : real in [-1, 1] = clip(cmd, -1, 1)\n"
                    "action gas : real in [0, 1] = 0.5\naction brake : real in [0, 1] = 0\n", "W0509")
    assert span_text(d, source) == "steer_ind" and d.span.line == 4
    assert d.message.startswith('The action "steer" depends on the observation "steer_ind", which echoes its own '
                                "previous value: on a clean demonstration")
    assert d.hint == ('Drop the read of "steer_ind", constrain "k_ind" (a narrow range such as `real in [-0.1, 0.1]`, '
                      'or a prior `~ normal(0, 0.05)`), or fit with recovery demonstrations '
                      '(`polc demos --perturb steer=0.2`).')


def test_an_echo_read_by_another_action_names_the_echoed_one():
    d, _ = one(ECHO_OBS + "action steer : real in [-1, 1] = 0.6 * heading_err\n"
               "action gas : real in [0, 1] = clip(0.5 - abs(steer_ind), 0, 1)\naction brake : real in [0, 1] = 0\n",
               "W0509")
    assert d.message.startswith('The action "gas" depends on the observation "steer_ind", which echoes the action "steer"')


def test_an_echo_read_only_by_a_noise_std_or_an_unused_latent_is_not_warned():
    found, _ = diags(ECHO_OBS + "latent spare = steer_ind\n"
                     "action steer : real in [-1, 1] = 0.6 * heading_err ~ normal(std = 0.05 + 0.1 * abs(steer_ind))\n"
                     "action gas : real in [0, 1] = 0.5\naction brake : real in [0, 1] = 0\n")
    assert [d.code for d in found] == ["W0109"] or all(d.code != "W0509" for d in found)


def test_check_echoes_takes_the_echoes_as_data():
    """The compiler knows no environment: the same program warns or not with the map it is given."""
    from polc.analysis.echo import check_echoes

    tp = polc.loads("obs a : real\nobs b : real\naction u : real = a + b\n", "t.pol", analyze=False).typed
    assert check_echoes(tp, {}) == [] and check_echoes(tp, {"z": ("u",)}) == []
    assert [d.code for d in check_echoes(tp, {"b": ("u",)})] == ["W0509"]


def test_a_program_matching_the_schema_exactly_passes():
    schema = get("car_racing").schema
    lines = []
    for f in schema.obs:
        dims = "" if not f.shape else "[" + ", ".join(map(str, f.shape)) + "]"
        lines.append(f"obs {f.name} : real{dims} in [{f.lo!r}, {f.hi!r}]")
    found, _ = diags("\n".join(lines) + ACTIONS)
    assert found == []


def test_unknown_environment_lists_the_known_ones():
    found, _ = diags("obs speed : real" + ACTIONS, env="car_racin")
    assert [d.code for d in found] == ["E0500"]
    assert found[0].message == 'There is no environment "car_racin". Did you mean "car_racing"?'
    assert found[0].hint == "Known environments: " + ", ".join(names()) + "."
    assert found[0].is_error


def test_missing_observation_suggests_the_nearest_and_lists_the_offer():
    d, source = one("obs spead : real in [0, 1.5]" + ACTIONS, "E0501")
    assert d.message == 'The environment "car_racing" has no observation "spead". Did you mean "speed"?'
    assert d.hint.startswith("It offers: tiles[12, 4] in [-10, 10], speed in [0, 1.5], steer_ind in [-1, 1]")
    assert span_text(d, source) == "spead"
    assert d.is_error


def test_missing_observation_without_a_near_name_still_lists_the_offer():
    d, _ = one("obs zzz : real" + ACTIONS, "E0501")
    assert d.message == 'The environment "car_racing" has no observation "zzz".'
    assert "wheel_speed[4] in [0, 3]" in d.hint


def test_wrong_observation_shape():
    d, source = one("obs wheel_speed : real[3] in [0, 3]" + ACTIONS, "E0502")
    assert d.message == ('The observation "wheel_speed" is declared [3], but environment "car_racing" '
                         "gives it shape [4].")
    assert d.hint == "Declare it as `obs wheel_speed : real[4] in [0, 3]`."
    assert span_text(d, source) == "wheel_speed"


def test_narrower_observation_range_is_a_warning():
    d, source = one("obs speed : real in [0, 1]" + ACTIONS, "W0503")
    assert not d.is_error
    assert d.message.startswith('The observation "speed" is declared in [0, 1], but environment '
                                '"car_racing" only guarantees [0, 1.5]')
    assert d.hint == "Declare the environment's range: `obs speed : real in [0, 1.5]`."
    assert span_text(d, source) == "speed"


def test_a_half_open_field_is_suggested_as_pol_declares_it():
    """A field bounded on one side is suggested as `real >= 0` (Pol has no `in [0, inf]`),
    and listed the same way."""
    gap = Field("gap", (), 0.0, math.inf, "distance ahead")
    d = schema.obs_range_narrower(None, "gap", 1.0, 2.0, gap, "toy")
    assert d.message.startswith('The observation "gap" is declared in [1, 2], but environment "toy" '
                                "only guarantees [0, inf]")
    assert d.hint == "Declare the environment's range: `obs gap : real >= 0`."
    assert gap.describe() == "gap >= 0"
    assert Field("free", (2,), -math.inf, math.inf, "").describe() == "free[2]"


def test_wider_or_absent_observation_ranges_are_fine():
    found, _ = diags("obs speed : real in [-1, 2]\nobs offset : real" + ACTIONS)
    assert found == []


def test_a_range_copied_from_a_message_is_accepted():
    # heading_err is [-pi, pi]; messages print 6 significant digits.
    found, _ = diags("obs heading_err : real in [-3.14159, 3.14159]" + ACTIONS)
    assert found == []
    assert get("car_racing").schema.obs_field("heading_err").hi == math.pi


def test_missing_actions_are_named_at_the_policy_header():
    text = 'policy p "doc"\nobs speed : real\naction gas : real in [0, 1] = speed\n'
    d, source = one(text, "E0504")
    assert d.message == 'The policy does not declare the actions "steer", "brake" that environment "car_racing" needs.'
    assert d.hint == ("Declare every action the environment takes, e.g. `action steer : real in [-1, 1] = ...`; "
                      "`action brake : real in [0, 1] = ...`.")
    assert span_text(d, source) == "p"


def test_unknown_action():
    d, source = one("obs speed : real" + ACTIONS + "action throttle : real in [0, 1] = 0\n", "E0505")
    assert d.message == 'The environment "car_racing" has no action "throttle".'
    assert d.hint == "Its actions are: steer in [-1, 1], gas in [0, 1], brake in [0, 1]."
    assert span_text(d, source) == "throttle"


def test_unknown_action_with_a_near_name():
    text = "obs speed : real" + ACTIONS.replace("action brake", "action brakes")
    found, _ = diags(text)
    assert [x.code for x in found] == ["E0504", "E0505"]
    assert found[1].message == 'The environment "car_racing" has no action "brakes". Did you mean "brake"?'


def test_wrong_action_shape():
    text = "obs speed : real" + ACTIONS.replace("action gas   : real in [0, 1] = 0.5",
                                                 "action gas : real[2] in [0, 1] = [0.5, 0.5]")
    d, source = one(text, "E0506")
    assert d.message == 'The action "gas" is declared [2], but environment "car_racing" takes shape scalar.'
    assert d.hint == "Declare it as `action gas : real in [0, 1] = ...`."
    assert span_text(d, source) == "gas"


@pytest.mark.parametrize("declared", ["in [-2, 1]", "in [-1, 1.5]", ""])
def test_action_range_must_lie_inside_the_environments(declared):
    text = "obs speed : real" + ACTIONS.replace("action steer : real in [-1, 1] = 0",
                                                 f"action steer : real {declared} = 0")
    d, source = one(text, "E0507")
    assert d.message.startswith('The action "steer" is declared in [' if declared else
                                'The action "steer" has no declared range, which')
    assert d.message.endswith('which is not inside the range [-1, 1] that environment "car_racing" accepts.')
    assert "`action steer : real in [-1, 1] = ...`" in d.hint
    assert span_text(d, source) == "steer"


def test_narrower_action_range_is_fine():
    text = "obs speed : real" + ACTIONS.replace("in [0, 1] = 0.5", "in [0, 0.8] = 0.5")
    found, _ = diags(text)
    assert found == []


def test_every_kind_renders_with_the_environment_phase():
    d, source = one("obs spead : real" + ACTIONS, "E0501")
    text = render(d, source)
    assert text.startswith("Environment error [E0501] in 't.pol', line 1, column 5 to column 10:")
    assert "Hint: It offers:" in text


def test_field_describe():
    assert Field("tiles", (12, 4), -10, 10, "").describe() == "tiles[12, 4] in [-10, 10]"
    assert Field("speed", (), 0, 1.5, "").size == 1

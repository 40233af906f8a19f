"""What a task declares in task.md's header (issue 37, item 5): `constant:` names whose
constancy the task requires (the "is constant" warning becomes a passed finding), and
`moves:`, which enables the check for an action pushing on a bound of its range while the
observation it moves does not follow (the door's hand pressed against the end stop)."""

from __future__ import annotations

import numpy as np
import pytest
from test_trace_checks import frame

import polc
from polc.runtime.diagnostics import DiagnosticsError, builtin_report
from polc.runtime.diagnostics.task import Expectations

PUSHER = """policy pusher "pushes toward a target"
obs x : real in [-2, 2] "position"
obs target : real in [-2, 2] "where to go"
weight k : real >= 0 = 5.0
latent grab = 1 + 0 * x "always closed"
action dx : real in [-1, 1] = clip(k * (target - x), -1, 1) ~ normal(std = 0.1)
"""


@pytest.fixture(scope="module")
def pusher():
    return polc.loads(PUSHER, "pusher.pol")


def trace(pusher, wall: float):
    """Two episodes: x moves 0.01 a step toward target 1, but a wall stops it at `wall`."""
    x = np.minimum(np.arange(100) * 0.01, wall)
    obs = {"x": np.concatenate([x, x]), "target": np.ones(200)}
    return frame(pusher.typed, obs, {"k": 5.0})


def test_a_declared_constant_passes_instead_of_warning(pusher):
    df = trace(pusher, 5.0)
    plain = [f for f in builtin_report(pusher, df).findings if f.subject == "grab"]
    assert [f.severity for f in plain if "is constant" in f.message] == ["warning"]
    expect = Expectations.parse(constant="grab")
    (f,) = [f for f in builtin_report(pusher, df, expect=expect).findings if f.subject == "grab"
            and "is constant" in f.message]
    assert f.severity == "ok" and f.message.endswith("over all 200 steps, as the task expects (it declares grab "
                                                     "constant).")


def test_an_action_on_its_bound_while_the_observation_does_not_follow_is_a_warning(pusher):
    expect = Expectations.parse(moves="dx -> x")
    (f,) = [f for f in builtin_report(pusher, trace(pusher, 0.3), expect=expect).findings if f.check == "task"]
    assert f.severity == "warning"
    assert f.message.startswith("dx sits at 1 while x does not follow (it moves less than 0.001 per step that way, "
                                "against a usual step of 0.01) for 69 consecutive steps (episode 0 step 30 to step 98;")
    assert "138 steps, 69% of all" in f.message  # the last step of an episode has no next one and "it pushes against something that does not give" in f.message


def test_no_wall_no_warning_and_a_missing_name_is_a_note(pusher):
    expect = Expectations.parse(moves="dx -> x, dy -> x[1]")
    found = [f for f in builtin_report(pusher, trace(pusher, 5.0), expect=expect).findings if f.check == "task"]
    assert [(f.severity, f.subject) for f in found] == [("ok", "dx"), ("info", "dy")]
    assert "does not declare dy" in found[1].message


def test_a_bad_moves_entry_names_itself():
    with pytest.raises(DiagnosticsError, match=r"task.md: the `moves:` entry 'dx to hand' is not `ACTION -> OBS`"):
        Expectations.parse(moves="dx to hand")


def test_the_door_task_declares_grab_constant_and_the_hands_moves():
    from polc.runtime.task import load_task
    from pathlib import Path

    task = load_task(str(Path(__file__).resolve().parents[3] / "examples" / "door"))
    assert task.expect.constant == ("grab",)
    assert task.expect.moves == (("dx", "hand", 0), ("dy", "hand", 1), ("dz", "hand", 2))

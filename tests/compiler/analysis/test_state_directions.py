"""Direction intents over values computed from states: a refutation is a sequence of observations
from the initial state that reaches the witnessing state, then one step where the direction fails;
where no sequence within the search budget breaks it, the intent is flagged (W0407), never refuted
with a state value no sequence reaches (a proved range over-approximates what is reachable)."""

from __future__ import annotations

import numpy as np
import pytest

import polc
from polc.analysis import reference, sequences
from polc.analysis.abstract import run_pass
from polc.analysis.fixpoint import state_ranges
from polc.check import typed as T
from polc.check.program import check_program
from polc.frontend.parse import parse_program

# The direction fails only where p < 0, which step 1 (p at its initial 0) never shows: the search
# at the first step found nothing, a sequence does (x < 0 at one step, then x moves at the next).
REACHABLE = """obs x : real in [-1, 1]
state p : real = 0 next x
latent u = x * p
action a : real in [-5, 5] = clip(u, -5, 5)
expect u increasing in x
"""

# s is always in [0, 0.5] (x - x is 0), but its proved range is [-1, 1.5]: interval arithmetic
# does not see x - x = 0. `s * s` is increasing in s over every reachable value only.
UNREACHABLE_STATE = """obs x : real in [-1, 1]
state s : real = 0 next 0.5 * (x - x) + 0.5 * abs(x)
latent u = s * s
action a : real in [-5, 5] = clip(u + x, -5, 5)
expect u increasing in s
"""

# The same s; `x * (1 - s)` is increasing in x where s <= 1, so at every reachable s.
UNREACHABLE_OBS = """obs x : real in [-1, 1]
state s : real = 0 next 0.5 * (x - x) + 0.5 * abs(x)
latent u = x * (1 - s)
action a : real in [-5, 5] = clip(u, -5, 5)
expect u increasing in x
"""

# p takes every value of [-1, 1] along a sequence; p * p falls as p rises below 0.
STATE_VAR = """obs x : real in [-1, 1]
state p : real = 0 next x
latent u = p * p
action a : real in [-5, 5] = clip(u + x, -5, 5)
expect u increasing in p
"""


def _typed(text: str) -> T.TypedProgram:
    tp, _ = check_program(parse_program(text, "t.pol"))
    return tp


def _witness(text: str):
    tp = _typed(text)
    intent = tp.intents[0]
    ranges, _ = state_ranges(tp)
    var_iv = run_pass(tp, restrict=ranges).env[intent.var].iv
    return tp, intent, sequences.direction_witness(tp, intent, var_iv)


def _replay(tp: T.TypedProgram, intent: T.MonoIntent, w) -> tuple[float, float]:
    """The target's witnessed element at the witness's last step with the variable at its low and high
    value, the states reached by running the witness's observations from the initial state."""
    state, starts = None, []
    for obs in w.observations[:-1]:
        out = reference.run(tp, w.weights, obs, step=True, state=state)
        starts.append(out.values)
        state = out.next_state
    if intent.var in {st.name for st in tp.states}:  # both values of the state are reached
        final = reference.run(tp, w.weights, w.observations[-1], state=state).values[intent.var]
        reached = sorted([np.asarray(starts[w.partner][intent.var]).tolist(), np.asarray(final).tolist()])
        assert reached == sorted([np.asarray(w.low).tolist(), np.asarray(w.high).tolist()])
    low = reference.run(tp, w.weights, w.observations[-1], overrides={intent.var: w.low}, state=state)
    high = reference.run(tp, w.weights, w.observations[-1], overrides={intent.var: w.high}, state=state)
    return float(low.values[intent.target][w.index]), float(high.values[intent.target][w.index])


def test_a_direction_that_fails_at_a_reachable_state_is_refuted_by_a_sequence_of_observations():
    with pytest.raises(polc.PolError) as e:
        polc.loads(REACHABLE)
    d = [d for d in e.value.diagnostics if d.code == "E0405"]
    assert len(d) == 1
    assert d[0].message.startswith("The intent `u increasing in x` is false: from the initial state, the "
                                   "observations x = ")
    assert " give p = " in d[0].message and "u falls from " in d[0].message
    tp, intent, w = _witness(REACHABLE)
    assert len(w.observations) >= 2 and w.partner is None
    at_low, at_high = _replay(tp, intent, w)
    assert w.low < w.high and at_high < at_low  # the witness replays: u falls as x rises
    assert (at_low, at_high) == (w.before, w.after)


def test_a_direction_in_a_state_is_refuted_by_two_values_one_sequence_reaches():
    with pytest.raises(polc.PolError) as e:
        polc.loads(STATE_VAR)
    d = [d for d in e.value.diagnostics if d.code == "E0405"][0]
    assert "from the initial state, the observations x = " in d.message
    assert "u falls from" in d.message and "when p goes from" in d.message
    tp, intent, w = _witness(STATE_VAR)
    assert w.partner is not None and 0 <= w.partner < len(w.observations) - 1
    at_low, at_high = _replay(tp, intent, w)
    assert w.low < w.high and at_high < at_low


@pytest.mark.parametrize("text", [UNREACHABLE_STATE, UNREACHABLE_OBS], ids=["var-is-the-state", "var-is-an-obs"])
def test_a_direction_that_fails_only_at_unreachable_state_values_is_flagged_not_refuted(text):
    p = polc.loads(text)  # no E0405
    r = p.analysis.intents[0]
    assert r.status == "unknown" and r.diagnostic.code == "W0407"
    assert r.diagnostic.message.endswith(", and 256 random sequences of 24 steps from the initial state found no "
                                         "counterexample.")
    assert str(p.analysis.intervals["s"]) == "[-1, 1.5]"  # the proved range holds values no sequence reaches


def test_a_direction_the_first_step_refutes_keeps_its_one_step_witness():
    text = REACHABLE.replace("latent u = x * p", "latent u = x * (p - 0.5)")  # fails at p = 0 already
    with pytest.raises(polc.PolError) as e:
        polc.loads(text)
    d = [d for d in e.value.diagnostics if d.code == "E0405"][0]
    assert d.message.endswith("at the first step of an episode (every state at its initial value).")


REPLAYED = {
    "bool-state": """obs x : real in [-1, 1]
state g : bool = false next x > 0.5
latent u = if g then -x else x
action a : real in [-5, 5] = clip(u, -5, 5)
expect u increasing in g
""",
    "array-obs": """obs x : real[2] in [-1, 1]
state p : real[2] = 0 next x
latent u = x * p
action a : real[2] in [-5, 5] = clip(u, -5, 5)
expect u increasing in x
""",
    "array-state": """obs x : real[2] in [-1, 1]
state p : real[2] = 0 next x
latent u = p[0] * p[1]
action a : real in [-5, 5] = clip(u, -5, 5)
expect u increasing in p
""",
    "timer": """obs x : real in [-1, 1]
state t : real in [0, 100] = 0 next t + 1
latent u = if t > 5 then -x else x
action a : real in [-5, 5] = clip(u, -5, 5)
expect u increasing in x
""",
    "weight": """obs x : real in [-1, 1]
weight k : real = 0.5
state p : real = 0 next x
latent u = k * p
action a : real in [-5, 5] = clip(u + x, -5, 5)
expect u increasing in k
""",
    "latent-cut": """obs x : real in [-1, 1]
state p : real = 0 next x
latent m = p * x
latent u = m * p
action a : real in [-5, 5] = clip(u, -5, 5)
expect u increasing in m
""",
}


@pytest.mark.parametrize("name", list(REPLAYED))
def test_every_witness_replays_from_the_initial_state(name):
    tp, intent, w = _witness(REPLAYED[name])
    assert w is not None
    at_low, at_high = _replay(tp, intent, w)
    assert (at_low, at_high) == (w.before, w.after) and at_high < at_low
    assert np.all(np.asarray(w.low) <= np.asarray(w.high))


def test_a_timer_witness_shows_the_steps_it_waits_and_not_the_observations_no_state_reads():
    tp, intent, w = _witness(REPLAYED["timer"])
    assert w.text.startswith("from the initial state, 6 steps (whatever the observations) give t = 6 at step 7, "
                             "where u falls from ")
    assert all(float(obs["x"]) == 0 for obs in w.observations[:-1])  # simplified to the simplest value


def test_a_direction_in_a_state_names_the_other_states_it_holds():
    text = """obs x : real in [-1, 1]
state p : real = 0 next x
state q : real in [-5, 5] = 0 next q + x
latent u = p * q
action a : real in [-5, 5] = clip(u, -5, 5)
expect u increasing in p
"""
    tp, intent, w = _witness(text)
    assert w.text.endswith("(the other states as they are at step 2: q = -1)")
    _replay(tp, intent, w)


def test_what_a_target_depends_on_over_the_steps_is_found_reading_each_declaration_once(monkeypatch):
    # A chain of 200 latents: each one's reads are looked at once (walking every name's ancestors
    # again, as before, read the chain 200 times over: quadratic in the program).
    lines = ["obs x : real in [-1, 1]", "state p : real = 0 next x"]
    lines += [f"latent l{i} = {'x' if i == 0 else f'l{i - 1}'} + 0.001 * p" for i in range(200)]
    lines += ["action a : real in [-5, 5] = clip(l199 * p, -5, 5)", "expect a increasing in x"]
    tp = _typed("\n".join(lines) + "\n")
    calls = []
    real = T.refs
    monkeypatch.setattr(T, "refs", lambda e: calls.append(e) or real(e))
    used = sequences._closure(tp, "a")
    assert {"x", "p", "l0", "l199"} <= used
    # refs recurses into sub-expressions (about 5 per declaration here); quadratic was over 100,000 calls
    assert len(calls) <= 10 * (len(tp.nodes) + len(tp.states))

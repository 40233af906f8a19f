"""Policies with memory, the front end: `state NAME : TYPE [RANGE] = INIT next UPDATE` parses on both
parser paths, checks (types, shapes, constant finite initial values, ranges), breaks cycles, and
the interval analysis proves state ranges by a fixpoint with widening and narrowing."""

from __future__ import annotations

import math

import pytest

import polc
from polc.check import typed as T
from polc.analysis.fixpoint import holds, state_ranges
from polc.frontend.parse import _parse_fast, _parse_full

PID = """
obs err : real in [-1, 1]
weight k_p : real >= 0 = 1
weight k_i : real >= 0 = 0.1
weight k_d : real >= 0 = 0.05
state integ : real in [-2, 2] = 0 next integ + k_i * err "saturated integral"
state prev_err : real = 0 next err
latent d_err = err - prev_err
action u : real in [-1, 1] = clip(k_p * err + integ + k_d * d_err, -1, 1)
"""


def _codes(text: str) -> list[str]:
    with pytest.raises(polc.PolError) as e:
        polc.loads(text)
    return [d.code for d in e.value.diagnostics if d.is_error]


def test_state_and_next_are_contextual_keywords_on_both_parser_paths():
    text = """obs state : real in [-1, 1]
obs next : real in [0, 1]
state s : real in [-1, 1] = 0 next s + state * next
action a : real in [-1, 1] = clip(s + state, -1, 1)
"""
    fast, full = _parse_fast(text, "t.pol"), _parse_full(text, "t.pol")
    assert fast == full
    tp = polc.loads(text).typed
    assert [o.name for o in tp.obs] == ["state", "next"]
    assert [s.name for s in tp.states] == ["s"]


def test_a_state_is_typed_and_read_as_a_delay():
    tp = polc.loads(PID).typed
    integ, prev = tp.states
    assert (integ.name, integ.lo, integ.hi, integ.init) == ("integ", -2.0, 2.0, 0.0)
    assert prev.lo == -math.inf and prev.type == T.Type("real")
    d_err = tp.decl("d_err")
    assert {r for r in T.refs(d_err.expr)} == {"err", "prev_err"}
    assert tp.decl("integ") is integ


def test_memoryless_program_has_no_states():
    tp = polc.loads("obs x : real in [0, 1]\naction a : real in [0, 1] = x").typed
    assert tp.states == ()


def test_bool_state_vector_state_and_const_init():
    tp = polc.loads("""
const START = 0.5
obs force : real in [0, 1]
obs v : real[3] in [-1, 1]
state grasped : bool = false next if grasped then force > 0.2 else force > 0.5
state filt : real[3] in [-1, 1] = START next 0.8 * filt + 0.2 * v
action a : real in [0, 1] = if grasped then 1 else clip(sum(filt), 0, 1)
""").typed
    g, f = tp.states
    assert g.type == T.Type("bool") and g.init is False
    assert f.type == T.Type("real", (3,)) and f.init == (0.5, 0.5, 0.5)


def test_a_cycle_through_a_state_is_legal_and_without_one_is_E0103_naming_it():
    polc.loads("""obs target : real in [0, 1]
state prev_gas : real in [0, 1] = 0 next gas
latent throttle = 0.5 * prev_gas + 0.5 * target
action gas : real in [0, 1] = clip(throttle, 0, 1)""")
    with pytest.raises(polc.PolError) as e:
        polc.loads("""obs target : real in [0, 1]
latent throttle = 0.5 * gas + 0.5 * target
action gas : real in [0, 1] = clip(throttle, 0, 1)""")
    d = e.value.diagnostics[0]
    assert d.code == "E0103"
    assert "throttle -> gas -> throttle" in d.message
    assert "`state prev_gas : real = 0 next gas`" in d.hint and 'in "throttle"' in d.hint


@pytest.mark.parametrize("decl,code,words", [
    ("state s : real = x next s", "E0316", "must be a constant"),
    ("state s : real in [0, 1] = 2 next s", "E0317", "is 2, outside its declared range [0, 1]"),
    ("state s : real = inf next s", None, None),
    ("state s : real[2] = [1, 2, 3] next s", "E0317", "has shape [3], but the state is declared [2]"),
    ("state s : bool = 1 next s", "E0317", "is a number, but the state is bool"),
    ("state s : real = true next s", "E0317", "is bool, but the state is real"),
    ("state s : real = 0 next x > 0", "E0218", 'The `next` expression of state "s" is bool'),
    ("state s : real = 0 next [x, x]", "E0218", "is real[2], but the state is declared real"),
    ("state s : bool in [0, 1] = false next s", "E0306", "bool"),
    ("state s : real = 0 next s + nope", "E0101", "nope"),
])
def test_state_errors(decl, code, words):
    text = f"obs x : real in [-1, 1]\n{decl}\naction a : real in [-1, 1] = clip(x, -1, 1)\n"
    with pytest.raises(polc.PolError) as e:
        polc.loads(text)
    ds = [d for d in e.value.diagnostics if d.is_error]
    if code is None:  # `inf` is not a number literal of the grammar: a syntax error
        assert ds[0].code.startswith("E00")
        return
    assert ds[0].code == code
    assert words in ds[0].message


def test_an_unread_state_is_unused():
    p = polc.loads("obs x : real in [-1, 1]\nstate s : real in [-1, 1] = 0 next x\n"
                   "action a : real in [-1, 1] = x")
    assert [(d.code, d.message) for d in p.warnings] == [("W0109", 'The state "s" is never used by any action.')]


def test_a_weight_read_only_through_a_state_is_used():
    p = polc.loads(PID)
    assert not [d for d in p.warnings if d.code == "W0109"]


# ---- the fixpoint ---------------------------------------------------------------------------


def _ranges(text: str):
    tp = polc.loads(text, analyze=False).typed
    return tp, state_ranges(tp)


def test_saturated_integral_is_bounded_by_its_range_and_a_delay_by_its_input():
    tp, (ranges, unbounded) = _ranges(PID)
    assert str(ranges["integ"]) == "[-2, 2]"
    assert str(ranges["prev_err"]) == "[-1, 1]"
    assert unbounded == []
    assert holds(tp, ranges)


def test_a_leaky_integrator_settles_on_a_threshold_and_a_counter_is_unbounded():
    tp, (ranges, unbounded) = _ranges("""obs u : real in [-1, 1]
state leak : real = 0 next 0.9 * leak + u
state count : real = 0 next count + 1
action a : real in [-1, 1] = clip(leak + count, -1, 1)""")
    assert str(ranges["leak"]) == "[-10, 10]"
    assert str(ranges["count"]) == "[0, inf]"
    assert [s.name for s in unbounded] == ["count"]
    assert holds(tp, ranges)


def test_narrowing_takes_back_what_widening_overshot():
    # x' = clip(x + 1, 0, 5) reaches 5 exactly; a timer that resets stays in [0, 5]
    tp, (ranges, _) = _ranges("""obs reset : real in [0, 1]
state t : real in [0, 5] = 0 next if reset > 0.5 then 0 else t + 1
state h : real = 0 next min(h + 0.3, 2.5)
action a : real in [0, 9] = t + h""")
    assert str(ranges["t"]) == "[0, 5]"
    assert str(ranges["h"]) == "[0, 2.5]"


def test_a_latch_is_either_and_a_constant_state_stays_a_point():
    tp, (ranges, _) = _ranges("""obs force : real in [0, 1]
state g : bool = false next if g then force > 0.2 else force > 0.5
state c : real = 3 next c
action a : real in [0, 4] = c + (if g then 1 else 0)""")
    assert str(ranges["g"]) == "[0, 1]"
    assert str(ranges["c"]) == "[3, 3]"


def test_W0411_is_located_at_the_update_and_intents_use_proved_state_ranges():
    p = polc.loads("""obs u : real in [-1, 1]
state leak : real = 0 next 0.9 * leak + u
state count : real = 0 next count + 1
latent l2 = 2 * leak
action a : real in [-1, 1] = clip(l2 + count, -1, 1)
expect l2 in [-20, 20]""")
    w = [d for d in p.warnings if d.code == "W0411"]
    assert len(w) == 1 and w[0].span.line == 3 and w[0].span.column == 29
    assert 'State "count" can grow without bound' in w[0].message
    assert p.analysis.intents[0].status == "proved"
    assert str(p.analysis.intervals["leak"]) == "[-10, 10]"


def test_a_stateful_intent_is_refuted_by_a_sequence_of_observations():
    with pytest.raises(polc.PolError) as e:
        polc.loads("""obs x : real in [-1, 1]
state count : real in [0, 100] = 0 next if x > 0.5 then count + 1 else count
latent c2 = count * 0.5
action u : real in [-1, 1] = clip(c2, -1, 1)
expect c2 <= 2""")
    d = [d for d in e.value.diagnostics if d.code == "E0405"][0]
    assert "from the initial state, the observations x = " in d.message
    assert "give c2 = 2.5 > 2 at step" in d.message


def test_a_states_range_intent_is_refuted_with_only_the_weights_and_observations_it_depends_on():
    text = PID.replace('action u', 'expect integ in [-0.4, 0.5]\naction u')
    with pytest.raises(polc.PolError) as e:
        polc.loads(text)
    d = [d for d in e.value.diagnostics if d.code == "E0405"][0]
    assert d.message.startswith("The intent `integ in [-0.4, 0.5]` is false: ")
    assert "from the initial state, the observations err = -0.91, 0.34 (steps 1 to 2) give integ = -1.00848 < -0.4 " \
        "at step 2" in d.message  # k_i * -0.91 + k_i * 0.34, inside integ's range [-2, 2]
    assert "k_p" not in d.message and "k_d" not in d.message  # integ never reads them


def test_a_direction_in_a_state_is_refuted_by_two_values_a_sequence_gives_it():
    text = PID.replace('action u', 'expect d_err decreasing in prev_err\nexpect u increasing in prev_err\naction u')
    with pytest.raises(polc.PolError) as e:
        polc.loads(text)
    ds = [d for d in e.value.diagnostics if d.code == "E0405"]
    assert len(ds) == 1 and "`u increasing in prev_err` is false" in ds[0].message
    assert ds[0].message.endswith("from the initial state, the observations err = -1 (step 1) give prev_err = 0 at "
                                  "step 1 and prev_err = -1 at step 2; at step 2, with err = 0, u falls from "
                                  "-0.05 to -0.1 when prev_err goes from -1 to 0 (the other states as they are at "
                                  "step 2: integ = -0.1).")

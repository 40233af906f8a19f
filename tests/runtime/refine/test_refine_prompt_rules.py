"""The rules a refinement prompt states (issue 37, item 8): whether a TEST move uses up a
round, and how strongly a prior holds a weight against the demonstration."""

from __future__ import annotations

from types import SimpleNamespace

from polc.runtime.refine.dialogue import Dialogue, prior_text
from polc.runtime.refine.work import Settings


def moves(max_tests: int, tests_so_far: int) -> str:
    d = Dialogue.__new__(Dialogue)
    d.s, d.k, d._tests_so_far = Settings(max_tests=max_tests), 0, tests_so_far
    return d._moves(allow_test=True)


def test_the_moves_prompt_says_a_test_does_not_use_up_a_round_and_how_many_are_left():
    first = moves(2, 0)
    assert "A TEST does not use up a round: this round goes on with the same structure and rollout" in first
    assert "(1 more TEST move(s) allowed in it after this one; then REVISE or STOP)" in first
    assert "(0 more TEST move(s) allowed in it after this one" in moves(2, 1)


def test_the_fit_says_which_priors_held_the_weights_and_how_strongly():
    text = prior_text({"declared": {"k_gas": "normal(4, 1)"}, "pulled": ["k_steer", "k_look"], "prior_scale": 0.25},
                      1200)
    assert text.startswith("Besides the demonstration's 1200 training rows, the fit weighed the declared priors "
                           "k_gas ~ normal(4, 1); and a normal prior of std 0.25 on the unconstrained value of each "
                           "weight without one (k_steer, k_look), which holds it near its declared value")
    assert "a factor of about 1.28 per std" in text
    assert "Each prior counts about as much as one more row" in text


def test_nothing_is_said_when_no_prior_held_any_weight():
    assert prior_text({"declared": {}, "pulled": [], "prior_scale": None}, 10) == ""
    assert prior_text({}, 10) == ""


def test_only_the_pull_toward_declared_values_reads_as_one_sentence():
    text = prior_text({"declared": {}, "pulled": ["k"], "prior_scale": 0.25}, 10)
    assert text.startswith("Besides the demonstration's 10 training rows, the fit weighed a normal prior of std 0.25 "
                           "on the unconstrained value of each weight without one (k), which holds it near")


def test_the_fit_shows_each_weights_movement_from_its_declared_value():
    """Issue 37, item 7: the model could not see how far the fit moved a gain."""
    from polc.runtime.refine.dialogue import moved_weights

    declared = [SimpleNamespace(name="k_gas", init=11.5), SimpleNamespace(name="s", init=0.05),
                SimpleNamespace(name="g", init=(1.0, 2.0))]
    assert moved_weights({"k_gas": 41.8, "s": 0.05, "g": [1.0, 3.0]}, declared) == \
        "k_gas = 41.8 (declared 11.5), s = 0.05 (unmoved), g = [1, 3] (declared [1, 2])"

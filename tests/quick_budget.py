"""`polc experiment --quick` as the tests run it: QUICK with shorter episodes and a shorter IL fit.

    from quick_budget import quick_budget, use_quick_budget
    with quick_budget():
        main(["experiment", "car_racing", "--quick", ...])
    use_quick_budget(monkeypatch)  # or for the rest of a test

What the tests check of a quick experiment (every row of the table, the accounting of LLM calls
and resets, the quick notice, caching and resuming, Ray's table equal to the local one) does not
depend on how long its episodes are or how many epochs its IL fits take: episodes are cut at 100
steps instead of 300 (every rollout, evaluation and RL update of the experiment's own steps) and
the IL fits (fit-mlp, fit-initial, fit-refined) stop at 100 epochs, patience 10, instead of 300
and 30. Seeds, RL resets and updates, training seeds and the closed-loop IL check are QUICK's.
The refinement step (`polc refine --quick`) keeps its own quick settings, as a user gets them: on
Ray it runs in a worker, which would not see a budget patched here. Measured side by side on a
busy machine (docs/performance.md, section 5): the experiment's own steps (all but the
refinement) took 16% less time, the whole experiment 11%; the shorter episodes do that, the fits
cost about the same at 100 epochs as at 300 (their time is compiling). Every test that runs the quick experiment (the local one in conftest, the
rerun that must find it finished, the Ray one) runs it on this budget.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest

MAX_STEPS = 100
MAX_EPOCHS = 100
PATIENCE = 10


def use_quick_budget(monkeypatch: pytest.MonkeyPatch):
    """Make the tests' quick budget `polc experiment --quick`'s until `monkeypatch` is undone
    (a test's `monkeypatch`: the end of the test); returns it. On Ray it travels with each step
    to the workers (`StepCall.budget`)."""
    from polc.runtime.experiment import plan

    budget = dataclasses.replace(plan.QUICK, max_steps=MAX_STEPS, max_epochs=MAX_EPOCHS, patience=PATIENCE)
    monkeypatch.setattr(plan, "QUICK", budget)
    return budget


@contextlib.contextmanager
def quick_budget():
    """The tests' quick budget as `polc experiment --quick`'s while the block runs."""
    with pytest.MonkeyPatch.context() as mp:
        yield use_quick_budget(mp)

"""Built-in diagnostics of a policy with memory (issue 38): the `states` check finds a state that
saturates on a bound of its range (a wound-up integrator) and one that drifts through an episode
(an unbounded integrator), on synthetic traces stepped with the reference interpreter; states the
trace has no column for are stepped from the logged observations; reconstruction reads states."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import polc
from polc.analysis import reference
from polc.runtime.diagnostics import builtin_report

MEM = """policy mem "memory for diagnostics tests"
obs err : real in [-1, 1]
weight k_i : real >= 0 = 0.1
state integ : real in [-0.5, 0.5] = 0 next integ + k_i * err "integral (anti-windup)"
state total : real = 0 next total + k_i * err "an unbounded integral"
state prev  : real = 0 next err
state on    : bool = false next err > 0.2
latent d = err - prev
action u : real in [-1, 1] = clip(integ + 0.5 * d + 0.1 * total, -1, 1)
"""


@pytest.fixture(scope="module")
def mem() -> polc.Program:
    return polc.loads(MEM, "mem.pol")


def trace(program: polc.Program, err: np.ndarray, states: str = "latent") -> pd.DataFrame:
    """A trace as `polc rollout` logs it, `err` (episodes, steps) the observations; each state
    in a column `<states>.NAME` ("latent" or "state"), or in none when `states` is empty."""
    tp = program.typed
    E, n = err.shape
    carried, rows = None, []
    for t in range(n):
        out = reference.run(tp, {"k_i": np.full(E, 0.1)}, {"err": err[:, t]}, {}, batch=E, state=carried, step=True)
        carried = out.next_state
        rows.append(out.values)
    cols = {"episode": np.repeat(np.arange(E), n).astype(np.int32), "step": np.tile(np.arange(n), E).astype(np.int32),
            "obs.err": err.reshape(-1).astype(np.float32)}

    def col(name: str) -> np.ndarray:
        return np.stack([r[name] for r in rows], axis=1).reshape(-1)

    cols["latent.d"] = col("d").astype(np.float32)
    if states:
        for st in tp.states:
            v = col(st.name)
            cols[f"{states}.{st.name}"] = v if st.type.base == "bool" else v.astype(np.float32)
    cols["weight.k_i"] = np.full(E * n, 0.1, np.float32)
    cols["mean.u"] = cols["action.u"] = col("u").astype(np.float32)
    return pd.DataFrame(cols)


def of(report, check, severity=None, subject=None):
    return [f for f in report.findings if f.check == check and (severity is None or f.severity == severity)
            and (subject is None or f.subject == subject)]


STEADY = np.full((2, 100), 0.5)  # a steady error: integ winds up to 0.5, total rises without end
WAVE = np.tile(0.5 * np.sin(2 * np.pi * np.arange(100) / 20), (2, 1))  # zero mean: both settle


@pytest.mark.parametrize("columns", ["latent", "state", ""])
def test_a_wound_up_integrator_saturates_and_an_unbounded_one_drifts(mem, columns):
    report = builtin_report(mem, trace(mem, STEADY, columns))
    (sat,) = of(report, "states", "warning", "integ")
    assert sat.message.startswith("State integ (line 4) sits on its upper bound 0.5 at 90% of steps (in 2 of 2 "
                                  "episode(s), first at episode 0 step 10): its `next` keeps pushing past the bound")
    assert "add a leak (`next 0.99 * integ + ...`)" in sat.message
    (drift,) = of(report, "states", "warning", "total")
    assert drift.message.startswith("State total (line 5) drifts without settling in 2 of 2 episode(s): in episode "
                                    "0 total rises from 2.5 at step 50 to 4.95 at step 99, still moving at the "
                                    "episode's end")
    assert "give it a range, which saturates it (`state total : real in [lo, hi] = ...`)" in drift.message
    assert not of(report, "states", subject="prev") and not of(report, "states", subject="on")
    assert report.data["states"]["integ"]["on_bound"] == pytest.approx(0.9)
    stepped = "(not traced: stepped from the logged observations)"
    assert (stepped in sat.message) == (columns == "")
    assert not of(report, "reconstruction", "error")  # d and u read the states' values at each step
    assert any(f.check == "states" for f in report.problems)
    assert "State integ (line 4) sits on its upper bound" in report.text()
    assert "  integ (state)        0.473    0.0942" in report.text()  # the statistics table shows the states
    assert report.data["latent_stats"]["on"]["true"] == pytest.approx(0.99)


def test_states_that_settle_pass(mem):
    report = builtin_report(mem, trace(mem, WAVE))
    assert not of(report, "states", "warning")
    (ok,) = of(report, "states", "ok")
    assert ok.message == "All 2 accumulating state(s) stay off their bounds at more than 80% of steps and settle within " \
                         "each episode."
    assert not of(report, "reconstruction", "error")


def test_a_state_column_that_is_not_what_the_program_steps_fails_reconstruction(mem):
    """The traced states are what the latents are recomputed from, so a trace whose `prev` is
    not the previous error shows on `d`, which reads it."""
    df = trace(mem, WAVE)
    df["latent.prev"] = np.float32(0.0)
    assert of(builtin_report(mem, df), "reconstruction", "error", "d")


def test_a_memoryless_report_has_no_states_check():
    prog = polc.loads("obs x : real in [-1, 1]\naction a : real in [-1, 1] = x\n", "p.pol")
    df = pd.DataFrame({"episode": np.zeros(30, np.int32), "step": np.arange(30, dtype=np.int32),
                       "obs.x": np.linspace(-1, 1, 30, dtype=np.float32)})
    df["mean.a"] = df["action.a"] = df["obs.x"]
    assert not of(builtin_report(prog, df), "states")


def test_an_echo_is_measured_with_the_states_the_trace_holds():
    """Zeroing an echo recomputes the action with the traced memory, not the initial state: an
    action that ignores its echo is not moved by zeroing it."""
    prog = polc.loads("obs x : real in [-1, 1]\nobs last_a : real in [-1, 1]\n"
                      "state prev : real in [-1, 1] = 0 next x\n"
                      "action a : real in [-1, 1] = 0.5 * prev + 0 * last_a\n", "echo.pol")
    x = np.linspace(-1, 1, 40)
    prev = np.concatenate([[0.0], x[:-1]])
    df = pd.DataFrame({"episode": np.zeros(40, np.int32), "step": np.arange(40, dtype=np.int32),
                       "obs.x": x.astype(np.float32), "obs.last_a": (0.5 * prev).astype(np.float32),
                       "latent.prev": prev.astype(np.float32)})
    df["mean.a"] = df["action.a"] = (0.5 * prev).astype(np.float32)
    report = builtin_report(prog, df, echoes={"last_a": ["a"]})
    (f,) = of(report, "echo")
    assert f.message.startswith('"last_a" echoes a: setting it to 0 moves a by 0 on average, 0% of a')


def test_an_array_state_names_the_element_that_saturates():
    prog = polc.loads("obs err : real in [-1, 1]\nstate v : real[2] in [-1, 1] = 0 next v + [0, 0.1 * err]\n"
                      "action u : real in [-1, 1] = clip(v[1], -1, 1)\n", "arr.pol")
    err = np.full(60, 0.5)
    v1 = np.minimum(0.05 * np.arange(60), 1.0)
    df = pd.DataFrame({"episode": np.zeros(60, np.int32), "step": np.arange(60, dtype=np.int32),
                       "obs.err": err.astype(np.float32)})
    df["mean.u"] = df["action.u"] = v1.astype(np.float32)
    (f,) = of(builtin_report(prog, df), "states", "warning")
    assert f.message.startswith("State v (line 2) sits on its upper bound 1 at 67% of steps (v[1], in 1 of 1 "
                                "episode(s), first at episode 0 step 20)")


def test_a_delay_follows_its_input_and_only_an_accumulating_state_drifts():
    """`prev` copies a ramping observation (a delay: not judged); `acc` sums it (drifts)."""
    prog = polc.loads("obs x : real in [-1, 1]\nstate prev : real in [-1, 1] = 0 next x\n"
                      "state acc : real = 0 next acc + 0.01 * x\n"
                      "action u : real in [-1, 1] = clip(x - prev + acc, -1, 1)\n", "ramp.pol")
    x = np.linspace(0, 1, 50)
    df = pd.DataFrame({"episode": np.zeros(50, np.int32), "step": np.arange(50, dtype=np.int32),
                       "obs.x": x.astype(np.float32)})
    df["mean.u"] = df["action.u"] = np.zeros(50, np.float32)  # not what is checked here
    report = builtin_report(prog, df)
    assert [f.subject for f in of(report, "states", "warning")] == ["acc"]


def test_a_phase_that_wraps_does_not_drift_and_one_that_never_wraps_does():
    prog = polc.loads("obs x : real in [-1, 1]\n"
                      "state wrapped : real = 0 next if wrapped > 6 then wrapped - 6.2832 else wrapped + 0.4\n"
                      "state phase : real = 0 next phase + 0.5\n"
                      "action u : real in [-1, 1] = sin(wrapped) + 0 * sin(phase)\n", "osc.pol")
    df = pd.DataFrame({"episode": np.repeat(np.arange(2), 100).astype(np.int32),
                       "step": np.tile(np.arange(100), 2).astype(np.int32), "obs.x": np.zeros(200, np.float32)})
    df["mean.u"] = df["action.u"] = np.zeros(200, np.float32)  # not what is checked here
    (f,) = of(builtin_report(prog, df), "states", "warning")
    assert f.subject == "phase" and f.message.startswith("State phase (line 3) drifts without settling in 2 of 2")

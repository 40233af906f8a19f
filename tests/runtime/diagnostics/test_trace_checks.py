"""Built-in diagnostics (polc.runtime.diagnostics): each check on a synthetic trace whose
answer is known (made with the reference interpreter, then tampered with), the report's
text, bad inputs, and one end-to-end run on a real short Car Racing rollout."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import polc
from polc.analysis import reference
from polc.check import typed as T
from polc.runtime.diagnostics import DiagnosticsError, Finding, Report, builtin_report

TINY = """policy tiny "a small policy for diagnostics tests"
obs x : real in [-1, 1]
obs v : real[2] in [0, 2]
weight k : real >= 0 = 1.0
weight g : real = 0.5
weight c : real in [0, 1] = 0.5
latent s = relu(v[0] - v[1])
latent t = clip(k * x + g * s, -0.5, 0.5)
latent u = if x > 0 then c * x else 0
action a : real in [-1, 1] = t - 0.1 * s + u ~ normal(std = 0.1)
expect t increasing in x
expect t increasing in s
expect s >= 0
"""

WEIGHTS = {"k": 1.0, "g": 0.5, "c": 0.5}
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "car_racing"


@pytest.fixture(scope="module")
def tiny() -> polc.Program:
    return polc.loads(TINY, "tiny.pol")


def states(n: int = 200, seed: int = 0, x=(-1, 1), v0=(0, 2), v1=(0, 2)) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(*x, n), "v": np.stack([rng.uniform(*v0, n), rng.uniform(*v1, n)], axis=1)}


def frame(tp: T.TypedProgram, obs: dict, weights: dict = WEIGHTS, episodes: int = 2, mlp=None) -> pd.DataFrame:
    """A trace of `tp` as `polc rollout` would log it (actions = means), as a DataFrame."""
    B = len(obs["x"])
    w = {d.name: np.broadcast_to(np.asarray(weights[d.name], float), (B,) + d.type.shape) for d in tp.weights}
    out = reference.run(tp, w, obs, mlp, batch=B)
    episode = np.repeat(np.arange(episodes), -(-B // episodes))[:B]
    cols: dict = {"episode": episode.astype(np.int32),
                  "step": np.concatenate([np.arange((episode == e).sum()) for e in range(episodes)]).astype(np.int32)}

    def col(v):
        v = np.asarray(v, np.float32)
        return list(v.reshape(B, -1)) if v.ndim > 1 else v

    cols.update({f"obs.{o.name}": col(obs[o.name]) for o in tp.obs})
    cols.update({f"latent.{x.name}": col(out.values[x.name]) for x in tp.latents})
    cols.update({f"weight.{d.name}": col(w[d.name]) for d in tp.weights})
    cols.update({f"mean.{a.name}": col(out.values[a.name]) for a in tp.actions})
    cols.update({f"action.{a.name}": col(out.values[a.name]) for a in tp.actions})
    return pd.DataFrame(cols)


def of(report: Report, check: str, severity: str = None, subject: str = None) -> list[Finding]:
    return [f for f in report.findings if f.check == check and (severity is None or f.severity == severity)
            and (subject is None or f.subject == subject)]


def test_a_clean_trace_passes_every_check(tiny):
    report = builtin_report(tiny, frame(tiny.typed, states()))
    assert not report.problems, report.text()
    assert of(report, "weights", "ok")[0].message.startswith("All 3 weights are constant within each of the 2")
    (a,) = of(report, "reconstruction", "ok", "a")
    assert "mean.a matches its recomputation" in a.message
    assert float(a.message.split("max abs error ")[1].split()[0]) < 1e-6
    assert of(report, "obs_range", "ok") and of(report, "intents", "ok", "s")


def test_a_weight_that_changes_within_an_episode_is_an_error(tiny):
    df = frame(tiny.typed, states())
    df.loc[30:40, "weight.k"] = 1.25  # rows 30..40 are in episode 0
    (f,) = of(builtin_report(tiny, df), "weights", "error")
    assert f.subject == "k"
    assert f.message == ("Weight k changes within episode 0: from 1 it moves at 11 of 100 steps, over [1, 1.25]; "
                         "weights must be constant in a rollout.")


def test_a_weight_that_differs_between_episodes_is_a_warning(tiny):
    df = frame(tiny.typed, states())
    df.loc[df.episode == 1, "weight.g"] = 0.7
    (f,) = of(builtin_report(tiny, df), "weights", "warning")
    assert f.subject == "g" and "differs between episodes (0.5 to 0.7)" in f.message


def test_weights_outside_their_constraint_or_unlike_the_params(tiny):
    df = frame(tiny.typed, states())
    df["weight.c"] = np.float32(1.5)
    report = builtin_report(tiny, df, params={"polc_params": 1, "weights": {"k": 1.0, "g": 0.25, "c": 0.5}})
    assert "Weight c = 1.5 lies outside its constraint [0, 1]." in [f.message for f in of(report, "weights", "error")]
    warnings = {f.subject: f.message for f in of(report, "weights", "warning")}
    assert set(warnings) == {"g", "c"} and "g is 0.5 in the trace but 0.25 in the params given" in warnings["g"]


def test_runtime_params_are_unconstrained(tiny):
    """The refine loop passes `fit`'s params: unconstrained values (k = exp(u), c = sigmoid(u))."""
    params = {"k": np.log(1.0), "g": 0.5, "c": 0.0}  # c = sigmoid(0) = 0.5
    report = builtin_report(tiny, frame(tiny.typed, states()), params=params)
    assert not of(report, "weights", "warning") and "equal to those in the params given" in \
        of(report, "weights", "ok")[0].message


def test_a_weight_pushed_onto_its_bound(tiny):
    report = builtin_report(tiny, frame(tiny.typed, states(), {"k": 0.004, "g": 0.5, "c": 0.5}))
    (f,) = of(report, "signs", "warning")
    assert f.subject == "k"
    assert f.message == ("k = 0.004 sits on its lower bound 0 (0.4% of the way to its initial value 1): the "
                         "demonstration pulls it below 0, or the term does not help.")


def test_an_intent_violated_on_the_data(tiny):
    """`t increasing in s` needs g >= 0, which is not declared; fitted negative, the data refute it."""
    report = builtin_report(tiny, frame(tiny.typed, states(), {"k": 0.2, "g": -0.5, "c": 0.5}))
    (f,) = of(report, "intents", "error")
    assert f.subject == "t" and f.message.startswith("'t increasing in s' is refuted on the data: t falls with s at ")
    assert "by up to -0.5 per unit of s" in f.message
    assert "the static analysis cannot prove it with the fitted weights" in f.message
    fine = builtin_report(tiny, frame(tiny.typed, states(), {"k": 0.2, "g": 0.5, "c": 0.5}))
    (ok,) = [x for x in of(fine, "intents") if x.message.startswith("'t increasing in s'")]
    assert ok.severity == "ok" and "the static analysis proves it with the fitted weights" in ok.message


def test_an_intent_the_data_cannot_test(tiny):
    """Saturated everywhere, t does not move with x at all: neither supported nor refuted."""
    report = builtin_report(tiny, frame(tiny.typed, states(x=(0.6, 1)), {"k": 10.0, "g": 0.5, "c": 0.5}))
    (f,) = [x for x in of(report, "intents") if x.message.startswith("'t increasing in x'")]
    assert f.severity == "info" and "does not respond to x at any of the 200 logged states" in f.message


def test_a_range_intent_violated_on_the_data(tiny):
    span = tiny.typed.intents[0].span
    tp = dataclasses.replace(tiny.typed, intents=(T.RangeIntent("a", -0.2, 0.2, False, False, "a in [-0.2, 0.2]",
                                                                span),))
    (f,) = of(builtin_report(tp, frame(tp, states())), "intents", "error")
    assert f.subject == "a" and f.message.startswith("'a in [-0.2, 0.2]' is refuted on the data: a leaves the range "
                                                     "at ")


def test_reconstruction_is_exact_and_a_tampered_mean_is_caught(tiny):
    df = frame(tiny.typed, states())
    df.loc[5:9, "mean.a"] += 0.3
    df.loc[17, "latent.s"] = 7.0
    report = builtin_report(tiny, df)
    errors = {f.subject: f.message for f in of(report, "reconstruction", "error")}
    assert errors["a"].startswith("mean.a differs from its recomputation at 2.5% of steps, max abs error 0.3")
    assert "the difference starts here" in errors["s"] and "(logged 7, recomputed " in errors["s"]
    # the executed actions were logged as the means: a DataFrame says nothing about it, a trace file does
    assert "action.a differs" not in " ".join(errors.values())


def test_observations_outside_their_declared_range(tiny):
    obs = states()
    obs["x"][[3, 50, 120]] = [1.5, -1.2, 1.1]
    (f,) = of(builtin_report(tiny, frame(tiny.typed, obs)), "obs_range", "warning")
    assert f.message == ("Observation x leaves its declared range [-1, 1] at 3 of 200 steps (1.5%), worst x = 1.5 "
                         "at episode 0 step 3.")
    obs = states()
    obs["v"][7, 1] = 2.5
    (f,) = of(builtin_report(tiny, frame(tiny.typed, obs)), "obs_range", "warning")
    assert "worst v[1] = 2.5 at episode 0 step 7" in f.message


def test_branches_always_or_never_active(tiny):
    # x > 0.6 with k = 10: the clip is always saturated above, the `if` always takes `then`;
    # v[0] < v[1] always: the relu is never positive.
    obs = states(x=(0.6, 1), v0=(0, 0.9), v1=(1, 2))
    report = builtin_report(tiny, frame(tiny.typed, obs, {"k": 10.0, "g": 0.5, "c": 0.5}))
    warnings = {f.subject: f.message for f in of(report, "branches", "warning")}
    assert warnings["t"] == ("clip(k * x + g * s, -0.5, 0.5) in t is saturated at every step (below 0%, above "
                             "100%), so what it clips has no effect on t.")
    assert warnings["s"].startswith("relu(v[0] - v[1]) in s is never positive over the 200 steps (its input stays in [")
    assert warnings["u"] == ("The condition x > 0 in u is always true over the 200 steps: the else branch never "
                             "runs.")
    normal = builtin_report(tiny, frame(tiny.typed, states()))
    assert not of(normal, "branches", "warning")
    assert any("in t clips at" in f.message for f in of(normal, "branches", "ok"))


def test_latent_statistics_and_non_finite_values(tiny):
    df = frame(tiny.typed, states())
    report = builtin_report(tiny, df)
    s = report.data["latent_stats"]["s"]
    v = df["latent.s"].to_numpy(np.float64)
    assert s["mean"] == pytest.approx(v.mean()) and s["max"] == pytest.approx(v.max())
    assert s["q50"] == pytest.approx(np.median(v)) and s["nonfinite"] == 0
    table = dict(report.tables)["latents"]
    assert table.splitlines()[1].split() == ["name", "mean", "std", "min", "q05", "q50", "q95", "max"]
    df.loc[[1, 2], "latent.u"] = np.nan
    (f,) = of(builtin_report(tiny, df), "latents", "error")
    assert f.subject == "u" and f.message.startswith("u is not finite at 1% of values (mean ")


def test_mlp_blocks_need_the_params():
    prog = polc.loads("""policy tinymlp "an mlp"
obs x : real in [-1, 1]
obs v : real[2] in [0, 2]
weight k : real >= 0 = 1.0
latent m = mlp(x, v; hidden = [4])
latent t = k * x
action a : real in [-1, 1] = t + m
""")
    mlp = reference.random_mlp_params(prog.typed, np.random.default_rng(0))
    df = frame(prog.typed, states(), {"k": 1.0}, mlp=mlp)
    without = builtin_report(prog, df)
    (f,) = of(without, "reconstruction", "info")
    assert f.message == "m uses an mlp block and was not recomputed: pass the params to check it."
    (a,) = of(without, "reconstruction", "ok", "a")  # from the logged t and m
    assert a.message.startswith("mean.a matches its recomputation from the logged values of what it reads")
    with_params = builtin_report(prog, df, params={"k": 0.0, **mlp})
    assert not with_params.problems and of(with_params, "reconstruction", "ok", "a")


def test_actions_against_the_demonstration(tiny):
    """The demonstration agrees with the policy except where x > 0.8: the worst states are there."""
    tp = tiny.typed
    trace = frame(tp, states(400, seed=1))
    demo = frame(tp, states(400, seed=2)).drop(columns=[c for c in frame(tp, states(2)).columns
                                                        if c.split(".")[0] in ("latent", "weight", "mean")])
    x = np.asarray(demo["obs.x"])
    demo.loc[x > 0.8, "action.a"] = -1.0
    report = builtin_report(tiny, trace, demo=demo)
    worst = [f for f in of(report, "demo") if f.message.startswith("At ")]
    assert len(worst) == 5 and all(f.subject == "a" for f in worst)
    xs = [float(f.message.split("; x ")[1].split(",")[0]) for f in worst]
    assert all(v > 0.7 for v in xs), worst
    assert "(demo -1)" in worst[0].message
    summary = [f for f in of(report, "demo") if f.message.startswith("Mean |policy action")]
    assert summary and report.data["demo"]["covered"] > 0.8
    far = frame(tp, states(400, seed=1, x=(0.9, 1)))  # the demonstration never went there... with v far too
    far_demo = demo[demo["obs.x"] < 0]
    shifted = builtin_report(tiny, far, demo=far_demo)
    (w,) = of(shifted, "demo", "warning")
    assert "trace states are farther from every demonstration state" in w.message


def test_text_leads_with_the_problems_and_stays_short(tiny):
    df = frame(tiny.typed, states(), {"k": 0.004, "g": -0.5, "c": 0.5})
    df.loc[5:9, "mean.a"] += 0.3
    text = builtin_report(tiny, df).text()
    assert text.startswith("Diagnostics of policy tiny on <DataFrame>: 2 episodes, 200 steps;")
    assert text.index("Problems:") < text.index("statistics over 200 steps") < text.index("Passed:")
    problems = text[text.index("Problems:"):text.index("statistics")]
    assert problems.index("- error: 't increasing in s' is refuted") < problems.index("- warning: k = 0.004")
    assert "reconstruction:\n- error: mean.a differs" in problems
    assert len(text) < 4000
    short = builtin_report(tiny, df).text(budget=1200)
    assert len(short) <= 1300 and "not shown" in short and "Problems:" in short


def test_a_prompts_text_leaves_out_what_does_not_fit_without_pointing_at_a_command(tiny):
    """The refinement loop's model can run no command: `elsewhere=None` drops the pointer."""
    df = frame(tiny.typed, states(), {"k": 0.004, "g": -0.5, "c": 0.5})
    df.loc[5:9, "mean.a"] += 0.3
    short = builtin_report(tiny, df).text(budget=1200, elsewhere=None)
    assert len(short) <= 1300 and "Problems:" in short
    assert "not shown" not in short and "polc analyze" not in short and "--json" not in short


def test_a_trace_of_another_policy_or_a_demonstration_is_an_error(tiny):
    df = frame(tiny.typed, states())
    with pytest.raises(DiagnosticsError, match=r"^The trace <DataFrame> does not belong to policy tiny: it has no "
                                               r"column latent.u \(was it made"):
        builtin_report(tiny, df.drop(columns=["latent.u"]))
    demo = df[[c for c in df.columns if not c.startswith(("latent.", "weight.", "mean."))]]
    with pytest.raises(DiagnosticsError, match="it is a demonstration table, not a rollout trace of policy tiny"):
        builtin_report(tiny, demo)
    with pytest.raises(DiagnosticsError, match=r'column "obs.v" holds 3 value\(s\) per step but the policy '
                                               r"declares v with shape \[2\]"):
        builtin_report(tiny, df.assign(**{"obs.v": [np.zeros(3, np.float32)] * len(df)}))
    with pytest.raises(DiagnosticsError, match="The demonstration .* has no column action.a"):
        builtin_report(tiny, df, demo=demo.drop(columns=["action.a"]))
    with pytest.raises(DiagnosticsError, match="do not fit policy tiny: weight g is missing."):
        builtin_report(tiny, df, params={"polc_params": 1, "weights": {"k": 1.0, "c": 0.5}})


def test_a_corrupt_file_is_an_error(tiny, tmp_path):
    bad = tmp_path / "trace.parquet"
    bad.write_bytes(b"PAR1 but not really")
    with pytest.raises(DiagnosticsError, match=r"is not a readable Parquet table.*\.$"):
        builtin_report(tiny, str(bad))
    with pytest.raises(DiagnosticsError, match="no such file"):
        builtin_report(tiny, str(tmp_path / "missing.parquet"))


# ---- end to end on Car Racing -----------------------------------------------------------------


class ShortCarRacing:
    """The car_racing spec with a 150-step time limit, so a real rollout takes seconds."""

    def __init__(self, steps: int):
        from polc.runtime import envs

        self.base = envs.get("car_racing")
        self.schema, self.max_steps = self.base.schema, steps

    def make(self, seed=None, render_mode=None, **kw):
        return self.base.make(seed=seed, render_mode=render_mode, max_episode_steps=self.max_steps, **kw)


def test_a_real_car_racing_rollout_end_to_end(tmp_path):
    import jax

    from polc.runtime.trace.rollout import RolloutConfig, TraceLayout, rollout
    from polc.runtime.io.table import TableWriter

    program = polc.load(str(EXAMPLES / "initial.pol"))
    policy = program.compile()
    params = policy.init(jax.random.PRNGKey(0))
    spec = ShortCarRacing(150)
    path = str(tmp_path / "trace.parquet")
    with TableWriter(path, TraceLayout(policy.program, spec.schema).columns(), {"actions": "mean"}) as w:
        rollout(policy, params, spec, [10_000], RolloutConfig(n_envs=1), lambda ep: w.write_episode(ep.columns))
    demo = EXAMPLES / "demo.parquet"
    report = builtin_report(program, path, params=params, demo=str(demo) if demo.exists() else None)
    assert not [f for f in report.findings if f.severity == "error"], report.text()
    assert len(of(report, "reconstruction", "ok")) == 4  # steer, gas, brake and the latents
    assert set(report.data["latent_stats"]) == {x.name for x in program.typed.nodes}
    assert len(of(report, "intents")) == len(program.typed.intents)
    text = report.text()
    assert len(text) < 4000 and text.startswith(f"Diagnostics of policy car_racing on {path}: 1 episode, 150 steps")
    if demo.exists():
        assert of(report, "demo") and math.isfinite(report.data["demo"]["median_distance"])


def test_an_echo_read_by_an_action_says_how_much_of_it_the_echo_explains(tiny):
    """Say x echoes the action a: a = clip(k x + g s, +-0.5) - 0.1 s + u, so x = 0 moves a by
    |a - a(x=0)| row by row; the finding gives that mean beside a's mean magnitude."""
    obs = states()
    df = frame(tiny.typed, obs)
    report = builtin_report(tiny, df, echoes={"x": ("a",)})
    (f,) = of(report, "echo", subject="a")
    full = reference.run(tiny.typed, {k: np.full(len(df), v) for k, v in WEIGHTS.items()},
                         obs, batch=len(df)).values["a"]
    zero = reference.run(tiny.typed, {k: np.full(len(df), v) for k, v in WEIGHTS.items()},
                         dict(obs, x=np.zeros_like(obs["x"])), batch=len(df)).values["a"]
    moved, size = np.mean(np.abs(full - zero)), np.mean(np.abs(full))
    assert report.data["echo"]["a.x"]["moved"] == pytest.approx(moved)
    assert report.data["echo"]["a.x"]["share"] == pytest.approx(moved / size)
    assert f.severity == "warning" and f.message.startswith('"x" echoes a: setting it to 0 moves a by ')
    assert not of(builtin_report(tiny, df), "echo")  # the trace names no environment: no echoes known
    assert not of(builtin_report(tiny, df, echoes={"v": ()}), "echo")

"""`polc fit` through time: a program with memory is fitted over whole episodes.

The key test: demonstrations generated (in NumPy) by a first-order filter with a fitted gain,
`state f = 0 next f + alpha * (x - f)`, and an action `u = k * f` with Gaussian noise, are
fitted back to the true alpha, k and noise std from distant declared values. The action
reads only the state, and the state depends on alpha only through the earlier steps, so the
fit recovers alpha only if the loss runs each episode in order from `state0` and its gradient
flows back through time. A program without memory fits row by row as before (the same
weights as before this feature, recorded at commit 7c75ebc).
"""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

import polc
from polc.cli import main
from polc.runtime.envs import toy
from polc.runtime.il.losses import episode_loss
from polc.runtime.il.train import Demos, FitConfig, FitError, fit, load_demos, split_episodes
from polc.runtime.io.table import ColumnSpec, TableWriter, read_table, step_columns

TRUE = {"alpha": 0.3, "k": 2.0, "s": 0.1}
LAG = '''policy lag
    "A first-order filter of the input, scaled."
obs x : real in [-5, 5] "input"
weight alpha : real in [0.01, 1] = 0.8 "filter gain"
weight k : real in [-10, 10] = 0.5 "output gain"
weight s : real in [0.01, 1] = 0.5 "action noise"
state f : real in [-5, 5] = 0 next f + alpha * (x - f) "filtered input"
action u : real = k * f ~ normal(std = s)
'''
E, T = 20, 50
FAST = FitConfig(restarts=1, prior_scale=math.inf)


@pytest.fixture(scope="module")
def lag():
    return polc.loads(LAG, "lag.pol", analyze=False).compile()


def generate(episodes: int = E, steps: int = T, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(episodes, steps) inputs and actions of the true filter, each episode from f = 0."""
    rng = np.random.default_rng(seed)
    xs = np.clip(rng.normal(size=(episodes, steps)), -3, 3).astype(np.float32)
    us = np.zeros((episodes, steps), np.float32)
    for e in range(episodes):
        f = 0.0
        for t in range(steps):
            us[e, t] = TRUE["k"] * f + TRUE["s"] * rng.normal()
            f = f + TRUE["alpha"] * (xs[e, t] - f)
    return xs, us


@pytest.fixture(scope="module")
def demos() -> Demos:
    xs, us = generate()
    return Demos({"x": xs.reshape(-1)}, {"u": us.reshape(-1)}, np.repeat(np.arange(E), T))


@pytest.fixture(scope="module")
def result(lag, demos):
    return fit(lag, demos, FAST)


def test_a_filter_gain_is_recovered_through_time(lag, result):
    got = {k: float(v) for k, v in lag.constrain(result.params).items()}
    assert got["alpha"] == pytest.approx(TRUE["alpha"], rel=0.05)
    assert got["k"] == pytest.approx(TRUE["k"], rel=0.05)
    assert got["s"] == pytest.approx(TRUE["s"], rel=0.1)


def test_validation_holds_out_whole_episodes(result, demos):
    # 20 episodes of 50 steps, 0.2 held out: 4 whole episodes, not 200 scattered rows
    assert (result.n_train, result.n_val) == (800, 200)
    train, val = split_episodes(demos, 0.2, 0)
    assert not set(train.episode) & set(val.episode)
    assert all(np.count_nonzero(val.episode == e) == T for e in set(val.episode))


def test_the_episode_loss_is_the_step_by_step_likelihood(lag):
    """Each step's loss is the Gaussian NLL of its action given the state the episode's earlier
    steps made (a hand computation), and steps past an episode's end weigh nothing."""
    xs, us = generate(2, 6, seed=3)
    weight = np.ones((2, 6), np.float32)
    weight[1, 4:] = 0
    params = lag.init(__import__("jax").random.PRNGKey(0))
    got = np.asarray(episode_loss(lag)(params, {"x": xs}, {"u": us}, weight))
    alpha, k, s = 0.8, 0.5, 0.5
    for e in range(2):
        f = 0.0
        for t in range(6 if e == 0 else 4):
            z = (us[e, t] - k * f) / s
            assert got[e, t] == pytest.approx(0.5 * z * z + math.log(s) + 0.5 * math.log(2 * math.pi), rel=1e-4)
            f = f + alpha * (xs[e, t] - f)


def test_one_episode_is_refused_with_a_sentence(lag):
    xs, us = generate(1, 30)
    one = Demos({"x": xs.reshape(-1)}, {"u": us.reshape(-1)}, np.zeros(30, np.int64))
    with pytest.raises(FitError, match="a policy with memory is fitted by whole episodes .* has 1 episode; "
                                       "record at least 2"):
        fit(lag, one, FAST)


def test_a_state_that_is_not_finite_is_named(demos):
    src = LAG.replace("state f : real in [-5, 5] = 0 next f + alpha * (x - f)",
                      "state f : real = 0 next f + log(alpha - 1) * x")
    policy = polc.loads(src, "bad.pol", analyze=False).compile()
    with pytest.raises(FitError, match='state "f" is not finite on 980 of 1000 demonstration rows'):
        fit(policy, demos, FAST)


def test_polc_fit_fits_a_stateful_program_from_a_table(tmp_path, lag, result):
    xs, us = generate()
    path = tmp_path / "lag.parquet"
    columns = step_columns((ColumnSpec("obs.x"), ColumnSpec("action.u")))
    with TableWriter(str(path), columns, {"kind": "demos"}) as w:
        for e in range(E):
            w.write_episode({"episode": np.full(T, e, np.int32), "step": np.arange(T, dtype=np.int32),
                             "seed": np.full(T, e, np.int64), "obs.x": xs[e], "action.u": us[e],
                             "reward": np.zeros(T, np.float32), "terminated": np.zeros(T, bool),
                             "truncated": np.zeros(T, bool)})
    (tmp_path / "lag.pol").write_text(LAG)
    out = tmp_path / "lag.params"
    assert main(["fit", str(tmp_path / "lag.pol"), "--demos", str(path), "-o", str(out), "--restarts", "1",
                 "--prior-scale", "inf", "--check-episodes", "0", "-q"]) == 0
    saved = json.loads(out.read_text())
    assert saved["fit"]["rows_train"] == 800 and saved["fit"]["rows_val"] == 200
    assert saved["weights"]["alpha"] == pytest.approx(TRUE["alpha"], rel=0.05)


@pytest.mark.slow  # a compile of its own (~5 s); tests/test_fit*.py cover memoryless fitting too
def test_a_memoryless_program_fits_row_by_row_as_before():
    """The toy reach controller fitted on 300 rows: the unconstrained weights recorded with the
    code before memory (commit 7c75ebc; identical to the last bit on the machine they were
    recorded on), and a row split (60 scattered rows held out)."""
    policy = polc.loads(toy.reach_policy(0.8, 0.6, 0.1), "reach.pol", analyze=False).compile()
    rng = np.random.default_rng(1)
    n = 300
    gap = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    vel = rng.uniform(-1, 1, n).astype(np.float32)
    push = np.clip(0.8 * gap[:, 0] - 0.6 * vel + 0.1 * rng.normal(size=n), -1, 1).astype(np.float32)
    demos = Demos({"gap": gap, "vel": vel}, {"push": push}, np.repeat(np.arange(6), 50))
    r = fit(policy, demos, FitConfig(restarts=2, max_epochs=60, prior_scale=math.inf))
    assert (r.n_train, r.n_val) == (240, 60)
    before = {"kd": -0.5038430094718933, "kp": -0.20938149094581604, "s": -2.3827168941497803}
    for name, value in before.items():
        assert float(r.params[name]) == pytest.approx(value, rel=1e-5, abs=1e-6)


def test_a_weight_read_only_by_a_state_update_moves_the_mean():
    """`omega` is read only where the clock state is updated, yet it moves the action from the
    next step on: the fit's prior pull and ES's search (`mean_weights`) include it."""
    from polc.analysis.deps import mean_weights

    tp = polc.loads(pathlib.Path("examples/swimmer/oscillator.pol").read_text(), "oscillator.pol", analyze=False).typed
    assert mean_weights(tp) == {"omega", "amp", "lag", "kp", "kd"}
    assert "alpha" in mean_weights(polc.loads(LAG, "lag.pol", analyze=False).typed)


def _ragged() -> Demos:
    """The filter's demonstration with episodes of 30 to 50 steps (the same length bucket)."""
    xs, us = generate(seed=5)
    lengths = [30 + (e * 7) % 21 for e in range(E)]
    return Demos({"x": np.concatenate([xs[e, :n] for e, n in enumerate(lengths)])},
                 {"u": np.concatenate([us[e, :n] for e, n in enumerate(lengths)])},
                 np.concatenate([np.full(n, e) for e, n in enumerate(lengths)]))


def test_episodes_are_padded_to_a_bucket_with_a_padding_episode():
    from polc.runtime.il.train import _episode_batches

    demos = _ragged()
    batch = _episode_batches(demos, 32)
    weight = np.asarray(batch.weight)
    assert weight.shape == (32, 64) and batch.obs["x"].shape == (32, 64)
    assert weight[:E].sum(axis=1).tolist() == [30 + (e * 7) % 21 for e in range(E)]
    assert not weight[E:].any()  # the padding episodes
    n0 = 30
    assert np.all(np.asarray(batch.obs["x"])[0, n0:] == demos.obs["x"][n0 - 1])  # an episode's last row repeated


_compiles = {"on": False, "n": 0}


def _count(name: str, secs: float, **kw) -> None:
    if _compiles["on"] and name == "/jax/core/compile/backend_compile_duration":
        _compiles["n"] += 1


def test_ragged_episodes_fit_and_share_the_compiled_step(lag, result):
    """Episodes of other lengths in the same buckets (rows, episodes per batch) reuse the
    compiled step of the first fit: no XLA compile, and the gain is recovered as well."""
    import jax

    jax.monitoring.register_event_duration_secs_listener(_count)
    _compiles.update(on=True, n=0)
    try:
        r = fit(lag, _ragged(), FAST)
    finally:
        _compiles["on"] = False
    assert _compiles["n"] == 0
    assert float(lag.constrain(r.params)["alpha"]) == pytest.approx(TRUE["alpha"], rel=0.05)


def _write(path, xs, us, order) -> None:
    """The demonstrations as a table, each episode's rows written in `order(e)`'s order."""
    columns = step_columns((ColumnSpec("obs.x"), ColumnSpec("action.u")))
    with TableWriter(str(path), columns, {"kind": "demos"}) as w:
        for e in range(len(xs)):
            t = order(e)
            w.write_episode({"episode": np.full(len(t), e, np.int32), "step": t.astype(np.int32),
                             "seed": np.full(len(t), e, np.int64), "obs.x": xs[e][t], "action.u": us[e][t],
                             "reward": np.zeros(len(t), np.float32), "terminated": np.zeros(len(t), bool),
                             "truncated": np.zeros(len(t), bool)})


def test_rows_out_of_step_order_are_fitted_in_step_order(tmp_path, lag):
    """A table whose rows are not in step order within an episode (merged or edited by hand) is
    read in the order of its "step" column, so the fit runs each episode through time as it
    happened; two rows of one episode at one step are refused with a sentence."""
    xs, us = generate(episodes=3, steps=8)
    rng = np.random.default_rng(1)
    _write(tmp_path / "ordered.parquet", xs, us, lambda e: np.arange(8))
    _write(tmp_path / "shuffled.parquet", xs, us, lambda e: rng.permutation(8))
    ordered = load_demos(read_table(str(tmp_path / "ordered.parquet")), lag.program)
    shuffled = load_demos(read_table(str(tmp_path / "shuffled.parquet")), lag.program)
    np.testing.assert_array_equal(shuffled.obs["x"], ordered.obs["x"])
    np.testing.assert_array_equal(shuffled.actions["u"], ordered.actions["u"])
    np.testing.assert_array_equal(shuffled.episode, ordered.episode)

    _write(tmp_path / "twice.parquet", xs, us, lambda e: np.array([0, 1, 2, 3, 3, 5, 6, 7]))
    with pytest.raises(FitError, match=r"two rows of episode 0 at step 3; a policy with memory is fitted "
                                        r"through each episode in step order"):
        load_demos(read_table(str(tmp_path / "twice.parquet")), lag.program)

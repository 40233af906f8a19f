"""`polc fit` without recompiling (issue 18): the persistent compilation cache
(`polc.runtime.il.jaxcache`) and the training step compiled once per structure
(`polc.runtime.il.step`).

The cache's directory and switches are checked in child processes, which start with
no jax imported (as `polc` does) and an XDG_CACHE_HOME of their own: a test never
writes to ~/.cache. Compiles are counted with jax.monitoring's
`/jax/core/compile/backend_compile_duration` event (one per XLA compile).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import polc
from polc.cli import main
from polc.runtime.il import jaxcache
from polc.runtime.envs import toy
from polc.runtime.il import step as fit_step
from polc.runtime.il.train import FitConfig, fit, load_demos
from polc.runtime.io.table import TableWriter, read_table
from polc.runtime.trace.rollout import RolloutConfig, TraceLayout, rollout

QUICK = ["--restarts", "2", "--epochs", "30", "--check-episodes", "0", "--prior-scale", "inf", "-q"]
CHILD = "import sys; from polc.cli import main; sys.exit(main(sys.argv[1:]))"

_compiles = {"on": False, "n": 0}


def _count(name: str, secs: float, **kw) -> None:
    if _compiles["on"] and name == "/jax/core/compile/backend_compile_duration":
        _compiles["n"] += 1


jax.monitoring.register_event_duration_secs_listener(_count)


def compiles_during(fn):
    """(fn(), the number of XLA compiles it made)."""
    _compiles.update(on=True, n=0)
    try:
        return fn(), _compiles["n"]
    finally:
        _compiles["on"] = False


def compiled(src: str):
    return polc.loads(src, "reach.pol", analyze=False).compile()


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory) -> str:
    policy = compiled(toy.reach_policy(0.8, 0.6, 0.1))
    path = str(tmp_path_factory.mktemp("demos") / "reach.parquet")
    with TableWriter(path, TraceLayout(policy.program, toy.SPEC.schema).columns(), {"kind": "test"}) as w:
        rollout(policy, policy.init(jax.random.PRNGKey(0)), toy.SPEC, range(20), RolloutConfig(sample=True),
                lambda ep: w.write_episode(ep.columns))
    return path


@pytest.fixture(scope="module")
def pol_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("pol") / "reach.pol"
    path.write_text(toy.reach_policy(kp=0.3, kd=0.1, std=0.5))
    return str(path)


def child_fit(pol: str, demos: str, out: Path, cache_home: Path, **env_extra: str) -> subprocess.CompletedProcess:
    """`polc fit` in a fresh process whose cache lives under `cache_home`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", jaxcache.OFF_VARIABLE, "TF_CPP_MIN_LOG_LEVEL")}
    env.update(XDG_CACHE_HOME=str(cache_home), JAX_PLATFORMS="cpu", **env_extra)
    p = subprocess.run([sys.executable, "-c", CHILD, "fit", pol, "--demos", demos, "-o", str(out), *QUICK],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def weights(path: Path) -> dict:
    data = json.loads(path.read_text())
    return {"weights": data["weights"], "val_loss": data["fit"]["val_loss"], "restarts": data["fit"]["restarts"]}


def entries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.mark.slow
def test_the_cache_fills_under_xdg_cache_home_and_gives_the_same_weights(pol_path, demo_path, tmp_path):
    home = tmp_path / "xdg"
    cold = child_fit(pol_path, demo_path, tmp_path / "cold.params", home)
    root = home / "polc" / "jax"
    files = entries(root)
    assert files and all(f.parent == root / jaxcache.machine_key() for f in files)  # one directory per CPU
    assert "cpu_aot_loader" not in cold.stderr
    warm = child_fit(pol_path, demo_path, tmp_path / "warm.params", home)
    assert "cpu_aot_loader" not in warm.stderr and "Assume version compatibility" not in warm.stderr
    assert {f.name for f in entries(root)} == {f.name for f in files}  # every compile was loaded, none new
    off = child_fit(pol_path, demo_path, tmp_path / "off.params", tmp_path / "off", POLC_NO_COMPILE_CACHE="1")
    assert not entries(tmp_path / "off")
    assert weights(tmp_path / "cold.params") == weights(tmp_path / "warm.params") == weights(tmp_path / "off.params")
    assert off.stderr.count("\n") == cold.stderr.count("\n")  # the same messages, no cache noise


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_jax_compilation_cache_dir_is_respected(pol_path, demo_path, tmp_path):
    own = tmp_path / "own"
    child_fit(pol_path, demo_path, tmp_path / "x.params", tmp_path / "xdg", JAX_COMPILATION_CACHE_DIR=str(own))
    assert entries(own) and not entries(tmp_path / "xdg")


@pytest.fixture
def fresh_cache_state(monkeypatch):
    """jaxcache as in a new process, whose configuration of jax is recorded, not applied
    (this test process shares one jax)."""
    configured = []
    monkeypatch.setattr(jaxcache, "_state", {})
    monkeypatch.setattr(jaxcache, "_configure", configured.append)
    for k in ("JAX_COMPILATION_CACHE_DIR", jaxcache.OFF_VARIABLE):
        monkeypatch.delenv(k, raising=False)
    return configured


def test_enable_uses_xdg_cache_home_and_decides_once(fresh_cache_state, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = jaxcache.enable()
    assert path == str(tmp_path / "polc" / "jax" / jaxcache.machine_key()) and Path(path).is_dir()
    assert fresh_cache_state == [path]
    monkeypatch.setenv(jaxcache.OFF_VARIABLE, "1")
    assert jaxcache.enable() == path and fresh_cache_state == [path]  # the first call decided


@pytest.mark.parametrize("value", ["1", "yes", "true"])
def test_polc_no_compile_cache_turns_it_off(fresh_cache_state, monkeypatch, tmp_path, value):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(jaxcache.OFF_VARIABLE, value)
    assert jaxcache.enable() is None and fresh_cache_state == [] and not any(tmp_path.iterdir())


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_an_unwritable_cache_directory_warns_once_and_fit_still_runs(fresh_cache_state, monkeypatch, tmp_path,
                                                                     pol_path, demo_path, capsys):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")  # mkdir under a file fails, for root too (unlike permission bits)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    out = tmp_path / "fit.params"
    assert main(["fit", pol_path, "--demos", demo_path, "-o", str(out), *QUICK]) == 0
    assert main(["fit", pol_path, "--demos", demo_path, "-o", str(out), *QUICK]) == 0
    err = capsys.readouterr().err
    warning = [ln for ln in err.splitlines() if "compile cache" in ln]
    assert len(warning) == 1 and warning[0].startswith(f"polc: warning: the compile cache {blocker}/polc/jax/")
    assert "cannot be used (Not a directory); running without it (set POLC_NO_COMPILE_CACHE=1" in warning[0]
    assert fresh_cache_state == [] and out.exists()


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_second_fit_of_the_same_structure_compiles_nothing(demo_path):
    demos = load_demos(read_table(demo_path), compiled(toy.reach_policy()).program)
    config = FitConfig(restarts=2, max_epochs=30, prior_scale=0.5)
    first = fit(compiled(toy.reach_policy(kp=0.3, kd=0.1)), demos, config)
    # A new compile of the same source, and one with other declared values: the same structure.
    again, n_again = compiles_during(lambda: fit(compiled(toy.reach_policy(kp=0.3, kd=0.1)), demos, config))
    other, n_other = compiles_during(lambda: fit(compiled(toy.reach_policy(kp=0.5, kd=0.2)), demos, config))
    assert n_again == 0 and n_other == 0
    assert _same(first.params, again.params) and first.best == again.best
    assert not _same(first.params, other.params)  # the other start (and pull centre) is used, not the cached one's
    # The reused step gives what a freshly compiled one gives, bit for bit.
    fit_step.clear_cache()
    fresh, n_fresh = compiles_during(lambda: fit(compiled(toy.reach_policy(kp=0.5, kd=0.2)), demos, config))
    assert n_fresh > 0 and _same(fresh.params, other.params) and fresh.best == other.best


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_another_structure_gets_its_own_step(demo_path):
    demos = load_demos(read_table(demo_path), compiled(toy.reach_policy()).program)
    config = FitConfig(restarts=1, max_epochs=5, prior_scale=math.inf)
    fit(compiled(toy.reach_policy()), demos, config)
    capped = toy.reach_policy(kd=0.1).replace("weight kd : real >= 0", "weight kd : real in [0, 0.5]")
    _, n = compiles_during(lambda: fit(compiled(capped), demos, config))
    assert n > 0
    assert fit_step.structure_key(compiled(capped).program) != fit_step.structure_key(
        compiled(toy.reach_policy()).program)
    assert fit_step.structure_key(compiled(toy.reach_policy(kp=2.0)).program) == fit_step.structure_key(
        compiled(toy.reach_policy()).program)  # declared values are arguments, not structure


def _same(a: dict, b: dict) -> bool:
    import numpy as np

    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_demonstration_lengths_in_one_bucket_share_the_compiled_code(demo_path):
    from polc.runtime.il.train import bucket

    assert [bucket(n) for n in (1, 16, 17, 200, 256, 257)] == [16, 16, 32, 256, 256, 512]
    demos = load_demos(read_table(demo_path), compiled(toy.reach_policy()).program)
    config = FitConfig(restarts=1, max_epochs=3, prior_scale=0.5, batch_size=64)
    policy = compiled(toy.reach_policy(kp=0.4))
    # 240 rows: 192 training rows, 3 batches of 64 padded to 4 (the 4th, padding only, is
    # no Adam step); 48 validation rows padded to 64.
    fit(policy, demos.take(np.arange(240)), config)
    # 250, 256 and 300 rows: 200, 205 and 240 training rows (4 batches), 50, 51 and 60 validation rows.
    _, n = compiles_during(lambda: fit(policy, demos.take(np.arange(250)), config))
    _, n2 = compiles_during(lambda: fit(policy, demos.take(np.arange(256)), config))
    _, n3 = compiles_during(lambda: fit(policy, demos.take(np.arange(300)), config))
    assert n == 0 and n2 == 0 and n3 == 0
    assert demos.size >= 420  # 336 training rows: 6 batches, padded to 8; 84 validation rows to 128
    _, n4 = compiles_during(lambda: fit(policy, demos.take(np.arange(420)), config))  # the next bucket
    assert n4 > 0


def _host_loop(policy, demos, config: FitConfig):
    """Restart 0 as `polc fit` ran it before the epochs were compiled together: one call
    per epoch and the stopping rules in Python (float64), unpadded rows."""
    import numpy as np

    from polc.runtime.il.losses import Batch, centre
    from polc.runtime.il.train import split

    train, val = split(demos, config.val_fraction, config.seed)
    step = fit_step.fit_step(policy, policy.init(jax.random.PRNGKey(0)), config)

    def batch(d):
        return Batch(d.obs, d.actions, np.ones(d.size, np.float32))

    data, val_data, n, c = batch(train), batch(val), np.int32(train.size), centre(policy, config.prior_scale)
    flat = step.ravel(policy.init(jax.random.PRNGKey(0)))
    state = (flat, step.init(flat, fit_step.learning_rates(policy, policy.init(jax.random.PRNGKey(0)), config)))
    rng = np.random.default_rng([config.seed, 0])
    best_val, best_epoch, best, decayed, factor = float(step.val(flat, val_data, n, c)), 0, flat, 0, 1.0
    nb = -(-train.size // config.batch_size)
    for epoch in range(1, config.max_epochs + 1):
        idx = np.concatenate([rng.permutation(train.size), np.zeros(nb * config.batch_size - train.size, np.int64)])
        state, losses = step.epoch(state, idx.astype(np.int32).reshape(nb, -1), data, val_data, n, c)
        val_loss = float(losses[1])
        if val_loss < best_val - config.min_delta * abs(best_val):
            best_val, best_epoch, best = val_loss, epoch, state[0]
        if epoch - best_epoch >= config.patience:
            break
        if epoch - max(best_epoch, decayed) >= config.lr_patience:
            factor, decayed = factor * config.lr_decay, epoch
            state = (state[0], fit_step.with_decay(state[1], factor))
    return step.unravel(best), epoch, best_epoch


@pytest.mark.slow  # about 2 s: 400 epochs one call at a time
def test_the_compiled_epochs_fit_what_one_call_per_epoch_fits(demo_path):
    demos = load_demos(read_table(demo_path), compiled(toy.reach_policy()).program)
    demos = demos.take(np.arange(400))  # 320 training rows: 2 batches of 256, the second padded
    config = FitConfig(restarts=1, max_epochs=400, patience=40, lr_patience=10, prior_scale=0.5)
    policy = compiled(toy.reach_policy(kp=0.3, kd=0.1, std=0.5))
    result = fit(policy, demos, config)
    params, epochs, best_epoch = _host_loop(policy, demos, config)
    assert result.best.stopped == "early stopping" and result.best.epochs == epochs < 400
    assert result.best.best_epoch == best_epoch
    assert _same(result.params, params)  # bit for bit: the stopping and decay decisions agree

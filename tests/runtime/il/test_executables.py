"""Executables kept on disk (`polc.runtime.io.executables`, issue 40): a warm process loads
a registered policy's compiled rollout step and fit steps instead of tracing and lowering
them, and gets the same numbers bit for bit; and jax's import spared its scan of every
installed distribution's metadata (`jaxcache.skip_plugin_scan`).

The store lives under each test's own XDG_CACHE_HOME. "A new process" is imitated by a new
`cached(...)` object (which holds no executable) and the rollout's compiled-step memo cleared."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import polc
from polc.runtime.envs import toy
from polc.runtime.il import jaxcache
from polc.runtime.io import executables
import importlib
from polc.runtime.trace.rollout import RolloutConfig, TraceLayout, make_step_fn, rollout

rollout_module = importlib.import_module("polc.runtime.trace.rollout")

SOURCE = toy.reach_policy(kp=0.7, kd=0.4, std=0.2)


@contextlib.contextmanager
def jax_cache(directory):
    """JAX's persistent cache in `directory` (None: off) for this process, then as it was."""
    from jax.experimental.compilation_cache.compilation_cache import reset_cache

    before = (jax.config.jax_enable_compilation_cache, jax.config.jax_compilation_cache_dir)
    jax.config.update("jax_enable_compilation_cache", directory is not None)
    if directory is not None:
        jax.config.update("jax_compilation_cache_dir", str(directory))
    reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", before[0])
        jax.config.update("jax_compilation_cache_dir", before[1])
        reset_cache()


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(jaxcache.OFF_VARIABLE, raising=False)
    monkeypatch.delenv(jaxcache.JAX_VARIABLE, raising=False)  # the session's: the store goes under tmp_path
    monkeypatch.setattr(rollout_module, "_compiled", type(rollout_module._compiled)())
    with jax_cache(None):  # every compile is XLA's own, so each is kept (see the last test for the other case)
        yield executables.directory()


def registered(source: str = SOURCE):
    policy = polc.loads(source, "reach.pol", analyze=False).compile()
    executables.register(policy, source)
    return policy


def step_inputs(policy, n: int = 3):
    layout = TraceLayout(policy.program, toy.SPEC.schema)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (n, layout.obs_size)).astype(np.float32)
    seeds, steps = np.arange(n, dtype=np.int32), np.ones(n, np.int32)
    return layout, (policy.init(jax.random.PRNGKey(0)), obs, {}, seeds, steps)


def same(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.slow  # three XLA compiles of the sampled, traced step (1.5 s or more)
def test_a_step_is_compiled_and_stored_once_then_loaded_with_the_same_results(store):
    policy = registered()
    layout, args = step_inputs(policy)
    config = RolloutConfig(trace=True, sample=True)  # the noise key and the traced row in the executable
    plain = make_step_fn(policy, layout, config)
    before = executables.counts()
    first = executables.cached(make_step_fn(policy, layout, config), policy, "rollout.step", "k")
    assert first is not plain and type(first).__name__ == "_Cached"
    out_first = first(*args)
    files = list(store.glob("*.exe"))
    assert len(files) == 1
    again = executables.cached(make_step_fn(policy, layout, config), policy, "rollout.step", "k")  # a new process
    out_again = again(*args)
    counts = executables.counts()
    assert counts["misses"] - before["misses"] == 1 and counts["hits"] - before["hits"] == 1
    assert counts["stored"] - before["stored"] == 1 and list(store.glob("*.exe")) == files
    same(out_first, plain(*args))
    same(out_again, plain(*args))
    _, args5 = step_inputs(policy, 5)  # other argument shapes: another executable beside it
    again(*args5)
    assert len(list(store.glob("*.exe"))) == 2


def test_the_key_separates_sources_callers_keys_and_nothing_is_cached_unregistered_or_off(store, monkeypatch):
    policy, other = registered(), registered(toy.reach_policy(kp=0.9, kd=0.4, std=0.2))
    layout, args = step_inputs(policy)
    for p, key in ((policy, "a"), (policy, "b"), (other, "a")):
        executables.cached(make_step_fn(p, layout, RolloutConfig(trace=False)), p, "rollout.step", key)(*args)
    assert len(list(store.glob("*.exe"))) == 3
    # NumPy rows and jax arrays of the same type: one executable (as one jit cache entry)
    step = executables.cached(make_step_fn(policy, layout, RolloutConfig(trace=False)), policy, "rollout.step", "a")
    before = executables.counts()
    step(*args)
    step(*jax.tree.map(jax.numpy.asarray, args))
    assert executables.counts()["hits"] - before["hits"] == 1 and len(list(store.glob("*.exe"))) == 3
    unregistered = polc.loads(SOURCE, "reach.pol", analyze=False).compile()
    jitted = make_step_fn(unregistered, layout, RolloutConfig(trace=False))
    assert executables.cached(jitted, unregistered, "rollout.step", "a") is jitted
    monkeypatch.setenv(jaxcache.OFF_VARIABLE, "1")
    assert executables.directory() is None
    jitted = make_step_fn(policy, layout, RolloutConfig(trace=False))
    assert executables.cached(jitted, policy, "rollout.step", "a") is jitted


def test_an_unreadable_file_or_an_executable_that_fails_to_run_is_compiled_again(store, monkeypatch):
    policy = registered()
    layout, args = step_inputs(policy)
    plain = make_step_fn(policy, layout, RolloutConfig(trace=False))

    def fresh():
        return executables.cached(make_step_fn(policy, layout, RolloutConfig(trace=False)), policy, "s", "k")

    fresh()(*args)
    (path,) = store.glob("*.exe")
    path.write_bytes(b"not an executable")
    same(fresh()(*args), plain(*args))  # a miss: compiled and stored again
    assert path.read_bytes() != b"not an executable"

    def broken(*a):  # what jaxlib 0.9.2 gave for a cache-loaded executable serialized again
        raise jax.errors.JaxRuntimeError("NOT_FOUND: Function add_divide_fusion not found (type id: 1)")

    monkeypatch.setattr(executables, "_load", lambda p: broken)
    same(fresh()(*args), plain(*args))


def test_a_rollout_of_a_registered_policy_gives_the_same_episodes_from_the_stored_step(store):
    seeds, config = range(100, 104), RolloutConfig(n_envs=2, trace=False)
    unregistered = polc.loads(SOURCE, "reach.pol", analyze=False).compile()
    params = unregistered.init(jax.random.PRNGKey(0))
    expected = rollout(unregistered, params, toy.SPEC, seeds, config)
    before = executables.counts()
    first = rollout(registered(), params, toy.SPEC, seeds, config)
    rollout_module._compiled.clear()
    again = rollout(registered(), params, toy.SPEC, seeds, config)  # a new compile of the same file
    counts = executables.counts()
    assert counts["misses"] - before["misses"] == 1 and counts["hits"] - before["hits"] == 1
    for result in (first, again):
        same(result.returns, expected.returns)
        same(result.lengths, expected.lengths)


def test_polc_eval_registers_its_policy(store, tmp_path, capsys):
    from polc.cli import main

    pol = tmp_path / "reach.pol"
    pol.write_text(SOURCE)
    toy.register()
    assert main(["eval", str(pol), "--env", "toy_reach", "--episodes", "2", "--json"]) == 0
    assert len(list(store.glob("*.exe"))) == 1
    first = capsys.readouterr().out
    rollout_module._compiled.clear()
    assert main(["eval", str(pol), "--env", "toy_reach", "--episodes", "2", "--json"]) == 0
    assert capsys.readouterr().out == first and len(list(store.glob("*.exe"))) == 1


SCAN_CHILD = textwrap.dedent("""
    import importlib.metadata as md, sys
    reads = []
    real = md.PathDistribution.read_text
    md.PathDistribution.read_text = lambda self, name: reads.append(str(self._path)) or real(self, name)
    if sys.argv[1] == "skip":
        from polc.runtime.il.jaxcache import skip_plugin_scan
        skip_plugin_scan()
    import jax.numpy as jnp
    from jax._src.numpy import array_constructors
    ext = array_constructors.rocm_plugin_extension
    print(len(reads), getattr(ext, "MARK", None), float(jnp.arange(3.0).sum()))
""")


@pytest.mark.slow  # two child processes importing jax
def test_jax_import_reads_only_a_rocm_plugins_metadata_and_finds_the_same_plugin(tmp_path):
    # A fake ROCm plugin, found by jax's scan by the Name in its metadata.
    info = tmp_path / "jax_rocm9_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jax-rocm9-plugin\nVersion: 0.1\n")
    (tmp_path / "jax_rocm9_plugin").mkdir()
    (tmp_path / "jax_rocm9_plugin" / "__init__.py").write_text("")
    (tmp_path / "jax_rocm9_plugin" / "rocm_plugin_extension.py").write_text("MARK = 'fake rocm'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path + [str(tmp_path)]), JAX_PLATFORMS="cpu")  # found last
    out = {}
    for mode in ("skip", "scan"):
        p = subprocess.run([sys.executable, "-c", SCAN_CHILD, mode], env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        out[mode] = p.stdout.split()
    assert out["skip"][1:] == out["scan"][1:] == ["fake", "rocm", "3.0"]
    assert int(out["skip"][0]) <= 1 < 50 < int(out["scan"][0])  # one METADATA read, against every one


def test_the_store_is_beside_polcs_compile_cache_or_inside_the_users_own_jax_cache(store, monkeypatch, tmp_path):
    assert store == tmp_path / "polc" / "executables" / jaxcache.machine_key()
    monkeypatch.setenv(jaxcache.JAX_VARIABLE, str(tmp_path / "polc" / "jax" / jaxcache.machine_key()))  # as enable sets it
    assert executables.directory() == store
    monkeypatch.setenv(jaxcache.JAX_VARIABLE, str(tmp_path / "own"))
    assert executables.directory() == tmp_path / "own" / "polc-executables"


def test_a_call_inside_another_trace_is_jits_own(store):
    policy = registered()
    layout, args = step_inputs(policy)
    jitted = make_step_fn(policy, layout, RolloutConfig(trace=False))
    step = executables.cached(jitted, policy, "rollout.step", "k")
    inner = jax.jit(lambda obs: step(args[0], obs, {}, args[3], args[4])[0])
    same(inner(args[1]), jitted(*args)[0])
    assert not list(store.glob("*.exe"))  # nothing compiled or stored for the traced call


def test_an_executable_jaxs_persistent_cache_loaded_is_used_but_not_kept(store, tmp_path):
    # jaxlib 0.9.2 serializes such an executable without its code: it must not be stored.
    policy = registered()
    layout, args = step_inputs(policy)
    with jax_cache(tmp_path / "jax"):
        executables.cached(make_step_fn(policy, layout, RolloutConfig(trace=False)), policy, "s", "a")(*args)
        assert len(list(store.glob("*.exe"))) == 1  # XLA compiled it (and JAX's cache wrote it)
        step = executables.cached(make_step_fn(policy, layout, RolloutConfig(trace=False)), policy, "s", "b")
        out = step(*args)  # another key, the same program: JAX's cache loads it
        assert len(list(store.glob("*.exe"))) == 1
    same(out, make_step_fn(policy, layout, RolloutConfig(trace=False))(*args))


def test_the_fits_steps_are_kept_by_structure_not_by_source(store):
    from polc.runtime.il import step as fit_step
    from polc.runtime.il.train import FitConfig

    config = FitConfig(restarts=1, max_epochs=2)
    one, other = registered(toy.reach_policy(kp=0.3)), registered(toy.reach_policy(kp=0.9))
    params = one.init(jax.random.PRNGKey(0))
    lr = fit_step.learning_rates(one, params, config)
    fit_step.clear_cache()
    first = fit_step.fit_step(one, params, config)
    flat = first.ravel(params)
    first.init(flat, lr)
    fit_step.clear_cache()
    before = executables.counts()
    again = fit_step.fit_step(other, other.init(jax.random.PRNGKey(0)), config)  # other declared values
    same(again.init(flat, lr), first.init(flat, lr))
    assert executables.counts()["hits"] - before["hits"] == 1
    fit_step.clear_cache()

"""`polc rl --engine brax`: the compiled policy as brax's PPO network.

- equivalence: the brax-wrapped policy's deterministic action is the compiled
  mean, its log-density of a draw is the compiled `log_prob`, with actions in
  the environment's order whatever the declaration order;
- a toy brax Env (pure jax, compiles in seconds): `ppo.train` changes the
  params, keeps every constraint, writes polc params that load, resumes;
- multi-device: in a subprocess with two forced host devices, training runs
  pmapped over both (num_envs must divide by them);
- a CPU smoke run on door_mjx through the CLI, then `polc eval` on its params;
- CLI usage errors between the two engines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polc
from polc.cli import main
from polc.runtime.envs.door_mjx_scene import DOOR_MJX
from polc.runtime.envs.schema import EnvSchema, Field
from polc.runtime.rl.brax import BraxConfig, BraxError, train_brax
from polc.runtime.rl.brax.networks import policy_apply, policy_network_factory, polc_normal

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DOOR_POL = str(ROOT / "examples" / "door_mjx" / "initial.pol")
DOOR_DEMO = str(ROOT / "examples" / "door_mjx" / "demo.parquet")

TOY = EnvSchema("toy_brax", "none", "1", obs=(Field("pos", (2,), -1.0, 1.0, "position"),
                                              Field("goal", (2,), -1.0, 1.0, "target")),
                actions=(Field("ax", (), -1.0, 1.0, "x velocity"), Field("ay", (), -1.0, 1.0, "y velocity")))

TOY_POL = """policy toy "Reach the goal."
obs goal : real[2] in [-1, 1]
obs pos  : real[2] in [-1, 1]
weight k : real in [0, 5] = 1      "gain"
weight s : real in [0.05, 1] = 0.3 "noise"
latent move = k * (goal - pos)
action ay : real in [-0.5, 0.5] = clip(move[1], -0.5, 0.5) ~ normal(std = s)
action ax : real in [-1, 1] = clip(move[0], -1, 1) ~ normal(std = s)
"""


def toy_env():
    """A point that moves 0.1 * action per step toward a random goal; reward -distance."""
    with warnings.catch_warnings():  # brax.envs imports jaxopt, which warns that it is unmaintained
        warnings.filterwarnings("ignore", message="JAXopt is no longer maintained", category=DeprecationWarning)
        from brax.envs.base import Env, State

    class ToyReach(Env):
        observation_size, action_size, backend = 4, 2, "jax"

        def reset(self, rng):
            goal = jax.random.uniform(rng, (2,), minval=-0.8, maxval=0.8)
            zero = jnp.zeros((), jnp.float32)
            return State(None, jnp.concatenate([jnp.zeros(2), goal]), zero, zero, {}, {})

        def step(self, state, action):
            pos = jnp.clip(state.obs[:2] + 0.1 * jnp.clip(action, -1, 1), -1, 1)
            goal = state.obs[2:]
            reward = -jnp.sqrt(jnp.sum(jnp.square(pos - goal)))
            return state.replace(obs=jnp.concatenate([pos, goal]), reward=reward)

    return ToyReach()


@pytest.fixture(scope="module")
def toy_policy():
    return polc.loads(TOY_POL).compile()


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_deterministic_action_is_the_compiled_mean_and_log_prob_agrees(toy_policy):
    """Actions are declared (ay, ax) but the environment's order is (ax, ay)."""
    apply = jax.jit(policy_apply(toy_policy, TOY))
    dist = polc_normal(2)
    params = toy_policy.unconstrain({"k": 0.7, "s": 0.2})
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.uniform(-1, 1, (5, 3, 4)), jnp.float32)  # brax's (batch, unroll, obs) axes
    out = apply(params, obs)
    assert out.shape == (5, 3, 4)
    mode = np.asarray(dist.mode(out))
    draws = dist.sample_no_postprocessing(out, jax.random.PRNGKey(1))
    logp = np.asarray(dist.log_prob(out, draws))
    for i in range(5):
        for t in range(3):
            named = {"pos": obs[i, t, :2], "goal": obs[i, t, 2:]}
            actions, _ = toy_policy.apply(params, named)
            np.testing.assert_allclose(mode[i, t], [actions["ax"], actions["ay"]], rtol=0, atol=1e-6)
            drawn = {"ax": draws[i, t, 0], "ay": draws[i, t, 1]}
            np.testing.assert_allclose(logp[i, t], toy_policy.log_prob(params, named, drawn), rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(dist.postprocess(draws)) == np.asarray(draws))  # no squashing


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_door_policy_wrapped_mean_equals_compiled_mean():
    policy = polc.load(DOOR_POL).compile()
    params = policy.init(jax.random.PRNGKey(0))
    from polc.runtime.io.table import read_table

    table = read_table(DOOR_DEMO)
    flat = np.concatenate([table.column("obs." + f.name).reshape(500, -1) for f in DOOR_MJX.obs], axis=1)[:50]
    out = jax.jit(policy_apply(policy, DOOR_MJX))(params, jnp.asarray(flat, jnp.float32))
    mode = np.asarray(polc_normal(3).mode(out))
    obs_names = [o.name for o in policy.program.obs]
    for t in (0, 10, 49):
        named = {n: table.column("obs." + n)[t] for n in obs_names}
        actions, _ = policy.apply(params, named)
        np.testing.assert_allclose(mode[t], [actions[k] for k in ("dx", "dy", "dz")], atol=1e-6)
    assert np.allclose(np.asarray(out)[:, 3:], 0.1)  # the declared std, untouched


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_policy_without_noise_or_with_other_actions_is_refused():
    quiet = polc.loads(TOY_POL.replace(" ~ normal(std = s)", "", 1)).compile()
    with pytest.raises(BraxError, match='action "ay" has no noise'):
        policy_network_factory(quiet, TOY, quiet.init(jax.random.PRNGKey(0)))
    door = polc.load(DOOR_POL).compile()
    with pytest.raises(BraxError, match='must declare exactly the actions of environment "toy_brax"'):
        policy_network_factory(door, TOY, door.init(jax.random.PRNGKey(0)))


@pytest.mark.slow  # 35 s alone: two brax trainings (make test-fast keeps the unit tests above)
def test_toy_training_changes_params_keeps_constraints_and_resumes(toy_policy, tmp_path,
                                                                  xla_without_most_optimizations):
    start = toy_policy.unconstrain({"k": 0.2, "s": 0.9})
    config = BraxConfig(num_envs=4, timesteps=2400, episode_length=20, evals=1, eval_envs=4,
                        learning_rate=0.05, value_hidden=(16,))
    out = str(tmp_path / "run")
    first = train_brax(toy_policy, start, toy_env(), config, out, schema=TOY)
    values = toy_policy.constrain(first.params)
    assert float(values["k"]) != pytest.approx(0.2) and 0 <= float(values["k"]) <= 5
    assert 0.05 <= float(values["s"]) <= 1
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    assert log["timesteps"] >= 2400 and log["devices"] == 1 and len(log["log"]) == 1  # evals=1: the end only
    assert log["log"][0]["timesteps"] == log["timesteps"] and (tmp_path / "run" / "curve.png").stat().st_size > 0
    from polc.runtime.io.params import load_params

    loaded = load_params(str(tmp_path / "run" / "rl.params"), toy_policy)
    np.testing.assert_allclose(np.asarray(loaded["k"]), np.asarray(first.params["k"]), rtol=1e-6)
    with pytest.raises(BraxError, match="already holds a brax run"):
        train_brax(toy_policy, start, toy_env(), config, out, schema=TOY)
    with pytest.raises(BraxError, match="used other settings"):
        train_brax(toy_policy, start, toy_env(), BraxConfig(**{**config.__dict__, "num_envs": 8}), out,
                   schema=TOY, resume=True)
    # Resumed to twice the budget: its session trains as many steps per epoch as the first, so
    # brax's training epoch is the same program and comes from the session's compile cache.
    more = BraxConfig(**{**config.__dict__, "timesteps": 2 * log["timesteps"]})
    second = train_brax(toy_policy, start, toy_env(), more, out, schema=TOY, resume=True)
    log2 = second.log
    assert log2["sessions"] == 2 and log2["timesteps"] >= 2 * log["timesteps"] and log2["log"][:1] == log["log"]
    assert all(b["timesteps"] > a["timesteps"] for a, b in zip(log2["log"], log2["log"][1:]))


MULTI = """
import json, sys
sys.path.insert(0, {here!r})
import jax, polc
from test_brax_engine import TOY, TOY_POL, toy_env
from polc.runtime.rl.brax import BraxConfig, BraxError, train_brax
policy = polc.loads(TOY_POL).compile()
params = policy.init(jax.random.PRNGKey(0))
try:
    train_brax(policy, params, toy_env(), BraxConfig(num_envs=3, timesteps=10, episode_length=20), {out!r} + "3",
               schema=TOY)
except BraxError as e:
    odd = str(e)
config = BraxConfig(num_envs=4, timesteps=800, episode_length=20, evals=1, eval_envs=2, value_hidden=(8,))
result = train_brax(policy, params, toy_env(), config, {out!r}, schema=TOY)
print(json.dumps({{"devices": [str(d) for d in jax.local_devices()], "log_devices": result.log["devices"],
                  "timesteps": result.log["timesteps"], "odd": odd}}))
"""


@pytest.mark.slow  # 35 s alone: a subprocess with two forced host devices trains
def test_training_shards_over_two_forced_host_devices(tmp_path):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               JAX_DISABLE_MOST_OPTIMIZATIONS="true")  # its time is compiling, as the smoke run's
    code = MULTI.format(here=str(HERE), out=str(tmp_path / "run"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(got["devices"]) == 2 and got["log_devices"] == 2 and got["timesteps"] >= 800
    assert "--num-envs 3 must be a multiple of the 2 devices JAX sees" in got["odd"]


def polc_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, message", [
    (["--num-envs", "8"], "--num-envs belongs to the brax engine, not --engine polc"),
    (["--engine", "brax", "--resets", "4", "--num-envs", "8", "--timesteps", "10"],
     "--resets belongs to the polc and es engines, not --engine brax"),
    (["--engine", "brax", "--num-envs", "8"], "--engine brax needs --num-envs N and --timesteps T"),
    (["--engine", "brax", "--num-envs", "8", "--timesteps", "10", "--epochs", "2"],
     "--epochs belongs to the polc engine"),
    ([], "the polc engine needs --resets N"),
])
def test_engine_flags_are_usage_errors_with_the_other_engine(argv, message, tmp_path, capsys):
    code, _, err = polc_cli(capsys, "rl", DOOR_POL, "--env", "door_mjx", "-o", str(tmp_path / "r"), *argv)
    assert code == 2 and message in err


def test_brax_engine_runs_mjx_environments_only(tmp_path, capsys):
    code, _, err = polc_cli(capsys, "rl", DOOR_POL, "--env", "door", "--engine", "brax", "--num-envs", "8",
                            "--timesteps", "10", "-o", str(tmp_path / "r"))
    assert code == 2 and '--engine brax runs MJX environments only (door_mjx), not "door"' in err


@pytest.fixture
def xla_without_most_optimizations():
    """XLA's optimisations off for the test's compiles: the smoke run's time is compiling MJX's
    door step into brax's training epoch and evaluator; running them is little (in one process,
    jitting DoorMJX's reset and batched step took 39 s of CPU, 50 batched steps then 0.2 s)."""
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


@pytest.mark.slow
def test_cpu_smoke_run_on_door_mjx_then_polc_eval(tmp_path, capsys, xla_without_most_optimizations):
    """`polc rl --engine brax` trains on door_mjx from fitted params, keeps the constraints, and
    `polc eval` loads what it wrote. Compiled with XLA's optimisations off (the fixture): the
    same programs, compiled in about a fifth less CPU (docs/performance.md, section 5)."""
    out = str(tmp_path / "run")
    fit = str(tmp_path / "fit.params")
    # A short fit, no closed-loop check: the run needs fitted params to start from, not good ones.
    assert polc_cli(capsys, "fit", DOOR_POL, "--demos", DOOR_DEMO, "-o", fit, "--restarts", "1", "--epochs", "30",
                    "--check-episodes", "0", "-q")[0] == 0
    code, _, err = polc_cli(capsys, "rl", DOOR_POL, "--params", fit, "--engine", "brax", "--env", "door_mjx",
                            "--num-envs", "8", "--timesteps", "2560", "--evals", "1", "-o", out, "-q")
    assert code == 0, err
    assert "2,560 timesteps on 1 device(s)" in err
    policy = polc.load(DOOR_POL).compile()
    from polc.runtime.io.params import load_params

    before, after = load_params(fit, policy), load_params(os.path.join(out, "rl.params"), policy)
    assert any(not np.array_equal(np.asarray(before[k]), np.asarray(after[k])) for k in before)
    for w in policy.program.weights:  # constraints hold on the constrained values
        v = np.asarray(policy.constrain(after)[w.name])
        assert np.all(v >= w.lo) and np.all(v <= w.hi), w.name
    code, stdout, err = polc_cli(capsys, "eval", DOOR_POL, "--params", os.path.join(out, "rl.params"), "--env",
                                 "door_mjx", "--seeds", "2", "--json", "-q")
    assert code == 0, err
    assert 0.0 <= json.loads(stdout)["mean"] < 0.5

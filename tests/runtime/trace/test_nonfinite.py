"""No non-finite action reaches an environment, and no score comes from one.

Before this, a policy whose gas was NaN scored 999.8 on Car Racing (above the
expert's 918.8): Box2D steps a NaN action and the reward counts tiles. Every
environment polc makes refuses such an action before stepping (`NonFiniteAction`),
and `polc eval` / `polc rollout` fail with exit 1 naming the action and the step.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import polc
from polc.runtime import envs
from polc.runtime.envs import toy
from polc.runtime.trace import RolloutConfig, evaluate, rollout

from toy_cli import polc as run_polc, toy_env  # noqa: F401  (the toy env registered for the CLI tests)

NAN_POLICY = '''policy nan_push "a push of 0 / 0"
obs gap : real[2] in [-3, 3] "target - pos, and -vel"
obs vel : real in [-3, 3]   "velocity"
weight kp : real >= 0 = 1.0 "gain"
latent err = gap[0] "distance to go"
latent zero = vel - vel "always zero"
action push : real in [-1, 1] = kp * zero / zero ~ normal(std = 0.1)
'''


def _finite_action(spec, env) -> dict:
    """A valid action for the env: the expert's at the current state."""
    expert = spec.expert(env)
    expert.reset()
    return {k: np.asarray(v, np.float32) for k, v in expert.act(env).items()}


@pytest.mark.parametrize("name", ["car_racing", "door", "door_mjx", toy.NAME])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_every_builtin_env_refuses_a_non_finite_action_before_stepping(name, bad, monkeypatch):
    spec = toy.register() if name == toy.NAME else envs.get(name)
    env = spec.make()
    try:
        env.reset(seed=10_003)
        action = _finite_action(spec, env)
        env.step(action)  # one good step: the step count in the message is the episode's
        inner_steps = []
        inner = env.env
        monkeypatch.setattr(inner, "step", lambda a: inner_steps.append(a))
        first = sorted(action)[-1]
        poisoned = dict(action)
        v = np.array(poisoned[first], np.float32, copy=True)
        v.reshape(-1)[-1] = bad
        poisoned[first] = v
        with pytest.raises(envs.NonFiniteAction) as e:
            env.step(poisoned)
        assert inner_steps == []  # the simulator never saw it
        kind = "NaN" if np.isnan(bad) else ("+inf" if bad > 0 else "-inf")
        assert f'action "{first}" is {kind}' in str(e.value)
        assert "at step 1 of the episode with seed 10003" in str(e.value)
    finally:
        env.close()


def test_a_nan_param_gives_no_car_racing_score():
    """The issue's case: a NaN weight made the policy's actions NaN and scored 999.8."""
    policy = polc.load("examples/car_racing/initial.pol").compile()
    params = dict(policy.init(jax.random.PRNGKey(0)))
    params["k_gas"] = np.float32("nan")
    with pytest.raises(envs.NonFiniteAction, match='action "gas" is NaN at step 0 of the episode with seed 10000'):
        evaluate(policy, params, envs.get("car_racing"), [10_000, 10_001], RolloutConfig(n_envs=2, trace=False))


def test_a_traced_rollout_stops_at_the_first_non_finite_action():
    spec = toy.register()
    policy = polc.loads(NAN_POLICY).compile()
    params = policy.init(jax.random.PRNGKey(0))
    with pytest.raises(envs.NonFiniteAction, match='"push" is NaN at step 0'):
        rollout(policy, params, spec, [3], RolloutConfig(n_envs=1, trace=True))


def test_polc_eval_fails_with_the_action_and_step(tmp_path, capsys):
    pol = tmp_path / "nan.pol"
    pol.write_text(NAN_POLICY)
    code, out, err = run_polc(capsys, "eval", str(pol), "--env", toy.NAME, "--seeds", "3", "-q")
    assert code == 1
    assert 'polc: the policy\'s action "push" is NaN at step 0 of the episode with seed 10000' in err
    assert "return" not in out  # no score printed


def test_polc_rollout_fails_and_writes_no_trace(tmp_path, capsys):
    pol, out_file = tmp_path / "nan.pol", tmp_path / "trace.parquet"
    pol.write_text(NAN_POLICY)
    code, _, err = run_polc(capsys, "rollout", str(pol), "--env", toy.NAME, "--episodes", "2", "--seed", "0",
                            "-o", str(out_file), "-q")
    assert code == 1
    assert '"push" is NaN at step 0 of the episode with seed 0' in err
    assert not out_file.exists()

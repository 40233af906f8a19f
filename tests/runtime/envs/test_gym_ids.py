"""polc's environments are Gymnasium environments a plain install can make (issue 12,
item 4), in gymnasium's own `module:id` form, in a fresh interpreter that imported
nothing of polc first. (gymnasium 1.x has no plugin entry points, so the bare id
needs the module named; the README says so.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

MAKE = """
import sys, gymnasium as gym
assert not any(m.startswith("polc") for m in sys.modules)
for env_id in sys.argv[1:]:
    env = gym.make("polc.runtime.envs:" + env_id)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    print(env_id, env.spec.id, sorted(obs)[0], float(reward) == float(reward))
    env.close()
"""


def _make(*ids: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", MAKE, *ids], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split("\n")[:-1]


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_car_racing_and_door_are_made_by_gymnasium_id():
    lines = _make("polc/CarRacing-v0", "polc/DoorOpen-v0")
    assert [line.split()[:2] for line in lines] == [["polc/CarRacing-v0"] * 2, ["polc/DoorOpen-v0"] * 2]
    assert all(line.endswith("True") for line in lines)


def test_door_mjx_is_made_by_gymnasium_id():
    (line,) = _make("polc/DoorMJX-v0")
    assert line.split()[:2] == ["polc/DoorMJX-v0"] * 2

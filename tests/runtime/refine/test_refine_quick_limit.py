"""`polc refine --quick` shortens long episodes only (issue 34, item 11): an environment
whose own limit is shorter than --quick's 300 steps (Reacher-v5: 50) keeps it."""

from dataclasses import replace

from polc.runtime import envs
from polc.runtime.envs import registry
from polc.runtime.refine.envspec import ShortEpisodes
from polc.runtime.refine.work import QUICK, Settings, environment, quick


def test_quick_keeps_a_shorter_environment_limit():
    short = replace(envs.get("car_racing"), max_steps=50)
    with registry.using(short, "short_env"):
        spec = environment("short_env", quick(Settings()))
    assert not isinstance(spec, ShortEpisodes)
    assert spec.max_steps == 50


def test_quick_still_cuts_a_longer_environment_limit():
    spec = environment("car_racing", quick(Settings()))
    assert isinstance(spec, ShortEpisodes)
    assert spec.max_steps == QUICK["max_steps"] == 300
    assert spec.spec.max_steps == 1000

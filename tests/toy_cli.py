"""Shared by the CLI tests that run on the toy point-mass environment: the
environment registered for the test, a PD policy file, and `polc(...)` run in-process."""

import pytest

from polc.cli import main
from polc.runtime.envs import registry, toy


@pytest.fixture(autouse=True)
def toy_env(monkeypatch):
    monkeypatch.setitem(registry._REGISTRY, toy.NAME, toy.SPEC)


@pytest.fixture
def pol(tmp_path):
    path = tmp_path / "reach.pol"
    path.write_text(toy.reach_policy(kp=0.3, kd=0.1, std=0.3))
    return str(path)


def polc(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err

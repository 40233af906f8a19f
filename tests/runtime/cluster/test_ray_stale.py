"""`--ray auto` with a stale cluster record (issue 34, item 6): a /tmp/ray left by a cluster
that is gone gives a local instance within seconds (Ray itself retries it for minutes); a
live record is joined; a dead $RAY_ADDRESS is one sentence naming it. Ray is stood in for
by a recorder: only TCP connects to 127.0.0.1 happen here."""

from __future__ import annotations

import socket
import time

import pytest

from polc.runtime.cluster.connect import ClusterError, _init, cluster_record


class FakeRay:
    def __init__(self, refuse_auto: bool = False):
        self.calls: list[str] = []
        self.refuse_auto = refuse_auto

    def init(self, address=None, **_):
        self.calls.append(address)
        if address == "auto" and self.refuse_auto:
            raise ConnectionError("Could not find any running Ray instance.")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: connects are refused


@pytest.fixture
def record(tmp_path, monkeypatch):
    """Write the cluster record Ray's `ray start` leaves (under a RAY_TMPDIR of the test's own)."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "ray").mkdir()

    def write(address: str) -> str:
        (tmp_path / "ray" / "ray_current_cluster").write_text(address + "\n")
        return cluster_record()

    return write


def test_a_stale_record_starts_a_local_instance_at_once(record, capsys):
    address = f"127.0.0.1:{_closed_port()}"
    where = record(address)
    ray, t = FakeRay(), time.monotonic()
    assert _init(ray, "auto") is True
    assert time.monotonic() - t < 5 and ray.calls == ["local"]  # never ray.init("auto"): that retries for minutes
    err = capsys.readouterr().err
    assert f"polc: the Ray cluster recorded in {where} ({address}) does not answer; starting a local Ray instance" in err


def test_a_live_record_is_joined(record):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        record(address)
        ray = FakeRay()
        assert _init(ray, "auto") is False and ray.calls == [address]


def test_no_record_joins_a_running_head_or_starts_one(record):
    ray = FakeRay(refuse_auto=True)
    assert _init(ray, "auto") is True and ray.calls == ["auto", "local"]


def test_a_dead_ray_address_is_an_error_naming_it(record, monkeypatch):
    address = f"127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("RAY_ADDRESS", address)
    ray = FakeRay()
    with pytest.raises(ClusterError, match=rf"cannot reach the Ray cluster at '{address}' .*came from \$RAY_ADDRESS"):
        _init(ray, "auto")
    assert ray.calls == []

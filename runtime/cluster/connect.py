"""Joining a Ray cluster: `--ray auto` joins the one running on this machine (`ray start
--head`) or starts a local one for the command (also when the cluster record in /tmp/ray
names one that no longer answers); `--ray ADDRESS` joins that one, and an
address nobody answers at is a clear error naming it, found in seconds (Ray itself waits
a minute for a GCS that is not there).

    with connected("auto") as cluster:      # Cluster(address, started, cpus, nodes)
        ...

A cluster this command started is shut down when the block ends; a driver connection
to a running cluster is closed. When Ray is already initialised in this process (a
test's session fixture, a Ray task), that connection is used and left open.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from dataclasses import dataclass
from typing import Iterator

REACH_TIMEOUT_S = 5.0  # how long a TCP connect to the cluster's port may take before it is unreachable


class ClusterError(Exception):
    """The cluster cannot be used; the message names the address and what to do."""


@dataclass(frozen=True)
class Cluster:
    address: str   # what the command was given (auto, host:port, ray://host:port)
    started: bool  # this command started a local instance
    cpus: int      # CPUs in the whole cluster
    nodes: int     # alive nodes

    def describe(self) -> str:
        where = "a local Ray instance" if self.started else f"the Ray cluster at {self.address}"
        return f"{where}: {self.nodes} node{'s' if self.nodes != 1 else ''}, {self.cpus} CPU{'s' if self.cpus != 1 else ''}"


def _import_ray():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # polc never reports usage anywhere
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray, an optional extra of polc: pip install 'polc[ray]'") from None
    return ray


def host_port(address: str) -> tuple[str, int]:
    """`host:port` or `ray://host:port` -> (host, port); a ClusterError for anything else."""
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"'{address}' is not a Ray address: give auto, HOST:PORT (a `ray start --head` "
                           f"node, port 6379) or ray://HOST:PORT (Ray Client, port 10001)")
    return host.strip("[]"), int(port)


def verify_reachable(address: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """Raise ClusterError unless something accepts a TCP connection at `address`'s port."""
    host, port = host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise ClusterError(f"cannot reach the Ray cluster at '{address}' ({reason}); start one there with "
                           f"`ray start --head`, or use --ray auto for a local one") from None


def cluster_record() -> str:
    """The file where `ray start --head` records this machine's cluster (Ray's own lookup:
    $RAY_TMPDIR, else $TMPDIR, else /tmp, then ray/ray_current_cluster)."""
    base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, "ray", "ray_current_cluster")


def _recorded() -> tuple[str, str] | None:
    """(address, where it came from) of the cluster `auto` means: $RAY_ADDRESS, else the
    cluster record; None when neither names one."""
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env and env not in ("auto", "local"):
        return env, "$RAY_ADDRESS"
    try:
        with open(cluster_record(), encoding="utf-8") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (text, cluster_record()) if text else None


def _init_auto(ray, quiet: dict) -> bool:
    """ray.init for `--ray auto`; True when it started a local instance. A recorded cluster
    is checked with a TCP connect first: Ray itself retries a dead one for minutes. A stale
    record (a cluster that ended without `ray stop`) gives a local instance and a notice; a
    dead $RAY_ADDRESS is an error naming it."""
    found = _recorded()
    if found is None:
        try:
            ray.init(address="auto", **quiet)  # a head started some other way (Ray finds it with ps)
            return False
        except ConnectionError:  # no cluster running here: start one for this command
            ray.init(address="local", **quiet)
            return True
    address, source = found
    try:
        verify_reachable(address)
    except ClusterError as e:
        if source == "$RAY_ADDRESS":
            raise ClusterError(f"{e} (the address came from $RAY_ADDRESS; unset it for a local instance)") from None
        print(f"polc: the Ray cluster recorded in {source} ({address}) does not answer; starting a local Ray "
              "instance for this command (`ray stop` removes the stale record)", file=sys.stderr)
        ray.init(address="local", **quiet)
        return True
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ClusterError(f"cannot join the Ray cluster at '{address}' ({source}): {e}") from None
    return False


def _init(ray, address: str) -> bool:
    """ray.init for `address`; True when it started a local instance."""
    quiet = {"include_dashboard": False, "configure_logging": True}
    if address == "auto":
        return _init_auto(ray, quiet)
    verify_reachable(address)
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ClusterError(f"cannot join the Ray cluster at '{address}': {e}") from None
    return False


def _resources(ray) -> tuple[int, int]:
    cpus = int(ray.cluster_resources().get("CPU", 0))
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    return max(cpus, 1), max(nodes, 1)


@contextlib.contextmanager
def connected(address: str) -> Iterator[Cluster]:
    """Ray initialised for `address` for the block (see the module docstring)."""
    ray = _import_ray()
    if ray.is_initialized():
        yield Cluster(address, False, *_resources(ray))
        return
    started = _init(ray, address)
    try:
        cluster = Cluster(address, started, *_resources(ray))
        print(f"polc: running on {cluster.describe()}", file=sys.stderr)
        yield cluster
    finally:
        ray.shutdown()


__all__ = ["Cluster", "ClusterError", "cluster_record", "connected", "host_port", "verify_reachable"]

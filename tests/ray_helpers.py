"""What every Ray test module shares: its marks and a local Ray instance per module.

    from ray_helpers import RAY_MARKS, cluster  # noqa: F401 (a fixture)
    pytestmark = RAY_MARKS

The instance has 2 CPUs and binds 127.0.0.1 only (tests/conftest.py sets what Ray needs for
that before anything imports it); the tests talk to no other address.
"""

from __future__ import annotations

import pytest

RAY_MARKS = [
    pytest.mark.xdist_group("ray"),  # one worker runs every Ray module: one Ray instance at a time
    # Ray starts its processes with subprocess after JAX's threads exist; they exec at once.
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance for the module (2 CPUs, 127.0.0.1), shut down after it."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        yield
    finally:
        ray.shutdown()

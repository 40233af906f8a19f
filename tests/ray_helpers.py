"""What every Ray test module shares: its marks. Its local Ray instance is conftest's
session fixture `cluster`, started by the first test that asks for it and shared by the Ray
modules, which one xdist worker runs (the "ray" group).

    from ray_helpers import RAY_MARKS
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


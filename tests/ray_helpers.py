"""What every Ray test module shares: its marks. Its local Ray instance is conftest's
session fixture `cluster`, started by the first test that asks for it and shared by the Ray
modules, which one xdist worker runs (the "ray" group).

    from ray_helpers import RAY_MARKS
    pytestmark = RAY_MARKS

The instance has 2 CPUs and binds 127.0.0.1 only (tests/conftest.py sets what Ray needs for
that before anything imports it); the tests talk to no other address.
"""

from __future__ import annotations

import contextlib
import warnings

import pytest

# What the Ray modules ignore, as (message, category, module): Ray starts its processes with
# subprocess after JAX's threads exist (they exec at once), and its own modules warn of
# deprecations and leave sockets to the garbage collector.
RAY_WARNINGS = (
    (r"os\.fork\(\) was called", RuntimeWarning, ""),
    ("", DeprecationWarning, "ray"),
    ("", ResourceWarning, ""),
)

RAY_MARKS = [
    pytest.mark.xdist_group("ray"),  # one worker runs every Ray module: one Ray instance at a time
    *(
        pytest.mark.filterwarnings(f"ignore:{message}:{category.__name__}" + (f":{module}" if module else ""))
        for message, category, module in RAY_WARNINGS
    ),
]


@contextlib.contextmanager
def ray_warnings_ignored():
    """RAY_WARNINGS ignored outside a test's marks: conftest's session fixture starts Ray in the
    first Ray test and shuts it down in the teardown of whichever test the worker runs last."""
    with warnings.catch_warnings():
        for message, category, module in RAY_WARNINGS:
            warnings.filterwarnings("ignore", message, category, module)
        yield

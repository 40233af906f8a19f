"""The two test tiers. `make test` (CI) runs everything at full strength; `make test-fast`
(`POLC_TESTS=fast pytest -m "not slow"`) is the edit-test loop: it skips the tests marked
slow and runs each property-based test on a fifth of its examples (at least 10), so a
change still meets every property, only fewer random programs per property."""

import os

FAST = os.environ.get("POLC_TESTS") == "fast"


def examples(n: int) -> int:
    """Hypothesis examples for a property: `n` in the full suite, n/5 (>= 10) in the fast tier."""
    return max(10, n // 5) if FAST else n

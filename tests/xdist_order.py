"""The order `make test` hands tests to its two xdist workers: the modules holding a slow test
first, so the two workers finish together.

`--dist loadgroup` gives out the groups first (the most tests first: the sandbox's 44, the Ray modules' 36),
then one test at a time in collection order to whichever worker has room. In collection order
the suite's longest single test, tests/runtime/rl's brax CPU smoke run (109 s on an idle
machine), is handed out after 93% of the tests (the 3163rd of 3411 collected): whenever less than its
length is left for the other worker, that worker idles at the end. Modules with a test marked
`slow` (1.5 s or more alone) are moved to the front, each module kept whole and in its place
among the others (a module fixture is set up once per worker, as before), so the long tests
start early and the many short ones even out the two workers at the end.

conftest.py applies it in xdist's workers only: a serial run keeps the collection order.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

Item = TypeVar("Item")


def heavy_modules_first(items: Sequence[Item]) -> list[Item]:
    """`items` with every item of a module that has a slow-marked item before the rest; the
    order within each part is the collection order."""
    heavy = {item.path for item in items if item.get_closest_marker("slow") is not None}
    return sorted(items, key=lambda item: item.path not in heavy)  # stable: collection order kept

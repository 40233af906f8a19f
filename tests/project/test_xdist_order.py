"""The order xdist's workers get the tests in (tests/xdist_order.py): modules with a slow test
first, each whole, the collection order kept within both parts; conftest applies it only
in xdist's workers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from xdist_order import heavy_modules_first


@dataclass
class FakeItem:
    path: Path
    name: str
    slow: bool = False

    def get_closest_marker(self, name):
        return "slow" if name == "slow" and self.slow else None


def test_modules_with_a_slow_test_come_first_whole_and_in_their_order():
    a, b, c, d = (Path(f"tests/test_{m}.py") for m in "abcd")
    items = [FakeItem(a, "a1"), FakeItem(b, "b1"), FakeItem(b, "b2", slow=True), FakeItem(c, "c1"),
             FakeItem(d, "d1", slow=True), FakeItem(d, "d2"), FakeItem(a, "a2")]
    assert [i.name for i in heavy_modules_first(items)] == ["b1", "b2", "d1", "d2", "a1", "c1", "a2"]
    assert heavy_modules_first([]) == []


def test_conftest_reorders_in_xdist_workers_only(monkeypatch):
    import conftest  # tests/conftest.py, as pytest loaded it

    a, b = Path("tests/test_a.py"), Path("tests/test_b.py")
    collected = [FakeItem(a, "a1"), FakeItem(b, "b1", slow=True)]
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    items = list(collected)
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["a1", "b1"]
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["b1", "a1"]


def test_this_worker_got_its_tests_heavy_modules_first(request):
    """Under xdist (make test) no module with a slow test is collected after one without."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        pytest.skip("a serial run keeps the collection order")
    items = request.session.items
    heavy = {i.path for i in items if i.get_closest_marker("slow") is not None}
    firsts = [i.path in heavy for i in items]
    assert firsts == sorted(firsts, reverse=True)

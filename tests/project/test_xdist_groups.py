"""`make test` runs on both cores with `--dist loadgroup`, and relies on it: the Ray modules
share one Ray instance on one worker, and the quick experiment (conftest's `quick_car_racing`,
about 90 s) runs once for the modules that read it. pytest 9.2 silently stops xdist 3.8.0's
grouping (pytest-xdist#1386: tests of one group spread over the workers, each worker running
the session fixture again), so the test extra pins pytest; this test fails if grouping breaks."""

from __future__ import annotations

import subprocess
import sys

GROUPED = '''
import time, pytest
pytestmark = pytest.mark.xdist_group("shared")

@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    time.sleep(0.2)
'''


def test_tests_of_one_xdist_group_run_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", "-v", "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ran = [line for line in done.stdout.splitlines() if "PASSED" in line]  # "[gw0] [ 25%] PASSED ...@shared"
    assert len(ran) == 4 and all("@shared" in line for line in ran), done.stdout[-2000:]
    workers = {line.split()[0] for line in ran}
    assert len(workers) == 1, f"the group ran on {sorted(workers)}"

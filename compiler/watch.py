"""`polc check --watch FILE`: re-run a check whenever the file is saved.

Polls the file's modification time and size (no dependency, and it follows
editors that save by writing a new file and renaming it over the old one).
A file that disappears for a moment during such a save is waited for.
Ctrl-C ends the watch: the driver turns it into exit code 130.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Optional

POLL_SECONDS = 0.25


def _stamp(path: str) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def watch(path: str, run: Callable[[], int], poll: float = POLL_SECONDS,
          runs: Optional[int] = None) -> int:
    """Call `run` now and after every change of `path`; return the last run's exit code
    after `runs` runs (None: until interrupted)."""
    seen = _stamp(path)
    code = run()
    done = 1
    print(f"polc: watching {path} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    waiting = False
    while runs is None or done < runs:
        time.sleep(poll)
        now = _stamp(path)
        if now is None:
            if not waiting:
                print(f"polc: {path} is gone; waiting for it to come back", file=sys.stderr, flush=True)
                waiting = True
            continue
        waiting = False
        if now == seen:
            continue
        seen = now
        print(f"\npolc: {path} changed at {time.strftime('%H:%M:%S')}; checking again", file=sys.stderr,
              flush=True)
        code = run()
        done += 1
        sys.stdout.flush()
    return code

"""Compare two `polc refine` run directories file by file, ignoring what differs from run to
run by nature: wall-clock times (`seconds`, `phases`, `created`, the `done` markers' time, the
summary's table), the lock file,
run's own path and command line, and the PNG figures' bytes (matplotlib's metadata).

    .venv/bin/python scripts/compare_runs.py RUN_A RUN_B

Exit 0 when the same files hold the same content (Parquet traces: the same columns, rows and
metadata), else 1, naming each difference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TIMES = {"seconds", "created", "phases", "time", "elapsed", "command", "run",
         "table"}  # summary.json's table: its rows end in the rounds' durations (the rounds themselves are compared)


def _scrub(value, paths):  # noqa: ANN001
    if isinstance(value, dict):
        return {k: _scrub(v, paths) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_scrub(v, paths) for v in value]
    if isinstance(value, str):
        for p in paths:
            value = value.replace(p, "<RUN>")
    return value


def _content(path: Path, root: Path):  # noqa: ANN001
    paths = [str(root.resolve()), str(root)]
    if path.suffix == ".png" or path.name in ("done", ".lock"):  # a time; the pid, host and time
        return "(not compared)"
    if path.suffix == ".json":
        return json.dumps(_scrub(json.loads(path.read_text()), paths), indent=1, sort_keys=False)
    if path.suffix == ".jsonl":
        return "\n".join(json.dumps(_scrub(json.loads(line), paths)) for line in path.read_text().splitlines())
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        return repr((table.drop_columns([]).to_pydict(), _scrub(meta, paths)))
    text = path.read_text(errors="replace")
    for p in paths:
        text = text.replace(p, "<RUN>")
    return text


def main(a: str, b: str) -> int:
    ra, rb = Path(a), Path(b)
    fa = sorted(str(p.relative_to(ra)) for p in ra.rglob("*") if p.is_file())
    fb = sorted(str(p.relative_to(rb)) for p in rb.rglob("*") if p.is_file())
    bad = [f"only in {a}: {f}" for f in sorted(set(fa) - set(fb))] + [f"only in {b}: {f}" for f in sorted(set(fb) - set(fa))]
    for f in sorted(set(fa) & set(fb)):
        if _content(ra / f, ra) != _content(rb / f, rb):
            bad.append(f"differs: {f}")
    print("\n".join(bad) if bad else f"same: {len(fa)} files ({sum(f.endswith('.png') for f in fa)} PNG not compared)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

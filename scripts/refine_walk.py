"""Walk `polc refine` and count its seams (issue 36): which polc modules the run calls into,
and how often a call climbs back to a module already on the call stack below the caller
(A -> B -> A: a callee calling its caller's module back, the sign of a caller handed down).

    .venv/bin/python scripts/refine_walk.py [-o RUNDIR] [--root TREE] [-- polc refine arguments]

`--root TREE` walks another checkout of polc (e.g. `git archive main | tar -x -C /tmp/base`)
with this virtual environment: the editable install's module map is pointed at TREE.

Default arguments: `examples/car_racing --quick --rounds 1 -q` (the scripted session, one
round with a move and the final one). Python calls on the main thread are followed with
`sys.setprofile`; a module is a polc module (`polc.*`); frames of other packages (JAX,
NumPy) in between are skipped, so a climb back through a callback JAX makes counts too.

Printed: the polc modules visited (all, and those under polc.runtime.refine), the climbs
back as distinct (caller module -> callee module) edges with how many calls made each, and
their total. Also `--record-keys`: where the round record is written or read by string key
(a static count over runtime/, see `record_key_places`).
"""

from __future__ import annotations

import argparse
import ast
import collections
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = {"compiler": "polc", "runtime": "polc.runtime", "lsp": "polc.lsp", "grammar": "polc.grammar"}
PREFIXES = {str(ROOT / d): pkg for d, pkg in PARTS.items()}


def use_tree(tree: Path) -> None:
    """Import polc from `tree` instead of this checkout (before anything imports it)."""
    import importlib

    finder = next(m for m in list(sys.modules.values()) + [None]
                  if m is not None and getattr(m, "__name__", "").startswith("__editable__") and hasattr(m, "MAPPING"))
    finder = finder or importlib.import_module("__editable___polc_0_1_0_finder")
    for d, pkg in PARTS.items():
        finder.MAPPING[pkg] = str(tree / d)
    for ns in finder.NAMESPACES:
        finder.NAMESPACES[ns] = [str(tree / "runtime" / ns.split(".", 2)[2].replace(".", "/"))]
    PREFIXES.clear()
    PREFIXES.update({str(tree / d): pkg for d, pkg in PARTS.items()})

# The keys of a round's metrics.json (what `refine.record.Round` holds).
ROUND_KEYS = {"round", "final", "phases", "policy_name", "structure_sha256", "fit", "weights", "demo_outside_ranges",
              "rollout_seeds", "rollout_returns", "rollout_scores", "resets", "declared_scores", "closed_loop",
              "keep", "rollout_successes", "validation", "eval", "eval_episodes", "regenerations", "analyses",
              "next_policy", "candidates", "tests", "move", "end", "unusable_replies", "llm", "seconds"}


def module_of(filename: str, cache: dict) -> str | None:
    name = cache.get(filename, "")
    if name != "":
        return name
    name = None
    for base, pkg in PREFIXES.items():
        if filename.startswith(base + "/") and filename.endswith(".py"):
            rel = filename[len(base) + 1:-3].replace("/", ".")
            name = pkg if rel == "__init__" else f"{pkg}.{rel.removesuffix('.__init__')}"
            break
    cache[filename] = name
    return name


def walk(argv: list[str]) -> tuple[set[str], collections.Counter]:
    from polc.cli import main

    cache: dict = {}
    stack: list[str | None] = []
    visited: set[str] = set()
    climbs: collections.Counter = collections.Counter()

    def profile(frame, event, arg):  # noqa: ANN001
        if event == "call":
            mod = module_of(frame.f_code.co_filename, cache)
            if mod is not None:
                visited.add(mod)
                polc_frames = [m for m in stack if m is not None]
                if polc_frames and polc_frames[-1] != mod and mod in polc_frames[:-1]:
                    climbs[(polc_frames[-1], mod)] += 1
            stack.append(mod)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        rc = main(argv)
    finally:
        sys.setprofile(None)
    if rc not in (0, None):
        raise SystemExit(f"polc {' '.join(argv)} exited {rc}")
    return visited, climbs


def record_key_places(paths: list[Path]) -> dict[str, tuple[int, int]]:
    """Per module, (writes, reads) of a round-record key by string: `m["key"] = ...`,
    `m.update(key=...)`, `m.setdefault("key", ...)`, `m.pop("key")` are writes; `x["key"]`
    and `x.get("key")` reads. Keys shared with other records ("round" of a candidate, "fit"
    of a config) make it an upper bound; the same code counted before and after is fair."""
    out = {}
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        writes = reads = 0
        stores = {id(t) for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AugAssign))
                  for t in (node.targets if isinstance(node, ast.Assign) else [node.target])}
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                    and node.slice.value in ROUND_KEYS and isinstance(node.value, (ast.Name, ast.Attribute)) \
                    and _named_record(node.value):
                if id(node) in stores:
                    writes += 1
                else:
                    reads += 1
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and _named_record(node.func.value):
                attr = node.func.attr
                keys = [a.value for a in node.args[:1] if isinstance(a, ast.Constant)]
                if attr == "update" and any(k.arg in ROUND_KEYS for k in node.keywords):
                    writes += 1
                elif attr in ("setdefault", "pop") and keys and keys[0] in ROUND_KEYS:
                    writes += 1
                elif attr == "get" and keys and keys[0] in ROUND_KEYS:
                    reads += 1
        if writes or reads:
            out[str(path.relative_to(path.parents[2]))] = (writes, reads)
    return out


def _named_record(node: ast.AST) -> bool:
    """`m`, `metrics`, `self.m`, `last`, `r`, `h`, `history[-1]`...: names the loop and its
    readers give a round's record."""
    names = {"m", "metrics", "last", "first", "h", "r", "rec", "record", "current", "row", "round_"}
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr in {"m", "metrics", "record"}
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, (ast.Name, ast.Attribute)) and \
            getattr(node.value, "id", getattr(node.value, "attr", "")) in {"history", "rounds", "kept", "traced"}
    return False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", help="the run directory (default: a temporary one, removed)")
    p.add_argument("--record-keys", action="store_true", help="only count the round record's string-key places")
    p.add_argument("--root", help="walk (or count in) this checkout of polc instead")
    p.add_argument("args", nargs="*", help="polc refine's arguments (after --)")
    a = p.parse_args()
    root = Path(a.root).resolve() if a.root else ROOT
    if a.root:
        use_tree(root)
    if a.record_keys:
        files = sorted(root.glob("runtime/refine/*.py")) + sorted(root.glob("runtime/experiment/*.py"))
        places = record_key_places(files)
        for f, (w, r) in places.items():
            print(f"{f}: {w} write(s), {r} read(s)")
        w = sum(x for x, _ in places.values())
        r = sum(y for _, y in places.values())
        print(f"total: {w} writes in {sum(1 for x, _ in places.values() if x)} module(s), "
              f"{r} reads in {sum(1 for _, y in places.values() if y)} module(s)")
        return
    tmp = tempfile.mkdtemp(prefix="refine-walk-")
    out = a.output or str(Path(tmp) / "run")
    argv = ["refine", *(a.args or ["examples/car_racing", "--quick", "--rounds", "1", "-q"]), "-o", out]
    try:
        visited, climbs = walk(argv)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    refine = sorted(m for m in visited if m.startswith("polc.runtime.refine"))
    print(f"polc modules visited: {len(visited)}; under polc.runtime.refine: {len(refine)} ({', '.join(refine)})")
    print(f"climbs back: {sum(climbs.values())} calls over {len(climbs)} distinct edges")
    for (a_, b), n in sorted(climbs.items(), key=lambda kv: -kv[1]):
        print(f"  {a_} -> {b}: {n}")


if __name__ == "__main__":
    main()

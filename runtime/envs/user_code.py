"""Saying which user code polc is about to import (issue 34, item 9).

A schema file (`env.toml`) can name Python modules: its env (`env = "gym:MODULE:ID"`, which
gymnasium makes by importing MODULE) and its metric (`[metric] function = "MODULE:FN"`); polc
looks for them in the working directory too, as `python -m` would. Importing a module runs its
code, so a task folder from someone else can run code as soon as a command makes its env
(`polc check --env task/env.toml` included). polc cannot tell a trusted module from another, so it
makes the import visible: before importing a module that is not part of the Python installation
(the standard library and site-packages), it prints one line on standard error naming the module,
its file and what named it. docs/environments.md says this, and what never imports anything.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig

_announced: set[str] = set()


def _installed_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        dirs.add(os.path.join(prefix, "lib"))
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


def origin_of(module: str) -> str | None:
    """Where the top-level package of `module` would be imported from (its file or folder), or
    None when it is built in, already imported or not found. Finding it runs none of its code."""
    top = module.split(".")[0]
    if not top or top in sys.modules:
        return None
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else None


def announce_import(module: str, named_by: str) -> None:
    """Print `polc: importing MODULE (FILE) for NAMED_BY; this runs its code.` on standard error
    before `module` is imported, unless it is installed with Python or was imported already."""
    origin = origin_of(module)
    if origin is None or module in _announced:
        return
    if os.path.realpath(origin).startswith(_installed_dirs()):
        return
    _announced.add(module)
    print(f'polc: importing module "{module}" ({origin}) for {named_by}; this runs its code.',
          file=sys.stderr, flush=True)


__all__ = ["announce_import", "origin_of"]

"""The environment a `.pol` document is written for, found as a user would expect it:
the nearest task folder above the file.

Walking up from the document's folder, the first folder that has a `task.md` whose
front matter names `env:` (examples/car_racing/task.md says `env: car_racing`), or an
`env.toml` schema file (what `polc init-task` writes for a Gymnasium environment),
says which environment it is; the walk stops at a repository's root (a folder with
`.git`, a directory or a worktree's file). The document is then checked against that environment's schema, the
diagnostics `polc check --env NAME FILE` adds (E05xx, W0503, W0509).

Loading a schema imports the runtime's environments (gymnasium, Box2D: about 0.8 s
once per server), so it is done once per environment and kept until the task.md or
env.toml it came from changes (path and modification time); typing then pays only
for the check against the kept schema, a few milliseconds. The runtime is imported
by name (as `polc check --env` does), so this package still never imports it
statically; without the runtime installed, documents get no environment diagnostics.

Nothing here imports pygls.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Optional

from polc.messages import Diagnostic

TASK_FILE = "task.md"
SCHEMA_FILE = "env.toml"


@dataclass(frozen=True)
class EnvSource:
    """Which environment a document is checked against, and what says so."""

    name: str      # as `polc check --env` takes it: a registered name, gym:ID or a schema file's path
    origin: str    # the task.md or env.toml that names it
    stamp: tuple   # ((path, mtime_ns), ...) of the files it was read from: a change reloads it


def _stamp(path: str) -> Optional[tuple[str, int]]:
    try:
        return path, os.stat(path).st_mtime_ns
    except OSError:
        return None


class Environments:
    """The environments of the documents a server has open: found per document, each
    schema loaded once and kept while the files that name it are unchanged."""

    def __init__(self) -> None:
        self._headers: dict[str, tuple[int, Optional[str]]] = {}  # task.md -> (mtime_ns, its env: or None)
        self._schemas: dict[tuple, tuple[Any, list[Diagnostic]]] = {}  # (name, stamp) -> (schema, failures)
        self.loads = 0  # schemas loaded (or failed to load) so far: what the cache saved shows here

    def find(self, file: str) -> Optional[EnvSource]:
        """The environment named by the nearest task folder above `file` (module docstring), or None."""
        d = os.path.dirname(os.path.abspath(file))
        while True:
            found = self._named_in(d)
            if found is not None:
                return found
            parent = os.path.dirname(d)
            if parent == d or os.path.exists(os.path.join(d, ".git")):  # a worktree's .git is a file
                return None
            d = parent

    def _named_in(self, folder: str) -> Optional[EnvSource]:
        task, schema = os.path.join(folder, TASK_FILE), os.path.join(folder, SCHEMA_FILE)
        t, s = _stamp(task), _stamp(schema)
        env = self._header_env(task, t[1]) if t else None
        stamp = tuple(x for x in (t, s) if x)
        if env:
            if env.endswith(".toml") and not os.path.isabs(env):
                env = os.path.normpath(os.path.join(folder, env))  # relative to the task folder
            return EnvSource(env, task, stamp)
        if s is not None:
            return EnvSource(schema, schema, stamp)
        return None

    def _header_env(self, task: str, mtime: int) -> Optional[str]:
        known = self._headers.get(task)
        if known is None or known[0] != mtime:
            front_matter = importlib.import_module("polc.runtime.task.header").front_matter  # task.md's one parser
            try:
                with open(task, encoding="utf-8") as f:
                    env = front_matter(f.read())[0].get("env") or None
            except (OSError, UnicodeDecodeError):
                env = None
            known = self._headers[task] = (mtime, env)
        return known[1]

    def check(self, typed: Any, tree: Any, file: str) -> list[Diagnostic]:
        """What `polc check --env` adds for the checked program `typed` (its AST `tree`)
        against the environment of `file`'s task folder; [] without one, or without the runtime."""
        source = self.find(file)
        if source is None:
            return []
        schema, failed = self._schema(source, file)
        if schema is None:
            return failed
        return _envs().check_program_against(typed, schema, tree)

    def _schema(self, source: EnvSource, file: str) -> tuple[Any, list[Diagnostic]]:
        key = (source.name, source.stamp)
        if key not in self._schemas:
            self._schemas = {k: v for k, v in self._schemas.items() if k[0] != source.name}  # the stale one
            envs = _envs()
            try:
                self._schemas[key] = envs.load_schema(source.name, near=source.origin)
            except Exception as e:  # noqa: BLE001 - an env's own code failing: said as E0508, never a crash
                self._schemas[key] = None, [envs.schema.env_unusable(source.name, f"{type(e).__name__}: {e}")]
            self.loads += 1
        return self._schemas[key]


def _envs():
    """`polc.runtime.envs`, imported by name: the language server is a compiler tool and
    imports the runtime only where the runtime is installed (as `polc check --env`)."""
    return importlib.import_module("polc.runtime.envs")


def runtime_installed() -> bool:
    try:
        importlib.import_module("polc.runtime")
    except ImportError:
        return False
    return True


__all__ = ["EnvSource", "Environments", "runtime_installed"]

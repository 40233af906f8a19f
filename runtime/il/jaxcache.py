"""The persistent XLA compilation cache of every runtime command (`polc fit`, `rl`, `eval`,
`rollout`, ...): what JAX compiled once is loaded from disk by the next process.

    enable()   called by `polc.runtime.cli.guard` before a command runs (so before any jit)

It lives here because `polc fit` is what it was made for; every runtime command uses it.

Where: `$JAX_COMPILATION_CACHE_DIR` when it is set (JAX's own setting is respected as is);
otherwise `$XDG_CACHE_HOME/polc/jax` (by default `~/.cache/polc/jax`), in a subdirectory per
CPU model and feature set, because XLA:CPU loads an executable compiled for another CPU with
only a log line, and a home directory shared by different machines would then run
instructions the CPU lacks. `POLC_NO_COMPILE_CACHE=1` turns polc's cache off. A directory that
cannot be written gives one warning line and the command runs without the cache.

Every compile is cached (`jax_persistent_cache_min_compile_time_secs` 0, no minimum entry
size): `polc fit` makes about 18 compiles of 10 ms to 5 s, and loading one costs ~30 ms.
While the cache is on, XLA's C++ log is limited to fatal messages (`TF_CPP_MIN_LOG_LEVEL=3`,
unless set already): XLA:CPU logs two error lines for every executable it loads from the
cache (a tuning feature, +prefer-no-gather, is compared as if it were an instruction set;
jax-ml/jax#38445), although it loads them.

`enable` also spares jax's import its scan of every installed distribution's metadata
(`skip_plugin_scan`, with the cache on or off: 169 METADATA files parsed here, 0.1-0.2 s).

Cheap to call: it imports jax only if jax is imported already; otherwise it sets the
environment variables JAX reads when it is imported (which child processes inherit too).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import tempfile
from pathlib import Path
from typing import Optional, TextIO

from ..io.cache_dirs import JAX_VARIABLE, OFF_VARIABLE, cache_root, disabled, machine_key  # noqa: F401 (its API)

# option of jax.config -> its value (the environment variable is the option's name in capitals)
_OPTIONS = {"jax_persistent_cache_min_compile_time_secs": "0",
            "jax_persistent_cache_min_entry_size_bytes": "-1"}

_state: dict[str, Optional[str]] = {}  # "dir": the directory in use (None: off); set once per process


def enable(stream: Optional[TextIO] = None) -> Optional[str]:
    """Turn the persistent compilation cache on for this process (see the module
    docstring). Returns the directory, or None when the cache is off. Never raises: an
    unusable directory is one warning line on `stream` (stderr). Only the first call
    in a process decides; later calls return its answer."""
    if "dir" in _state:
        return _state["dir"]
    _state["dir"] = None
    skip_plugin_scan()
    if disabled():
        return None
    own = os.environ.get(JAX_VARIABLE)
    path = Path(own) if own else cache_root() / machine_key()
    why = _unwritable(path)
    if why:
        print(f"polc: warning: the compile cache {path} cannot be used ({why}); running without it "
              f"(set {OFF_VARIABLE}=1 to turn it off)", file=stream or sys.stderr)
        return None
    _configure(str(path))
    _state["dir"] = str(path)
    return str(path)


# jax's module that reads the metadata of every installed distribution when imported, to
# find a ROCm plugin by its name (jax 0.9: ~170 METADATA files parsed, 0.1-0.2 s of CPU)
_SCANNER = "jax._src.numpy.array_constructors"


class _PluginScan(importlib.abc.MetaPathFinder):
    """While `_SCANNER` is first imported, its `importlib.metadata.distributions()` yields only
    the distributions whose directory names a ROCm plugin (jax_rocm...), from their names
    alone; the module then reads those as before, so it finds the same plugin, if any."""

    def find_spec(self, name, path, target=None):
        if name != _SCANNER:
            return None
        _remove_finder(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        real = loader.exec_module

        def exec_module(module):
            import importlib.metadata as md

            every = md.distributions

            def distributions(**kwargs):
                found = every(**kwargs)
                if sys._getframe(1).f_globals.get("__name__") != _SCANNER:
                    return found
                return (d for d in found if getattr(d, "_normalized_name", None) is None
                        or d._normalized_name.startswith("jax_rocm"))

            md.distributions = distributions
            try:
                real(module)
            finally:
                md.distributions = every

        loader.exec_module = exec_module
        return spec


def _remove_finder(finder) -> None:
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


def skip_plugin_scan() -> None:
    """Spare jax's import the scan of every distribution's metadata (`_PluginScan`), when jax
    is not imported yet. Called by `enable`, with the cache on or off."""
    if "jax" in sys.modules or any(isinstance(f, _PluginScan) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _PluginScan())


def _unwritable(path: Path) -> Optional[str]:
    """Why `path` cannot hold the cache, or None: made if missing, then a file written and removed."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return e.strerror or type(e).__name__
    return None


def _configure(path: str) -> None:
    if "jax" not in sys.modules:
        # JAX reads these when imported; XLA's C++ log level when jaxlib loads.
        os.environ.setdefault(JAX_VARIABLE, path)
        for option, value in _OPTIONS.items():
            os.environ.setdefault(option.upper(), value)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        return
    import jax

    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", path)
    for option, value in _OPTIONS.items():
        if option.upper() not in os.environ:  # a value the user set stays
            jax.config.update(option, type(getattr(jax.config, option))(value))


__all__ = ["JAX_VARIABLE", "OFF_VARIABLE", "cache_root", "disabled", "enable", "machine_key"]

"""Where polc's caches live, and the switch that turns them off (import-free but for the
standard library): the persistent XLA compilation cache (`polc.runtime.il.jaxcache`) and
the executables kept beside it (`executables.py`).
"""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path

OFF_VARIABLE = "POLC_NO_COMPILE_CACHE"
JAX_VARIABLE = "JAX_COMPILATION_CACHE_DIR"


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/polc/jax`, by default `~/.cache/polc/jax` (a relative XDG_CACHE_HOME
    is ignored, as the XDG base-directory specification says)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "polc" / "jax"


def machine_key() -> str:
    """A short name for this CPU: its architecture, model and feature flags."""
    text = platform.machine() + "\n" + platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n\n")[0].splitlines()  # the first processor
        text += "\n".join(ln for ln in lines if ln.split(":")[0].strip() in ("model name", "flags", "Features"))
    except OSError:
        pass
    return f"{platform.machine() or 'cpu'}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def disabled() -> bool:
    """Whether POLC_NO_COMPILE_CACHE turns the cache off (any value but "", "0", "false", "no")."""
    return os.environ.get(OFF_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


__all__ = ["JAX_VARIABLE", "OFF_VARIABLE", "cache_root", "disabled", "machine_key"]

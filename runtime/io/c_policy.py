"""A policy's C code (`polc compile -o X.c`, `polc.backend.emit_c`) built into a shared library and
called from Python through ctypes: for tests against the JAX lowering, benchmarks, and
evaluating the very code that will be deployed.

    lib = build(tp, weights, workdir)              # cc -std=c99 -O2 -shared; a CLibrary
    actions, latents = lib.step_batch(obs_rows)    # (n, OBS_SIZE) float32 -> (n, ACTION_SIZE), (n, LATENTS_SIZE)

Several programs can share one library (`build_many`), each under its own prefix.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from polc.backend.emit_c import Weights, emit_c
from polc.check.typed import TypedProgram

CFLAGS = ("-std=c99", "-pedantic", "-Wall", "-Wextra", "-Wdouble-promotion", "-Werror", "-O2", "-fPIC")


class CBuildError(Exception):
    """No C compiler, or the generated code did not build; the message says which."""


def c_compiler() -> Optional[str]:
    """The system C compiler: $CC if set, else cc, gcc or clang on the PATH (None when there is none)."""
    for name in filter(None, (os.environ.get("CC"), "cc", "gcc", "clang")):
        path = shutil.which(name)
        if path:
            return path
    return None


def sizes(tp: TypedProgram) -> tuple[int, int, int]:
    """The rows' lengths: (obs, action, latents) floats."""
    return tuple(sum(d.type.size for d in group) for group in (tp.obs, tp.actions, tp.latents))


def pack_weights(tp: TypedProgram, weights: Weights) -> Optional[np.ndarray]:
    """The generated weights struct's bytes as one float32 array: every weight flattened in
    declaration order, then each mlp (by key) layer by layer, kernel then bias, as `emit_c`
    lays the struct out (floats only, so no padding). None when the struct is empty."""
    parts = [np.ravel(np.asarray(weights.values[w.name], np.float32)) for w in tp.weights]
    for m in sorted(tp.mlps, key=lambda m: m.key):
        for kernel, bias in weights.mlps[m.key]:
            parts += [np.ravel(np.asarray(kernel, np.float32)), np.ravel(np.asarray(bias, np.float32))]
    return np.ascontiguousarray(np.concatenate(parts)) if parts else None


@dataclass
class CPolicy:
    """One program's batch entry point in a loaded library."""

    tp: TypedProgram
    lib: ctypes.CDLL  # kept alive with the function
    fn: object  # the ctypes function <prefix>_step_batch
    obs_size: int
    action_size: int
    latents_size: int

    def step_batch(self, obs: np.ndarray, latents: bool = True,
                   weights: Optional[np.ndarray] = None) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """(n, obs_size) float32 rows -> (n, action_size) actions and (n, latents_size) latents (or
        None), with the baked-in weights or `weights` (`pack_weights`)."""
        obs = np.ascontiguousarray(obs, np.float32).reshape(-1, self.obs_size)
        n = obs.shape[0]
        act = np.empty((n, self.action_size), np.float32)
        lat = np.empty((n, self.latents_size), np.float32) if latents else None
        ptr = ctypes.POINTER(ctypes.c_float)
        self.fn(None if weights is None else weights.ctypes.data, ctypes.c_size_t(n), obs.ctypes.data_as(ptr),
                act.ctypes.data_as(ptr), lat.ctypes.data_as(ptr) if lat is not None else None)
        return act, lat


def build_many(programs: Sequence[tuple[TypedProgram, Weights, str]], workdir: str,
               name: str = "policies") -> tuple[ctypes.CDLL, list[CPolicy]]:
    """Emit each (program, weights, prefix) and build them all into one shared library with one
    compiler run; raises CBuildError with the compiler's message when that fails."""
    cc = c_compiler()
    if cc is None:
        raise CBuildError("no C compiler found (cc, gcc or clang): install one, e.g. `apt-get install gcc`")
    sources = []
    for tp, weights, prefix in programs:
        src = emit_c(tp, weights, f"{prefix}.h", prefix=prefix)
        for ext, text in ((".c", src.c), (".h", src.h)):
            with open(os.path.join(workdir, prefix + ext), "w", encoding="utf-8") as f:
                f.write(text)
        sources.append(os.path.join(workdir, prefix + ".c"))
    so = os.path.join(workdir, f"lib{name}.so")
    run = subprocess.run([cc, *CFLAGS, "-shared", "-o", so, *sources, "-lm"], capture_output=True, text=True)
    if run.returncode != 0:
        raise CBuildError(f"{os.path.basename(cc)} failed on the generated C:\n{run.stderr.strip()}")
    lib = ctypes.CDLL(so)
    out = []
    for tp, _, prefix in programs:
        fn = getattr(lib, f"{prefix}_step_batch")
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.POINTER(ctypes.c_float)] * 3
        out.append(CPolicy(tp, lib, fn, *sizes(tp)))
    return lib, out


def build(tp: TypedProgram, weights: Weights, workdir: str, prefix: Optional[str] = None) -> CPolicy:
    """One program as a library (see `build_many`)."""
    return build_many([(tp, weights, prefix or tp.name)], workdir, prefix or tp.name)[1][0]

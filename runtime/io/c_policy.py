"""A policy's C code (`polc compile -o X.c`, `polc.backend.emit_c`) built into a shared library and
called from Python through ctypes: for tests against the JAX lowering, benchmarks, and
evaluating the very code that will be deployed.

    lib = build(tp, weights, workdir)              # cc -std=c99 -O2 -shared; a CLibrary
    actions, latents = lib.step_batch(obs_rows)    # (n, OBS_SIZE) float32 -> (n, ACTION_SIZE), (n, LATENTS_SIZE)

A program with memory (docs/language.md, "Memory") steps n environments' states too: the
generated `<p>_state` struct holds only 4-byte members (float, or int for a bool), so n
states are one (n, STATE_WORDS) array of 4-byte words, made by `<p>_init` and advanced in
place by each step:

    states = lib.initial_states(n)                         # every row from `<p>_init`
    actions, latents = lib.step_batch(obs_rows, state=states)   # latents end with the states' values

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
    """The rows' lengths: (obs, action, latents) floats; the latents row ends with each state's
    value at the start of the step (`emit_c`'s `<P>_LATENTS_SIZE`)."""
    return tuple(sum(d.type.size for d in group) for group in (tp.obs, tp.actions, (*tp.latents, *tp.states)))


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
    init_fn: object = None  # the ctypes function <prefix>_init, for a program with memory
    state_words: int = 0    # the 4-byte members of <prefix>_state (0 without memory)

    def initial_states(self, n: int) -> np.ndarray:
        """(n, state_words) the state every episode starts from, each row set by `<prefix>_init`."""
        states = np.zeros((n, self.state_words), np.uint32)
        if self.init_fn is not None:
            for k in range(n):
                self.init_fn(states[k:k + 1].ctypes.data)
        return states

    def step_batch(self, obs: np.ndarray, latents: bool = True, weights: Optional[np.ndarray] = None,
                   state: Optional[np.ndarray] = None) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """(n, obs_size) float32 rows -> (n, action_size) actions and (n, latents_size) latents (or
        None), with the baked-in weights or `weights` (`pack_weights`). A program with memory
        needs `state` ((n, state_words), `initial_states`), which the step advances in place."""
        obs = np.ascontiguousarray(obs, np.float32).reshape(-1, self.obs_size)
        n = obs.shape[0]
        act = np.empty((n, self.action_size), np.float32)
        lat = np.empty((n, self.latents_size), np.float32) if latents else None
        ptr = ctypes.POINTER(ctypes.c_float)
        head = (None if weights is None else weights.ctypes.data, ctypes.c_size_t(n))
        tail = (obs.ctypes.data_as(ptr), act.ctypes.data_as(ptr), lat.ctypes.data_as(ptr) if lat is not None else None)
        if self.state_words:
            if (state is None or state.shape != (n, self.state_words) or state.dtype != np.uint32
                    or not state.flags.c_contiguous or not state.flags.writeable):
                raise ValueError(f'policy "{self.tp.name}" has memory: step_batch needs its {n} states, a writable '
                                 f"({n}, {self.state_words}) uint32 array from initial_states")
            self.fn(*head, state.ctypes.data, *tail)
        else:
            self.fn(*head, *tail)
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
        state = [ctypes.c_void_p] if tp.states else []  # <prefix>_state *s, after n
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + state + [ctypes.POINTER(ctypes.c_float)] * 3
        init = None
        if tp.states:
            init = getattr(lib, f"{prefix}_init")
            init.restype, init.argtypes = None, [ctypes.c_void_p]
        out.append(CPolicy(tp, lib, fn, *sizes(tp), init, sum(st.type.size for st in tp.states)))
    return lib, out


def build(tp: TypedProgram, weights: Weights, workdir: str, prefix: Optional[str] = None) -> CPolicy:
    """One program as a library (see `build_many`)."""
    return build_many([(tp, weights, prefix or tp.name)], workdir, prefix or tp.name)[1][0]

"""Compiled executables kept on disk, so that a warm process neither traces nor lowers.

JAX's persistent compilation cache (`polc.runtime.il.jaxcache`) saves XLA's compile, but a jitted
function is still traced to a jaxpr and lowered to StableHLO in every process, because the
lowered module is the cache's key: for a warm `polc fit` of the Car Racing example that was
19 functions and about a third of its profiled time (the training loop's trace alone ~1 s);
for `polc eval` 0.15-0.2 s. Here the key is what the function is made from instead:

    the policy's source text (only policies that `register` vouches for: compiled by
    `polc.compile` from that text with the default lowering), what the caller says the
    function closes over (`key`: a configuration, a structure digest), the types of the
    arguments (tree structure, shapes, dtypes, weak types), jax's settings that change a
    trace, `XLA_FLAGS`, the devices, and a digest of polc's own source and of the
    simulators' and jax's versions (`code_digest`)

and the value is the executable serialized by `jax.experimental.serialize_executable`.
A miss traces, lowers and compiles as `jax.jit` would and stores the result when XLA compiled
it (not when JAX's persistent cache loaded it: see `_persistent_cache_hits`); a file that cannot be read or loaded, or
a loaded executable that fails on its first call, is a miss; one that cannot be serialized or
written is not kept. A call inside another trace goes to `jax.jit` itself. The same executable is loaded, so results are identical bit for bit
(tests/runtime/il/test_executables.py).

Where: `$XDG_CACHE_HOME/polc/executables/<machine>` (the compile cache's sibling, per CPU
as it is), or `polc-executables/` inside a JAX_COMPILATION_CACHE_DIR the user set; off when
the compile cache is off (`POLC_NO_COMPILE_CACHE=1`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np

# id(policy) -> (policy, digest of its source): the policies whose functions may be cached
# by their source. Kept small: a command registers the one or two policies it compiles.
_registered: dict[int, tuple[Any, str]] = {}
_REGISTERED_KEPT = 8

# jax settings read while tracing (a changed one must not load another setting's executable)
_CONFIG = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion",
           "jax_numpy_dtype_promotion", "jax_default_prng_impl", "jax_threefry_partitionable",
           "jax_enable_checks", "jax_debug_nans", "jax_debug_infs", "jax_disable_jit")

_counts = {"hits": 0, "misses": 0, "stored": 0}  # this process's (tests read them)


def register(policy, source: str, lowering: str = "default") -> None:
    """Vouch that `policy` (a `CompiledPolicy`) is what `polc.loads(source).compile()` makes,
    lowered as `lowering` says: its jitted functions may then be cached by `source`."""
    digest = hashlib.sha256(f"{lowering}\0{source}".encode()).hexdigest()
    _registered[id(policy)] = (policy, digest)
    while len(_registered) > _REGISTERED_KEPT:
        del _registered[next(iter(_registered))]


def policy_digest(policy) -> Optional[str]:
    """The digest `register` recorded for `policy`, or None (not registered: never cached)."""
    hit = _registered.get(id(policy))
    return hit[1] if hit is not None and hit[0] is policy else None


def directory() -> Optional[Path]:
    """Where executables are kept, or None when the compile cache is off: beside polc's
    compile cache, or inside a JAX_COMPILATION_CACHE_DIR of the user's own (`polc-executables/`,
    which JAX's cache, reading only its `*-cache` files, leaves alone)."""
    from .cache_dirs import JAX_VARIABLE, cache_root, disabled, machine_key

    if disabled():
        return None
    ours = cache_root() / machine_key()
    own = os.environ.get(JAX_VARIABLE)
    if own and Path(own) != ours:
        return Path(own) / "polc-executables"
    return cache_root().parent / "executables" / machine_key()


def cached(jitted: Callable, policy, name: str, key: Any, source: bool = True) -> Callable:
    """`jitted` (a `jax.jit` function of `policy`), its executables kept on disk under
    `name` and `key` (everything else it closes over, as a repr-stable value) and, with
    `source`, the policy's source text; without it `key` must name all the function depends
    on of the policy (the fit's steps: its structure digest, which leaves out declared
    values, so a refit after editing them loads the same steps). Returns `jitted` itself when
    `policy` is not registered or the cache is off."""
    digest = policy_digest(policy)
    where = directory()
    if digest is None or where is None:
        return jitted
    return _Cached(jitted, where, f"{name}\0{digest if source else 'registered'}\0{key!r}")


class _Cached:
    """A jitted function whose executables, one per argument signature, come from disk."""

    def __init__(self, jitted: Callable, where: Path, base: str):
        self.jitted, self.where, self.base = jitted, where, base
        self._last: Optional[tuple] = None   # (signature, executable) of the last call
        self._by_signature: dict = {}
        self._memo: dict = {}  # id -> (jax array, its `_leaf_type`)

    def __call__(self, *args):
        import jax

        leaves, tree = jax.tree.flatten(args)
        types = self._types(leaves)
        if _TRACED in types:
            return self.jitted(*args)
        signature = (tree, types)
        last = self._last
        if last is not None and last[0] == signature:
            return last[1](*args)
        run = self._by_signature.get(signature)
        if run is None:
            run, path = self._load_or_compile(signature, args)
            if path is not None:  # loaded: its first call proves it runs, else it is compiled afresh
                try:
                    out = run(*args)
                except jax.errors.JaxRuntimeError:
                    _unlink(path)
                    run = self._compile(path, args)
                    out = run(*args)
                self._by_signature[signature] = run
                self._last = (signature, run)
                return out
            self._by_signature[signature] = run
        self._last = (signature, run)
        return run(*args)

    def _types(self, leaves: list) -> tuple:
        """`_leaf_type` of each leaf; a jax array's (immutable) remembered by identity, as the
        same params go to every step of a rollout (the memo holds the arrays, so an id is not
        reused while remembered; it is emptied when it grows past `_MEMO`)."""
        memo, out = self._memo, []
        for x in leaves:
            if type(x) is np.ndarray:
                out.append((x.dtype, x.shape, False))
                continue
            hit = memo.get(id(x))
            if hit is not None and hit[0] is x:
                out.append(hit[1])
                continue
            t = _leaf_type(x)
            if type(x) in _ARRAYS:
                if len(memo) >= _MEMO:
                    memo.clear()
                memo[id(x)] = (x, t)
            out.append(t)
        return tuple(out)

    def _load_or_compile(self, signature: tuple, args: tuple) -> tuple[Callable, Optional[Path]]:
        """(the executable, its file when it was loaded from one)."""
        h = hashlib.sha256()
        for part in (self.base, repr(signature), _settings(), code_digest()):
            h.update(part.encode() + b"\0")
        path = self.where / f"{h.hexdigest()[:40]}.exe"
        loaded = _load(path)
        if loaded is not None:
            _counts["hits"] += 1
            return loaded, path
        _counts["misses"] += 1
        return self._compile(path, args), None

    def _compile(self, path: Path, args: tuple) -> Callable:
        try:
            lowered = self.jitted.trace(*args).lower()
        except Exception:  # what jit itself would raise, raised by jit (with its own message)
            return self.jitted
        with _persistent_cache_hits() as hits:
            compiled = lowered.compile()
        if not hits:  # compiled here: kept (one JAX's cache loaded is not, see `_persistent_cache_hits`)
            _store(path, compiled)
        return compiled

    # the jitted function's own API, for callers that lower or inspect it
    def __getattr__(self, attr: str):
        return getattr(self.jitted, attr)


_TRACED = ("traced",)  # `_leaf_type` of a tracer
_MEMO = 256  # jax arrays whose types a cached function remembers


_hits: list = []  # one entry per JAX persistent-cache hit, while `_persistent_cache_hits` counts


def _on_event(event: str, **kwargs) -> None:
    if event == "/jax/compilation_cache/cache_hits" and _hits:
        _hits[-1].append(event)


@contextlib.contextmanager
def _persistent_cache_hits() -> Iterator[list]:
    """The JAX persistent-cache hits of the compiles inside (a list, empty when XLA compiled).
    jaxlib 0.9.2 serializes an executable that JAX's cache loaded without its code (a later
    load fails to run, "Function ... not found"), so such an executable is not kept: a miss
    here then costs what it did before (a trace, a lowering and JAX's cache load), and what
    XLA compiles itself is kept."""
    import jax

    if not _listening:
        jax.monitoring.register_event_listener(_on_event)
        _listening.append(True)
    found: list = []
    _hits.append(found)
    try:
        yield found
    finally:
        _hits.remove(found)


_listening: list = []


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


_ARRAYS: set = set()  # the concrete jax array types seen (jaxlib's ArrayImpl): read without a jax call


def _leaf_type(x) -> tuple:
    """What a compiled executable fixes of an argument: its type, shape and weak type. On the
    path of every rollout step, so NumPy rows and jax arrays are read directly."""
    t = type(x)
    if t is np.ndarray:
        return (x.dtype, x.shape, False)  # the same NumPy dtype object as a jax array's: one executable for both
    if t in _ARRAYS:
        return (x.dtype, x.shape, x.weak_type)
    import jax

    if isinstance(x, jax.core.Tracer):  # called inside another trace: jit's own business
        return _TRACED
    if isinstance(x, jax.Array):
        _ARRAYS.add(t)
        return (x.dtype, x.shape, bool(x.weak_type))
    aval = jax.typeof(x)  # a Python or NumPy scalar
    return (aval.dtype, tuple(aval.shape), bool(getattr(aval, "weak_type", False)))


def _settings() -> str:
    import jax

    values = [f"{name}={getattr(jax.config, name, None)!r}" for name in _CONFIG]
    devices = [f"{d.platform}:{d.device_kind}" for d in jax.devices()]
    return "\n".join(values + devices + [f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}"])


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """polc's source (compiler and runtime) and the simulators' versions: what makes a score."""
    import polc
    import polc.runtime

    h = hashlib.sha256()
    for root in (Path(polc.__file__).parent, Path(polc.runtime.__file__).parent):
        for path in sorted(root.rglob("*.py")):
            try:
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
            except OSError:
                continue
    for name, module in (("gymnasium", "gymnasium"), ("box2d", "Box2D"), ("numpy", "numpy"), ("jax", "jax"),
                         ("jaxlib", "jaxlib")):
        v = _version(name, module)
        if v is not None:  # None: not installed, nothing of it to record
            h.update(f"{name}={v}".encode())
    return h.hexdigest()


def _version(name: str, module: str) -> Optional[str]:
    """The installed version of distribution `name`: its module's `__version__` when the module
    is imported already (the same string; the metadata lookup costs ~10 ms each), else the
    distribution's metadata."""
    v = getattr(sys.modules.get(module), "__version__", None)
    if isinstance(v, str):
        return v
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _load(path: Path) -> Optional[Callable]:
    try:
        with open(path, "rb") as f:
            blob, in_tree, out_tree = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError, ImportError):
        return None
    try:
        from jax.experimental.serialize_executable import deserialize_and_load

        return deserialize_and_load(blob, in_tree, out_tree)
    except Exception:  # an executable this jaxlib cannot load: compiled again
        return None


def _store(path: Path, compiled) -> None:
    try:
        from jax.experimental.serialize_executable import serialize

        blob = pickle.dumps(serialize(compiled))
    except Exception:  # e.g. closed-over constants, which serialize_executable cannot write
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".exe-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
        _counts["stored"] += 1
    except OSError:
        pass


def counts() -> dict:
    """This process's hits, misses and stored executables (a copy)."""
    return dict(_counts)


__all__ = ["cached", "code_digest", "counts", "directory", "policy_digest", "register"]

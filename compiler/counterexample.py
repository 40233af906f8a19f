"""Looking for a concrete counterexample to an intent, with the reference interpreter.

When the abstract analysis cannot prove an intent, `search` evaluates the
program (`reference.run`, batched) on a few hundred random points: weights
inside their constraints (an open end is explored on a log scale around the
initial value), observations inside their declared ranges, and for a
monotonicity intent two values of the variable with everything else held
fixed (the graph is cut at the variable, as in the abstract analysis). mlps
get all-zero parameters, a value fitting may well reach. The first violation
is then simplified (weights back to their initial values, observations to the
point of their range nearest zero, numbers rounded to two significant digits,
each kept only if the violation survives) and told as a sentence.

Deterministic: the random generator is seeded from the intent's text.
"""

from __future__ import annotations

import zlib
from typing import Callable, NamedTuple, Optional

import numpy as np

from . import reference, transforms, typed as T
from .errors import fmt_num
from .intervals import Interval

N_SAMPLES = 256


class Point(NamedTuple):
    """One candidate counterexample (arrays of each value's own shape)."""

    weights: dict[str, np.ndarray]
    obs: dict[str, np.ndarray]
    low: Optional[np.ndarray]  # monotonicity intents: the variable's lower value
    high: Optional[np.ndarray]  # and its higher value


Violation = tuple[tuple[int, ...], float, float]  # element index, the two values compared


def ancestors(tp: T.TypedProgram, name: str) -> set[str]:
    """Every name `name` is computed from (not including itself)."""
    nodes = {n.name: n for n in tp.nodes}
    seen: set[str] = set()
    todo = [name]
    while todo:
        node = nodes.get(todo.pop())
        if node is None:
            continue
        reads = T.refs(node.expr)
        if isinstance(node, T.Action) and node.std is not None:
            reads |= T.refs(node.std)
        for r in reads - seen:
            seen.add(r)
            todo.append(r)
    return seen


# ---- sampling --------------------------------------------------------------------------


def _magnitude(rng: np.random.Generator, shape: tuple[int, ...], lo: float = -3, hi: float = 2) -> np.ndarray:
    return 10.0 ** rng.uniform(lo, hi, shape)


def sample_weight(w: T.Weight, rng: np.random.Generator, n: int) -> np.ndarray:
    """(n,) + shape values inside the constraint; the first is the initial value."""
    shape = (n,) + w.type.shape
    init = np.broadcast_to(np.asarray(w.init, dtype=float), w.type.shape)
    coin = rng.random(shape) < 0.5
    kind = transforms.kind(w.lo, w.hi)
    if kind == "interval":
        p = np.where(coin, rng.random(shape), transforms.sigmoid(rng.uniform(-12, 12, shape), np))
        x = w.lo + (w.hi - w.lo) * p
    elif kind in ("lower", "upper"):
        gap_init = np.abs(init - (w.lo if kind == "lower" else w.hi))
        gap = np.where(coin, gap_init * _magnitude(rng, shape, -2, 2), _magnitude(rng, shape))
        x = w.lo + gap if kind == "lower" else w.hi - gap
    else:
        step = rng.choice([-1.0, 1.0], shape) * _magnitude(rng, shape)
        x = np.where(coin, init + step, step)
    x[0] = init
    return x


def sample_obs(o: T.Obs, rng: np.random.Generator, n: int) -> np.ndarray:
    """(n,) + shape values inside the declared range, ends included."""
    shape = (n,) + o.type.shape
    lo_ok, hi_ok = np.isfinite(o.lo), np.isfinite(o.hi)
    if lo_ok and hi_ok:
        x = rng.uniform(o.lo, o.hi, shape)
    elif lo_ok:
        x = o.lo + _magnitude(rng, shape)
    elif hi_ok:
        x = o.hi - _magnitude(rng, shape)
    else:
        x = rng.choice([-1.0, 1.0], shape) * _magnitude(rng, shape)
    edge = rng.random(shape)
    if lo_ok:
        x = np.where(edge < 0.1, o.lo, x)
    if hi_ok:
        x = np.where(edge > 0.9, o.hi, x)
    return x


def _canonical_obs(o: T.Obs) -> np.ndarray:
    return np.full(o.type.shape, min(max(0.0, o.lo), o.hi))


# ---- checking one batch ----------------------------------------------------------------


class _Judge:
    """Evaluates points and says where they break the intent."""

    def __init__(self, tp: T.TypedProgram, intent: T.Intent):
        self.tp = tp
        self.intent = intent
        self.mlp = reference.zero_mlp_params(tp)

    def bad(self, weights: dict, obs: dict, low, high, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mask of violating elements, the two compared arrays), each (n,) + target shape."""
        it = self.intent
        if isinstance(it, T.MonoIntent):
            t_low = self.value(weights, obs, {it.var: low}, n)
            t_high = self.value(weights, obs, {it.var: high}, n)
            scale = np.maximum(1.0, np.maximum(np.abs(t_low), np.abs(t_high)))
            with np.errstate(invalid="ignore"):
                if it.direction == "increasing":
                    mask = t_high < t_low - 1e-9 * scale
                else:
                    mask = t_high > t_low + 1e-9 * scale
            return mask & np.isfinite(t_low) & np.isfinite(t_high), t_low, t_high
        t = self.value(weights, obs, {}, n)
        with np.errstate(invalid="ignore"):
            below = (t <= it.lo) if it.lo_strict else (t < it.lo)
            above = (t >= it.hi) if it.hi_strict else (t > it.hi)
        return below | above, t, t

    def value(self, weights: dict, obs: dict, overrides: dict, n: int) -> np.ndarray:
        out = reference.run(self.tp, weights, obs, self.mlp, overrides, batch=n)
        return np.asarray(out.values[self.intent.target], dtype=float)

    def measure(self, p: Point) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`bad` at one point: (mask, a, b) of the target's shape."""
        one = lambda d: {k: np.asarray(v)[None] for k, v in d.items()}  # noqa: E731
        low = None if p.low is None else np.asarray(p.low)[None]
        high = None if p.high is None else np.asarray(p.high)[None]
        mask, a, b = self.bad(one(p.weights), one(p.obs), low, high, 1)
        return mask[0], a[0], b[0]

    def check(self, p: Point) -> Optional[Violation]:
        """The first violation at one point, or None."""
        mask, a, b = self.measure(p)
        if not mask.any():
            return None
        idx = tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()
        return idx, float(a[idx]), float(b[idx])

    def matters(self, p: Point, weight: str, idx: tuple[int, ...]) -> bool:
        """Whether the weight moves what the intent compares at `idx` (for a
        monotonicity intent the change of the target, else its value)."""
        def probe(q: Point) -> float:
            _, a, b = self.measure(q)
            return float(b[idx] - a[idx]) if isinstance(self.intent, T.MonoIntent) else float(a[idx])

        w = np.asarray(p.weights[weight], dtype=float)
        before = probe(p)
        after = probe(p._replace(weights={**p.weights, weight: w * 1.5 + 0.25}))
        return not (abs(after - before) <= 1e-9 * max(1.0, abs(before)))


# ---- the search ----------------------------------------------------------------------------


def _var_pair(tp: T.TypedProgram, var: str, natural: np.ndarray, var_iv: Optional[Interval],
              rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two values of the variable per sample, low <= high elementwise, inside its interval."""
    t = tp.decl(var).type
    if t.base == T.BOOL:
        return np.zeros((n,) + t.shape, bool), np.ones((n,) + t.shape, bool)
    shape = (n,) + t.shape
    natural = np.asarray(natural, dtype=float)
    sign = rng.choice([-1.0, 1.0], (n,) + (1,) * t.ndim)
    moved = rng.random(shape) < 0.7
    if t.ndim == 0:
        moved[:] = True
    step = _magnitude(rng, shape, -3, 1) * np.maximum(1.0, np.abs(np.nan_to_num(natural)))
    other = natural + sign * step * moved
    if var_iv is not None:
        natural = np.clip(natural, var_iv.lo, var_iv.hi)
        other = np.clip(other, var_iv.lo, var_iv.hi)
    return np.where(sign > 0, natural, other), np.where(sign > 0, other, natural)


def search(tp: T.TypedProgram, intent: T.Intent, var_iv: Optional[Interval] = None,
           samples: int = N_SAMPLES) -> Optional[str]:
    """A sentence describing a counterexample to `intent`, or None if none was found.

    var_iv: for a monotonicity intent, the (elementwise) interval the variable
    ranges over; its two values are kept inside it."""
    rng = np.random.default_rng(zlib.crc32(intent.text.encode()))
    judge = _Judge(tp, intent)
    weights = {w.name: sample_weight(w, rng, samples) for w in tp.weights}
    obs = {o.name: sample_obs(o, rng, samples) for o in tp.obs}
    low = high = None
    if isinstance(intent, T.MonoIntent):
        if intent.var in weights or intent.var in obs:
            natural = (weights | obs)[intent.var]
        else:
            natural = reference.run(tp, weights, obs, judge.mlp, batch=samples).values[intent.var]
        low, high = _var_pair(tp, intent.var, natural, var_iv, rng, samples)
    mask, _, _ = judge.bad(weights, obs, low, high, samples)
    hits = np.flatnonzero(mask.reshape(samples, -1).any(axis=1))
    if hits.size == 0:
        return None
    i = int(hits[0])
    point = Point({k: v[i] for k, v in weights.items()}, {k: v[i] for k, v in obs.items()},
                  None if low is None else low[i], None if high is None else high[i])
    point = simplify(tp, intent, point, judge.check, var_iv)
    return describe(tp, intent, point, judge)


# ---- simplifying and telling -----------------------------------------------------------------


def _round2(x: np.ndarray) -> np.ndarray:
    """Two significant digits."""
    return np.vectorize(lambda v: float(f"{v:.2g}") if np.isfinite(v) else v, otypes=[float])(x)


def simplify(tp: T.TypedProgram, intent: T.Intent, p: Point, check: Callable[[Point], Optional[Violation]],
             var_iv: Optional[Interval]) -> Point:
    """Greedily make a violating point simpler while it still violates."""
    used = ancestors(tp, intent.target)
    ws = [w for w in tp.weights if w.name in used]
    os_ = [o for o in tp.obs if o.name in used]

    def attempt(q: Point) -> bool:
        return check(q) is not None

    for w in ws:
        q = p._replace(weights={**p.weights, w.name: np.broadcast_to(np.asarray(w.init, float), w.type.shape)})
        p = q if attempt(q) else p
    for o in os_:
        q = p._replace(obs={**p.obs, o.name: _canonical_obs(o)})
        p = q if attempt(q) else p
    for w in ws:
        r = _round2(p.weights[w.name])
        if np.all((r > w.lo) & (r < w.hi)):
            q = p._replace(weights={**p.weights, w.name: r})
            p = q if attempt(q) else p
    for o in os_:
        r = _round2(p.obs[o.name])
        if np.all((r >= o.lo) & (r <= o.hi)):
            q = p._replace(obs={**p.obs, o.name: r})
            p = q if attempt(q) else p
    if p.low is not None and p.low.dtype != bool:
        lo, hi = _round2(p.low), _round2(p.high)
        inside = var_iv is None or (var_iv.contains(lo) and var_iv.contains(hi))
        if inside and np.all(lo <= hi):
            q = p._replace(low=lo, high=hi)
            p = q if attempt(q) else p
    return p


def _show(x) -> str:
    x = np.asarray(x)
    if x.ndim == 0:
        return str(bool(x)).lower() if x.dtype == bool else fmt_num(float(x))
    flat = [_show(v) for v in x.reshape(-1)[:6]]
    return "[" + ", ".join(flat) + (", ..." if x.size > 6 else "") + "]"


def describe(tp: T.TypedProgram, intent: T.Intent, p: Point, judge: _Judge) -> str:
    """The counterexample as one sentence (without a final period). Names the
    weights the violation turns on (those that move what is compared), and the
    observations away from their simplest value."""
    v = judge.check(p)
    if v is None:  # simplify only keeps violating points
        raise ValueError("describe needs a violating point")
    idx, a, b = v
    used = ancestors(tp, intent.target)
    var = intent.var if isinstance(intent, T.MonoIntent) else None
    candidates = [w for w in tp.weights if w.name in used and w.name != var]

    def at_init(w: T.Weight) -> bool:
        return np.array_equal(p.weights[w.name], np.broadcast_to(np.asarray(w.init, float), w.type.shape))

    key = [w for w in candidates if not at_init(w) or judge.matters(p, w.name, idx)] or candidates
    parts = []
    if key:
        shown = [f"{w.name} = {_show(p.weights[w.name])}" for w in key[:6]]
        parts.append("with " + ", ".join(shown) + (" (other weights at their initial values)"
                                                   if len(candidates) > len(shown) else ""))
    seen = [o for o in tp.obs if o.name in used and o.name != var]
    moved = [o for o in seen if not np.array_equal(p.obs[o.name], _canonical_obs(o))]
    if moved:
        parts.append("at " + ", ".join(f"{o.name} = {_show(p.obs[o.name])}" for o in moved)
                     + (" (other observations as near 0 as their range allows)" if len(seen) > len(moved) else ""))
    head = ", ".join(parts) + (", " if parts else "")
    target = intent.target + ("[" + ", ".join(map(str, idx)) + "]" if idx else "")
    if isinstance(intent, T.MonoIntent):
        moves = "rises" if b > a else "falls"
        return (f"{head}{target} {moves} from {fmt_num(a)} to {fmt_num(b)} when {intent.var} goes from "
                f"{_show(p.low)} to {_show(p.high)}")
    low_side = a < intent.lo or (intent.lo_strict and a <= intent.lo)
    if low_side:
        bound = f"{'<=' if intent.lo_strict else '<'} {fmt_num(intent.lo)}"
    else:
        bound = f"{'>=' if intent.hi_strict else '>'} {fmt_num(intent.hi)}"
    return f"{head}{target} = {fmt_num(a)} {bound}"

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

Only the target's cone is evaluated (`cone_program`): the nodes it is
computed from, with the inputs they read. The samples are still drawn for
every weight and observation, in declaration order, so a witness does not
depend on what else the program holds.

Deterministic: the random generator is seeded from the intent's text.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Callable, NamedTuple, Optional

import numpy as np

from . import reference, transforms
from ..check import typed as T
from ..errors import fmt_num
from ..util.text import brackets
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


def cone_program(tp: T.TypedProgram, target: str) -> T.TypedProgram:
    """The part of `tp` that computes `target`: its ancestors and itself, with
    the obs, weights and mlps they read (in the same order), and no intents."""
    return sub_program(tp, ancestors(tp, target) | {target})


def sub_program(tp: T.TypedProgram, used: set[str]) -> T.TypedProgram:
    """The declarations of `tp` named in `used` (nodes, obs, weights, states, in the same order) and the
    mlps those nodes hold, with no intents."""
    nodes = tuple(n for n in tp.nodes if n.name in used)
    mlps = tuple(m for n in nodes for e in (n.expr, getattr(n, "std", None)) if e is not None
                 for m in T.mlps_in(e))
    return dataclasses.replace(
        tp, obs=tuple(o for o in tp.obs if o.name in used), weights=tuple(w for w in tp.weights if w.name in used),
        latents=tuple(n for n in tp.latents if n.name in used), actions=tuple(n for n in tp.actions if n.name in used),
        intents=(), nodes=nodes, mlps=mlps, states=tuple(st for st in tp.states if st.name in used))


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


def obs_bounds(o: T.Obs) -> tuple:
    """The observation's lower and upper bounds: two floats, or two arrays of its shape when it
    declares a range per element."""
    if o.bounds is None:
        return o.lo, o.hi
    return np.reshape(o.bounds[0], o.type.shape), np.reshape(o.bounds[1], o.type.shape)


def sample_obs(o: T.Obs, rng: np.random.Generator, n: int) -> np.ndarray:
    """(n,) + shape values inside the declared range, ends included."""
    shape = (n,) + o.type.shape
    if o.bounds is not None:
        return _sample_elements(o, rng, shape)
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


def _sample_elements(o: T.Obs, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """`sample_obs` for a range per element: each element as a scalar range of its kind is sampled."""
    lo, hi = (np.broadcast_to(b, shape) for b in obs_bounds(o))
    lo_ok, hi_ok = np.isfinite(lo), np.isfinite(hi)
    with np.errstate(all="ignore"):
        inside = lo + (hi - lo) * rng.random(shape)
        mag = _magnitude(rng, shape)
        free = rng.choice([-1.0, 1.0], shape) * _magnitude(rng, shape)
        x = np.where(lo_ok & hi_ok, inside, np.where(lo_ok, lo + mag, np.where(hi_ok, hi - mag, free)))
    edge = rng.random(shape)
    x = np.where(lo_ok & (edge < 0.1), lo, x)
    x = np.where(hi_ok & (edge > 0.9), hi, x)
    return np.clip(x, lo, hi)


def _canonical_obs(o: T.Obs) -> np.ndarray:
    lo, hi = obs_bounds(o)
    return np.broadcast_to(np.minimum(np.maximum(0.0, lo), hi), o.type.shape).copy()


# ---- checking one batch ----------------------------------------------------------------


def wrong_way(intent: T.MonoIntent, t_low: np.ndarray, t_high: np.ndarray) -> np.ndarray:
    """Where the target moves against the intent's direction (beyond rounding) as the variable goes
    from its low to its high value: `t_low`, `t_high` are the target at each, elementwise."""
    scale = np.maximum(1.0, np.maximum(np.abs(t_low), np.abs(t_high)))
    with np.errstate(invalid="ignore"):
        if intent.direction == "increasing":
            mask = t_high < t_low - 1e-9 * scale
        else:
            mask = t_high > t_low + 1e-9 * scale
    return mask & np.isfinite(t_low) & np.isfinite(t_high)


class _Judge:
    """Evaluates points and says where they break the intent."""

    def __init__(self, tp: T.TypedProgram, intent: T.Intent):
        self.tp = cone_program(tp, intent.target)
        self.intent = intent
        self.mlp = reference.zero_mlp_params(self.tp)

    def bad(self, weights: dict, obs: dict, low, high, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mask of violating elements, the two compared arrays), each (n,) + target shape."""
        it = self.intent
        if isinstance(it, T.MonoIntent):
            t_low = self.value(weights, obs, {it.var: low}, n)
            t_high = self.value(weights, obs, {it.var: high}, n)
            return wrong_way(it, t_low, t_high), t_low, t_high
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
        mask, a, b = self.measure_many([p])
        return mask[0], a[0], b[0]

    def measure_many(self, points: list[Point]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`measure` at several points in one batched run: (mask, a, b), each (len(points),) + target shape.

        Row i is what `measure(points[i])` gives: the reference interpreter
        computes every row of a batch on its own, with the same operations."""
        def rows(get) -> dict[str, np.ndarray]:
            return {k: np.stack([np.asarray(get(q)[k]) for q in points]) for k in get(points[0])}

        low = None if points[0].low is None else np.stack([np.asarray(q.low) for q in points])
        high = None if points[0].high is None else np.stack([np.asarray(q.high) for q in points])
        return self.bad(rows(lambda q: q.weights), rows(lambda q: q.obs), low, high, len(points))

    def check(self, p: Point) -> Optional[Violation]:
        """The first violation at one point, or None."""
        return self.check_many([p])[0]

    def check_many(self, points: list[Point]) -> list[Optional[Violation]]:
        """`check` at several points, in one batched run."""
        masks, a, b = self.measure_many(points)
        out: list[Optional[Violation]] = []
        for mask, x, y in zip(masks, a, b):
            if not mask.any():
                out.append(None)
                continue
            idx = tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()
            out.append((idx, float(x[idx]), float(y[idx])))
        return out

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

    def which_matter(self, p: Point, weights: list[str], idx: tuple[int, ...]) -> set[str]:
        """The weights among `weights` for which `matters` holds, probed in batches."""
        def compared(mask_a_b, i: int) -> float:
            _, a, b = mask_a_b
            return float(b[i][idx] - a[i][idx]) if isinstance(self.intent, T.MonoIntent) else float(a[i][idx])

        before = compared(self.measure_many([p]), 0)
        out = set()
        for start in range(0, len(weights), _BATCH):
            chunk = weights[start: start + _BATCH]
            moved = [p._replace(weights={**p.weights, w: np.asarray(p.weights[w], dtype=float) * 1.5 + 0.25})
                     for w in chunk]
            got = self.measure_many(moved)
            out |= {w for i, w in enumerate(chunk)
                    if not (abs(compared(got, i) - before) <= 1e-9 * max(1.0, abs(before)))}
        return out


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
    """A sentence describing a counterexample to `intent` within one step, or None if none was found.

    var_iv: for a monotonicity intent, the (elementwise) interval the variable
    ranges over; its two values are kept inside it. Every state holds its initial value (the first
    step of an episode); `sequences.search` is the entry for intents over values computed from
    states, along sequences of steps."""
    return _search_step(tp, intent, var_iv, samples)


def _search_step(tp: T.TypedProgram, intent: T.Intent, var_iv: Optional[Interval], samples: int) -> Optional[str]:
    """`search` within one step (the module docstring)."""
    rng = np.random.default_rng(zlib.crc32(intent.text.encode()))
    judge = _Judge(tp, intent)
    # Every input is drawn, in order, so the stream (and the witness) is that of the whole program.
    weights = {w.name: sample_weight(w, rng, samples) for w in tp.weights}
    obs = {o.name: sample_obs(o, rng, samples) for o in tp.obs}
    cone = judge.tp
    low = high = None
    if isinstance(intent, T.MonoIntent):
        if intent.var in weights or intent.var in obs:
            natural = (weights | obs)[intent.var]
        else:
            natural = reference.run(cone, weights, obs, judge.mlp, batch=samples).values[intent.var]
        low, high = _var_pair(cone, intent.var, natural, var_iv, rng, samples)
    mask, _, _ = judge.bad(weights, obs, low, high, samples)
    hits = np.flatnonzero(mask.reshape(samples, -1).any(axis=1))
    if hits.size == 0:
        return None
    i = int(hits[0])
    point = Point({w.name: weights[w.name][i] for w in cone.weights}, {o.name: obs[o.name][i] for o in cone.obs},
                  None if low is None else low[i], None if high is None else high[i])
    point = simplify(cone, intent, point, judge.check, var_iv, judge.check_many)
    return describe(cone, intent, point, judge)


# ---- simplifying and telling -----------------------------------------------------------------


def _round2(x: np.ndarray) -> np.ndarray:
    """Two significant digits."""
    return np.vectorize(lambda v: float(f"{v:.2g}") if np.isfinite(v) else v, otypes=[float])(x)


Change = Callable[[Point], Optional[Point]]  # a simpler point, or None when the change does not apply
_BATCH = 32  # points checked in one batched run


def _changes(tp: T.TypedProgram, intent: T.Intent, var_iv: Optional[Interval]) -> list[Change]:
    """The simplifications `simplify` tries, in order: weights to their initial
    values, observations to their simplest value, then each rounded to two digits."""
    used = ancestors(tp, intent.target)
    ws = [w for w in tp.weights if w.name in used]
    os_ = [o for o in tp.obs if o.name in used]

    def weight_init(w: T.Weight) -> Change:
        return lambda p: p._replace(weights={**p.weights, w.name: np.broadcast_to(np.asarray(w.init, float),
                                                                                   w.type.shape)})

    def obs_simplest(o: T.Obs) -> Change:
        return lambda p: p._replace(obs={**p.obs, o.name: _canonical_obs(o)})

    def weight_round(w: T.Weight) -> Change:
        def change(p: Point) -> Optional[Point]:
            r = _round2(p.weights[w.name])
            return p._replace(weights={**p.weights, w.name: r}) if np.all((r > w.lo) & (r < w.hi)) else None
        return change

    def obs_round(o: T.Obs) -> Change:
        def change(p: Point) -> Optional[Point]:
            r = _round2(p.obs[o.name])
            lo, hi = obs_bounds(o)
            return p._replace(obs={**p.obs, o.name: r}) if np.all((r >= lo) & (r <= hi)) else None
        return change

    def var_round(p: Point) -> Optional[Point]:
        if p.low is None or p.low.dtype == bool:
            return None
        lo, hi = _round2(p.low), _round2(p.high)
        inside = var_iv is None or (var_iv.contains(lo) and var_iv.contains(hi))
        return p._replace(low=lo, high=hi) if inside and np.all(lo <= hi) else None

    return ([weight_init(w) for w in ws] + [obs_simplest(o) for o in os_] + [weight_round(w) for w in ws]
            + [obs_round(o) for o in os_] + [var_round])


def _greedy(p: Point, changes: list[Change], check_many: Callable[[list[Point]], list[Optional[Violation]]],
            batch: int) -> Point:
    """Each change in turn, kept if the point still violates. The checks of a
    run of changes go in one batch, made on the guess that each is kept; after
    the first that is not, the run starts again from the last kept point. The
    outcome is that of checking the changes one by one."""
    i = 0
    while i < len(changes):
        chain: list[tuple[int, Point]] = []
        q = p
        j = i
        while j < len(changes) and len(chain) < batch:
            r = changes[j](q)
            if r is not None:
                chain.append((j, r))
                q = r
            j += 1
        if not chain:
            break
        i = j
        for (k, r), v in zip(chain, check_many([r for _, r in chain])):
            if v is None:
                i = k + 1
                break
            p = r
    return p


def simplify(tp: T.TypedProgram, intent: T.Intent, p: Point, check: Callable[[Point], Optional[Violation]],
             var_iv: Optional[Interval],
             check_many: Optional[Callable[[list[Point]], list[Optional[Violation]]]] = None) -> Point:
    """Greedily make a violating point simpler while it still violates.

    `check_many` (several points at once, as `check` would one by one) saves runs."""
    changes = _changes(tp, intent, var_iv)
    if check_many is not None:
        fast = _greedy(p, changes, check_many, _BATCH)
        if check(fast) is not None:
            return fast
    # One by one: without `check_many`, or should a batch ever disagree with `check`.
    return _greedy(p, changes, lambda points: [check(q) for q in points], 1)


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

    matter = judge.which_matter(p, [w.name for w in candidates if at_init(w)], idx)
    key = [w for w in candidates if not at_init(w) or w.name in matter] or candidates
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
    target = intent.target + brackets(idx)
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

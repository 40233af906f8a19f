"""Gymnasium CarRacing with named semantic observations, fast.

`SemanticCarRacing` subclasses gymnasium's `CarRacing` (v3 physics, reward and
termination untouched) and changes three things:

1. Speed. The stock `step()` renders the 96x96 pixel state every frame, which is
   nearly all of its cost. Here `_render("state_pixels")` returns a constant blank
   image; every other mode defers to gymnasium, so `render_mode="rgb_array"` still
   gives real frames for videos. The car's per-frame dynamics run in Python floats
   instead of numpy scalars (`car_dynamics.ScalarCar`, the same IEEE operations).
   Rewards, terminations, truncations and every body's state are bit-identical to
   `gymnasium.make("CarRacing-v3")` for the same seed and actions
   (tests/runtime/envs/test_env_car_racing.py).
2. Observations: a dict of named float32 arrays computed from the simulator state
   (`CAR_RACING.obs` lists them with shapes, ranges and docs; `observe`).
3. Actions: a dict `{"steer", "gas", "brake"}` of floats, clipped to their ranges.

Frames and signs. The car frame has x to the car's RIGHT and y AHEAD; world
lengths are in gymnasium's units (the track half-width is 6.67, centreline points
are about 3.5 apart). Every signed quantity is positive to the RIGHT / clockwise
seen from above (as rendered): `offset` > 0 right of the centreline, `tiles` x > 0
and theta > 0 for a corner turning right, `ang_vel` > 0 turning right,
`steer_ind` > 0 wheels turned right. Box2D's own angles and yaw rate are
counter-clockwise positive, so those observations are the negated Box2D values.

Steering sign. gymnasium applies steering as `car.steer(-action[0])`, and a
negative Box2D joint angle turns the front wheels clockwise: the two signs cancel,
so gymnasium's own `action[0] = +1` already turns RIGHT (measured: the yaw rate
goes clockwise and the car moves to its right; gymnasium documents "+1 is full
right"). Positive `steer` therefore means TURN RIGHT here too, and it is passed
down to gymnasium UNCHANGED: `raw_action(a) == [steer, gas, brake]`. Negating it
would make positive steer turn left.

Time limit and seeds. `gymnasium.make("polc/CarRacing-v0")` adds the stock
1000-step `TimeLimit` (the return depends on it: +1000/N per new tile, -0.1 per
frame, -100 and the end when the car leaves the playfield). Demonstrations use
seeds 0..999, evaluation seeds from 10_000 upward (see `polc.runtime.envs`).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Mapping, Optional, Sequence

import gymnasium as gym
import numpy as np

with warnings.catch_warnings():
    # Box2D's SWIG module warns "builtin type SwigPyPacked has no __module__
    # attribute" while it initialises; turned into an error (pytest's
    # `filterwarnings = error`, `python -W error`) it segfaults the import.
    warnings.simplefilter("ignore", DeprecationWarning)
    import Box2D  # noqa: F401
from gymnasium.envs.box2d import car_racing as _cr

from .car_dynamics import ScalarCar
from .schema import EnvSchema, Field

TRACK_HALF_WIDTH = _cr.TRACK_WIDTH  # 6.67 world units: the centre-to-edge distance
PLAYFIELD = _cr.PLAYFIELD
N_TILES_AHEAD = 12
TILE_SCALE = 10.0  # tile x, y are world units / TILE_SCALE
TILE_CLIP = 10.0  # ... clipped to +-TILE_CLIP (100 world units, far off the track)
STEER_LOCK = 0.4  # rad: the front-wheel joint limit

CAR_RACING = EnvSchema(
    name="car_racing",
    env_id="polc/CarRacing-v0",
    version="1 (gymnasium CarRacing-v3 physics)",
    obs=(
        Field("tiles", (N_TILES_AHEAD, 4), -TILE_CLIP, TILE_CLIP,
              "the 12 centreline points ahead (one per tile, about 3.5 units apart), one row each, in the "
              "car frame: lateral x (+ right) and ahead y in world units / 10 (clipped to +-10), relative "
              "heading theta = track heading minus car heading (rad in [-pi, pi], + the track turns right), "
              "sharp-corner flag (1 where gymnasium draws the red-white kerb)"),
        Field("speed", (), 0.0, 1.5, "forward speed / 100 (reversing reads 0; clipped at 1.5)"),
        Field("steer_ind", (), -1.0, 1.0, "front-wheel steering angle / 0.4 rad (+ right)",
              echoes=("steer",)),
        Field("ang_vel", (), -6.0, 6.0, "yaw rate (rad/s, + turning right; clipped to +-6 in a spin)"),
        Field("wheel_speed", (4,), 0.0, 3.0,
              "wheel rim speeds / 100: front-left, front-right, rear-left, rear-right "
              "(a wheel spinning backwards reads 0; clipped at 3)"),
        Field("offset", (), -4.0, 4.0,
              "signed distance from the centreline in track half-widths (+ right of centre; |offset| > 1 "
              "is off the road; clipped to +-4)"),
        Field("heading_err", (), -math.pi, math.pi,
              "track heading minus car heading at the nearest centreline point (rad, + the track turns "
              "right relative to the car)"),
        Field("on_grass", (4,), 0.0, 1.0, "1 for each wheel (FL, FR, RL, RR) touching no road tile"),
        Field("progress", (), 0.0, 1.0, "fraction of the lap's tiles visited so far"),
    ),
    actions=(
        Field("steer", (), -1.0, 1.0, "steering target (+ turns right; the wheels lock at 0.4)"),
        Field("gas", (), 0.0, 1.0, "throttle"),
        Field("brake", (), 0.0, 1.0, "brake (>= 0.9 locks the wheels)"),
    ),
)


def _f32_inside(lo: float, hi: float) -> tuple[np.float32, np.float32]:
    """float32 bounds that lie inside [lo, hi] even when compared in float64."""
    lo32, hi32 = np.float32(lo), np.float32(hi)
    if float(lo32) < lo:
        lo32 = np.nextafter(lo32, np.float32(np.inf))
    if float(hi32) > hi:
        hi32 = np.nextafter(hi32, np.float32(-np.inf))
    return lo32, hi32


def _layout(fields: tuple[Field, ...]) -> tuple[dict[str, slice], np.ndarray, np.ndarray]:
    """Where each field lives in one flat observation buffer, and per-element
    float32 clip bounds (the tiles' heading column gets [-pi, pi])."""
    slices, lo, hi, at = {}, [], [], 0
    for f in fields:
        slices[f.name] = slice(at, at + f.size)
        b = np.broadcast_to(np.array(_f32_inside(f.lo, f.hi), dtype=np.float32)[:, None], (2, f.size)).copy()
        if f.name == "tiles":
            b[:, 2::4] = np.array(_f32_inside(-math.pi, math.pi), dtype=np.float32)[:, None]
        lo.append(b[0])
        hi.append(b[1])
        at += f.size
    return slices, np.concatenate(lo), np.concatenate(hi)


_SLICES, _LO, _HI = _layout(CAR_RACING.obs)
_VIEWS = tuple((f.name, _SLICES[f.name], f.shape) for f in CAR_RACING.obs)
_BLANK_STATE = np.zeros((_cr.STATE_H, _cr.STATE_W, 3), dtype=np.uint8)
_BLANK_STATE.flags.writeable = False


def _space(fields: tuple[Field, ...]) -> gym.spaces.Dict:
    return gym.spaces.Dict({f.name: gym.spaces.Box(*_f32_inside(f.lo, f.hi), shape=f.shape, dtype=np.float32)
                            for f in fields})


def sharp_corner_flags(track: list) -> np.ndarray:
    """(N,) bool: gymnasium's red-white kerb flags, recomputed exactly as
    `CarRacing._create_track` does (it does not keep them): the same float64 differences
    and comparisons, for all points at once."""
    n, count = len(track), _cr.BORDER_MIN_COUNT
    beta = np.array([t[1] for t in track], dtype=np.float64)
    turn = beta - np.roll(beta, 1)  # turn[i] = beta[i] - beta[i - 1], as gymnasium's beta1 - beta2
    back = np.arange(n)[:, None] - np.arange(count)  # i - neg, wrapping as a negative index does
    turns = turn[back % n]
    good = np.all(np.abs(turns) > _cr.TRACK_TURN_RATE * 0.2, axis=1)
    oneside = np.sign(turns).sum(axis=1)
    border = (good & (np.abs(oneside) == count)).tolist()
    for i in range(n):  # sequential like gymnasium's (the wrap-around can cascade)
        if border[i]:
            for neg in range(count):
                border[i - neg] = True
    return np.array(border, dtype=bool)


class TrackGeometry:
    """Arrays precomputed once per track. `xy` (N, 2) centreline points, `beta`
    (N,) gymnasium's track angle (direction of travel (-sin beta, cos beta)),
    `right` (N, 2) unit normals pointing to the right of travel, `sharp` (N,).

    `observe` reads the 12 points ahead as one slice: `x_ahead`, `y_ahead`,
    `beta_ahead` and `sharp_ahead` are the centreline extended past its end by
    its first N_TILES_AHEAD points, so the points after i are `[i + 1:i + 13]`
    without a modulo or a gather."""

    def __init__(self, track: list):
        t = np.asarray(track, dtype=np.float64)
        self.n = len(t)
        self.xy = np.ascontiguousarray(t[:, 2:4])
        self.beta = t[:, 1].copy()
        self.right = np.stack([np.cos(self.beta), np.sin(self.beta)], axis=1)
        self.forward = np.stack([-np.sin(self.beta), np.cos(self.beta)], axis=1)
        self.sharp = sharp_corner_flags(track).astype(np.float64)
        self.x, self.y = self.xy[:, 0].copy(), self.xy[:, 1].copy()
        self._dx, self._dy = np.empty(self.n), np.empty(self.n)  # scratch of `nearest`
        ext = (np.arange(self.n + N_TILES_AHEAD) % self.n)
        self.x_ahead, self.y_ahead = self.xy[ext, 0].copy(), self.xy[ext, 1].copy()
        self.beta_ahead, self.sharp_ahead = self.beta[ext], self.sharp[ext]
        self._beta_list = self.beta.tolist()  # indexing a list per step is cheaper than numpy's

    def nearest(self, p: np.ndarray) -> int:
        """The index of the centreline point nearest to `p` (2,): the first of the
        smallest squared distances dx * dx + dy * dy (the float64 values
        `einsum("ij,ij->i", d, d)` gives, without its per-call parsing)."""
        dx, dy = self._dx, self._dy
        np.subtract(self.x, p[0], out=dx)
        np.subtract(self.y, p[1], out=dy)
        dx *= dx
        dy *= dy
        dx += dy
        return int(dx.argmin())


_SCALARS_AT = N_TILES_AHEAD * 4  # the buffer holds the tiles, then every other field in schema order
assert list(_SLICES)[0] == "tiles" and _SLICES["tiles"].stop == _SCALARS_AT
_TWO_PI = 2 * np.pi


def observe_packed(env: _cr.CarRacing, geo: TrackGeometry) -> np.ndarray:
    """The semantic observation of `env`'s current state as one (O,) float32 row,
    the fields of `CAR_RACING.obs` raveled in schema order (the layout of
    `TraceLayout.pack_obs`), each clipped into its range.

    Every value is the float64 expression it always was, evaluated in the same
    order (the tests compare against the first, unvectorised version bit for bit);
    only the bookkeeping around it is leaner."""
    car = env.car
    hull = car.hull
    px, py = hull.position
    a = hull.angle
    c, s = math.cos(a), math.sin(a)
    p = np.array((px, py))
    i0 = geo.nearest(p)
    # numpy's 2-vector dot, as before: it rounds differently from `x0 * x1 + y0 * y1`
    rel0 = p - geo.xy[i0]
    start = i0 + 1 if rel0 @ geo.forward[i0] > 0 else i0  # first point not yet passed
    end = start + N_TILES_AHEAD
    if start >= geo.n:  # past the last point: the extended arrays start again at 0
        start, end = start - geo.n, end - geo.n
    rx = geo.x_ahead[start:end] - px
    ry = geo.y_ahead[start:end] - py
    buf = np.empty(_LO.size)
    tiles = buf[:_SCALARS_AT].reshape(N_TILES_AHEAD, 4)
    tiles[:, 0] = (rx * c + ry * s) / TILE_SCALE
    tiles[:, 1] = (ry * c - rx * s) / TILE_SCALE
    theta = a - geo.beta_ahead[start:end]
    theta += np.pi
    np.remainder(theta, _TWO_PI, out=theta)
    theta -= np.pi
    tiles[:, 2] = theta
    tiles[:, 3] = geo.sharp_ahead[start:end]
    vx, vy = hull.linearVelocity
    w = car.wheels
    rim = w[0].wheel_rad / 100.0
    buf[_SCALARS_AT:] = (
        (vy * c - vx * s) / 100.0,  # speed
        -(w[0].joint.angle + w[1].joint.angle) / (2 * STEER_LOCK),  # steer_ind
        -hull.angularVelocity,  # ang_vel
        w[0].omega * rim, w[1].omega * rim, w[2].omega * rim, w[3].omega * rim,  # wheel_speed
        float(rel0 @ geo.right[i0]) / TRACK_HALF_WIDTH,  # offset
        math.remainder(a - geo._beta_list[i0], 2 * math.pi),  # heading_err
        not w[0].tiles, not w[1].tiles, not w[2].tiles, not w[3].tiles,  # on_grass
        env.tile_visited_count / geo.n,  # progress
    )
    out = buf.astype(np.float32)
    np.clip(out, _LO, _HI, out=out)  # also keeps float32 rounding inside each range
    return out


class _Stacked:
    """The geometries of k tracks padded into (k, max N) arrays, so the nearest point and
    the points ahead of every env are found with one numpy call each. The padding of
    `x`, `y` is +inf: its squared distance is +inf, never the first minimum (a NaN
    position gives index 0, as `TrackGeometry.nearest` does). What is read at each env's
    nearest point sits in one (k, max N, 7) array (`at`: x, y, forward, right, beta), and what
    is read at its 12 points ahead in one (k, max N + 12, 4) array (`ahead`: the extended
    x, y, beta and sharp flag), so each is one gather."""

    def __init__(self, geos: Sequence[TrackGeometry]):
        self.geos = tuple(geos)
        k, n = len(geos), max(g.n for g in geos)
        self.rows = np.arange(k)
        self.n = np.array([g.n for g in geos], np.intp)
        self.x, self.y = np.full((k, n), np.inf), np.full((k, n), np.inf)
        self.at = np.zeros((k, n, 7))
        self.ahead = np.zeros((k, n + N_TILES_AHEAD, 4))
        for j, g in enumerate(geos):
            self.x[j, :g.n], self.y[j, :g.n] = g.x, g.y
            self.at[j, :g.n] = np.column_stack([g.x, g.y, g.forward, g.right, g.beta])
            self.ahead[j, :g.n + N_TILES_AHEAD] = np.column_stack([g.x_ahead, g.y_ahead, g.beta_ahead,
                                                                   g.sharp_ahead])
        self.dx, self.dy = np.empty((k, n)), np.empty((k, n))  # scratch

    def of(self, geos: Sequence[TrackGeometry]) -> bool:
        return len(geos) == len(self.geos) and all(a is b for a, b in zip(geos, self.geos))


def row_dots(rows: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(k, 2) rows . (k, m, 2) vectors -> (k, m) float64: `rows[j] @ vectors[j, i]` for every
    j and i, bit for bit (one stacked `matmul`, whose row-by-column products numpy computes
    with the same BLAS dot as the 1-d `@`; `(a * b).sum()` rounds differently)."""
    k, m = vectors.shape[:2]
    lhs = np.ascontiguousarray(rows).reshape(k, 1, 1, 2)
    return np.matmul(lhs, np.ascontiguousarray(vectors).reshape(k, m, 2, 1))[:, :, 0, 0]


_stacked: Optional[_Stacked] = None  # the last envs' tracks: rebuilt only after a reset changed one
_AHEAD = np.arange(N_TILES_AHEAD)
_N_READ = 17  # the simulator values `_read` takes of one env


def _read(env: _cr.CarRacing) -> tuple:
    """One env's simulator state as floats: position x, y, angle, velocity x, y, yaw rate,
    the front wheels' joint angles, the four wheels' omega times rim radius / 100, the four
    on-grass flags, the lap's visited tiles (Box2D's float32 values, as Python floats)."""
    car = env.car
    hull = car.hull
    p, v = hull.position, hull.linearVelocity
    w0, w1, w2, w3 = car.wheels
    rim = w0.wheel_rad / 100.0
    return (p.x, p.y, hull.angle, v.x, v.y, hull.angularVelocity, w0.joint.angle, w1.joint.angle,
            w0.omega * rim, w1.omega * rim, w2.omega * rim, w3.omega * rim,
            not w0.tiles, not w1.tiles, not w2.tiles, not w3.tiles, env.tile_visited_count)


def observe_packed_many(envs: Sequence[_cr.CarRacing]) -> np.ndarray:
    """`observe_packed` of every env (each with its `geometry`) as one (k, O) float32 array,
    bit for bit the rows `observe_packed` gives one at a time.

    Why: a rollout steps its k envs together, and one env's observation is mostly
    numpy's per-call overhead on 12-element arrays. Here only the Box2D reads and the
    cosine, sine and IEEE remainder of each angle (`math`'s, whose rounding numpy's need
    not share) run per env; everything else is computed for all k rows at once, with the
    same float64 expressions, elementwise, in the same order. The 2k 2-vector dots are
    one stacked `matmul` of rows by columns: numpy computes each as the 1-d `@` does (its
    BLAS dot), which rounds differently from `x0 * x1 + y0 * y1`."""
    global _stacked
    k = len(envs)
    geos = [env.geometry for env in envs]
    if _stacked is None or not _stacked.of(geos):
        _stacked = _Stacked(geos)
    st = _stacked
    state = np.array([_read(env) for env in envs])  # (k, _N_READ) float64
    px, py, angle = state[:, 0:1], state[:, 1:2], state[:, 2]
    dx, dy = st.dx, st.dy  # the squared distances, as `TrackGeometry.nearest` computes them
    np.subtract(st.x, px, out=dx)
    np.subtract(st.y, py, out=dy)
    dx *= dx
    dy *= dy
    dx += dy
    nearest = dx.argmin(axis=1)
    at = st.at[st.rows, nearest]  # (k, 7): x, y, forward, right, beta at the nearest point
    rel0 = state[:, :2] - at[:, :2]  # position minus the nearest point, as `p - geo.xy[i0]`
    dots = row_dots(rel0, at[:, 2:6].reshape(k, 2, 2))  # (k, 2): rel0 . forward, rel0 . right
    starts = np.where(dots[:, 0] > 0, nearest + 1, nearest)  # first point not yet passed
    starts = np.where(starts >= st.n, starts - st.n, starts)
    a_list = angle.tolist()
    cos = np.array([math.cos(a) for a in a_list])[:, None]
    sin = np.array([math.sin(a) for a in a_list])[:, None]
    heading = (angle - at[:, 6]).tolist()
    ahead = st.ahead[st.rows[:, None], starts[:, None] + _AHEAD]  # (k, 12, 4): x, y, beta, sharp
    rx = ahead[:, :, 0] - px
    ry = ahead[:, :, 1] - py
    buf = np.empty((k, _LO.size))
    tiles = buf[:, :_SCALARS_AT].reshape(k, N_TILES_AHEAD, 4)
    tiles[:, :, 0] = (rx * cos + ry * sin) / TILE_SCALE
    tiles[:, :, 1] = (ry * cos - rx * sin) / TILE_SCALE
    theta = angle[:, None] - ahead[:, :, 2]
    theta += np.pi
    np.remainder(theta, _TWO_PI, out=theta)
    theta -= np.pi
    tiles[:, :, 2] = theta
    tiles[:, :, 3] = ahead[:, :, 3]
    scalars = buf[:, _SCALARS_AT:]
    vx, vy, c, s = state[:, 3], state[:, 4], cos[:, 0], sin[:, 0]
    scalars[:, 0] = (vy * c - vx * s) / 100.0  # speed
    scalars[:, 1] = -(state[:, 6] + state[:, 7]) / (2 * STEER_LOCK)  # steer_ind
    scalars[:, 2] = -state[:, 5]  # ang_vel
    scalars[:, 3:7] = state[:, 8:12]  # wheel_speed
    scalars[:, 7] = dots[:, 1] / TRACK_HALF_WIDTH  # offset
    scalars[:, 8] = [math.remainder(h, 2 * math.pi) for h in heading]  # heading_err
    scalars[:, 9:13] = state[:, 12:16]  # on_grass
    scalars[:, 13] = state[:, 16] / st.n  # progress
    out = buf.astype(np.float32)
    np.clip(out, _LO, _HI, out=out)
    return out


def unpack(out: np.ndarray) -> dict[str, np.ndarray]:
    """A packed (O,) row -> the observation dict, its values views of `out`."""
    return {name: out[sl].reshape(shape) for name, sl, shape in _VIEWS}


def observe(env: _cr.CarRacing, geo: TrackGeometry) -> dict[str, np.ndarray]:
    """The semantic observation of `env`'s current state (see `CAR_RACING.obs`):
    `observe_packed`'s row split into views."""
    return unpack(observe_packed(env, geo))


def _scalar(v: Any) -> float:
    if type(v) in (float, np.float32, np.float64):  # what rollouts pass: no array round trip
        return float(v)
    return float(np.asarray(v).reshape(()))


def raw_action(action: Mapping[str, Any]) -> np.ndarray:
    """The float64 array `[steer, gas, brake]` handed to gymnasium's `step`, each
    clipped to its range. Steer is NOT negated (see the module docstring)."""
    try:
        steer, gas, brake = (_scalar(action[k]) for k in ("steer", "gas", "brake"))
    except KeyError as e:
        raise KeyError(f"car_racing action needs keys steer, gas, brake; missing {e}") from None
    return np.array([min(max(steer, -1.0), 1.0), min(max(gas, 0.0), 1.0), min(max(brake, 0.0), 1.0)])


_RAW = ("steer", "gas", "brake")
_RAW_LO, _RAW_HI = np.array([-1.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0])


@functools.lru_cache(maxsize=16)
def _raw_columns(fields: tuple) -> Optional[np.ndarray]:
    """The columns of steer, gas and brake in a packed action row laid out as `fields`
    ((name, start, size, shape) each), or None when one is not a single value."""
    at = {name: (start, size) for name, start, size, _ in fields}
    missing = [k for k in _RAW if k not in at]
    if missing:
        raise KeyError(f"car_racing action needs keys steer, gas, brake; missing '{missing[0]}'")
    if any(at[k][1] != 1 for k in _RAW):
        return None
    return np.array([at[k][0] for k in _RAW], np.intp)


def raw_actions(actions: np.ndarray, fields: tuple) -> np.ndarray:
    """`raw_action` of every row of a packed (k, D) action array (`fields` say where each
    action sits) as one (k, 3) float64 array, bit for bit: the float32 values widened,
    then `max` and `min` as Python's (the bound only where it compares strictly beyond,
    so a -0.0 gas stays -0.0 and a NaN stays NaN, unlike `np.clip`)."""
    cols = _raw_columns(fields)
    if cols is None:  # an action of another size: `raw_action` says what is wrong with it
        return np.array([raw_action({name: row[start:start + size].reshape(shape)
                                     for name, start, size, shape in fields}) for row in actions])
    x = actions[:, cols].astype(np.float64)
    x = np.where(_RAW_LO > x, _RAW_LO, x)
    return np.where(_RAW_HI < x, _RAW_HI, x)


class SemanticCarRacing(_cr.CarRacing):
    """CarRacing-v3 with semantic dict observations and dict actions; see the module docstring.

    `seed`, when given, seeds the first `reset()` called without one (so
    `make(seed=s)` is deterministic); `reset(seed=...)` works as usual."""

    packed_fields = tuple(f.name for f in CAR_RACING.obs)  # the order of `packed_obs`

    def __init__(self, render_mode: Optional[str] = None, lap_complete_percent: float = 0.95,
                 domain_randomize: bool = False, seed: Optional[int] = None):
        super().__init__(render_mode=render_mode, lap_complete_percent=lap_complete_percent,
                         domain_randomize=domain_randomize, continuous=True)
        self.observation_space = _space(CAR_RACING.obs)
        self.action_space = _space(CAR_RACING.actions)
        self._first_seed = seed
        self.geometry: Optional[TrackGeometry] = None
        self.last_raw_action: Optional[np.ndarray] = None
        # The last observation as one row (`observe_packed`); the dict's arrays are views of
        # it, which is how `polc.runtime.trace.vector` packs it without reading the dict.
        self.packed_obs: Optional[np.ndarray] = None
        # Set by `polc.runtime.trace.vector.PackedEnvs`: `step` then returns None for the
        # observation and leaves `packed_obs` to the caller, which computes every env's at
        # once (`observe_many`) and stores each row back here.
        self.defer_observation = False

    def _render(self, mode: str):
        if mode == "state_pixels":
            return _BLANK_STATE  # the 96x96 pixel state nobody reads here; see the module docstring
        return super()._render(mode)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is None and self._first_seed is not None:
            seed = self._first_seed
        self._first_seed = None
        super().reset(seed=seed, options=options)
        if type(self.car) is _cr.Car:  # the same car, its dynamics in Python floats (car_dynamics.py)
            self.car.__class__ = ScalarCar
        self.geometry = TrackGeometry(self.track)
        self.last_raw_action = None
        self.packed_obs = observe_packed(self, self.geometry)
        return unpack(self.packed_obs), {}

    def step(self, action):
        if action is None:  # gymnasium's reset() makes one step without an action
            return super().step(None)
        raw = raw_action(action)
        self.last_raw_action = raw
        _, reward, terminated, truncated, info = super().step(raw)
        if self.defer_observation:
            self.packed_obs = None
            return None, reward, terminated, truncated, info
        self.packed_obs = observe_packed(self, self.geometry)
        return unpack(self.packed_obs), reward, terminated, truncated, info

    @staticmethod
    def step_many(envs: Sequence["SemanticCarRacing"], actions: np.ndarray,
                  fields: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step each of `envs` (unwrapped) with its row of the packed actions (k, D)
        (`fields`: (name, start, size, shape) of each action in a row) as `step` does with
        that row's action dict, the observations left to `observe_many`; (rewards (k,)
        float64, terminated (k,), truncated (k,)). The raw actions of all rows are made at
        once (`raw_actions`); the caller does what wrappers would (`PackedEnvs`)."""
        step = _cr.CarRacing.step
        out = []
        for env, action in zip(envs, raw_actions(actions, fields)):
            env.last_raw_action = action
            out.append(step(env, action)[1:4])
            env.packed_obs = None
        rewards, terminated, truncated = zip(*out)
        return np.array(rewards, np.float64), np.array(terminated, bool), np.array(truncated, bool)

    @staticmethod
    def observe_many(envs: Sequence["SemanticCarRacing"]) -> np.ndarray:
        """The packed observations (k, O) of `envs` (unwrapped, stepped with
        `defer_observation`); each env's `packed_obs` becomes its row."""
        rows = observe_packed_many(envs)
        for env, row in zip(envs, rows):
            env.packed_obs = row
        return rows

"""The C back end (`polc.backend.emit_c`) against the JAX lowering.

Each program's C code is built with the system C compiler under
`-std=c99 -pedantic -Wall -Wextra -Wdouble-promotion -Werror` (one compiler run per fixture, all
programs in one shared library) and its batch entry point is called through ctypes on
the same rows as `jax.vmap(lower(tp).apply)`: random observations inside the declared
ranges, and edge rows (NaN, +-inf, each bound, 0 and -0, huge values) one element at a time.

What must agree, per action and latent element:
  - exactly: bools; NaN against NaN; infinities; every action's clipping branch (the
    value equals its lower bound, its upper bound, or neither) and its NaN-ness.
  - to TOLERANCE ulps of max(|x|, 1) elsewhere. C's libm and XLA's CPU code differ in
    the last bits of exp, log, atan2, pow, sin, cos (XLA uses its own polynomial
    approximations) and in the order XLA sums an mlp's dot product: a few ulps each
    (benchmarks/bench_c.py measures each function), then carried through the program's
    arithmetic, where a gain > 1 or a cancellation scales them. Measured on every example
    and golden program: at most 30 ulps of max(|x|, 1) (the pendulum's energy-pumping
    torque, where an error in energy is multiplied by the gain); 64 leaves a factor of 2.
"""

from __future__ import annotations

import glob
import math
import os
import subprocess
import tempfile

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from polc import PolError, load, loads
from polc.analysis import reference, transforms
from polc.backend.emit_c import emit_c, literal, weight_values
from polc.backend.lower import lower
from polc.runtime.io.c_policy import CFLAGS, build_many, c_compiler
from test_differential import programs
from tiers import examples

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TOLERANCE = 64  # ulps of max(|x|, 1): see the module docstring
EVERY_OP_TOLERANCE = 8  # one op deep: the libm-versus-XLA difference itself, plus one rounding

pytestmark = pytest.mark.skipif(c_compiler() is None, reason="no C compiler (scripts/system-deps.sh installs gcc)")

EVERY_OP = '''policy every_op "every operation of Pol, for the C back end's differential test"

const K = 3

obs x : real[3] in [-2, 2] "a vector"
obs m : real[2, 3] in [-3, 3]
obs s : real in [0.1, 4] "positive"
obs u : real "unbounded"

weight g : real in [0, 2] = 0.7 "an interval weight"
weight v : real[3] >= -1 = [0.5, -0.25, 2]
weight q : real <= 1 = -0.5
weight z : real = 0.3

latent arith = (x + g) * v - s / (1 + square(u)) "broadcast arithmetic"
latent powers = [x[0] ^ 2, x[1] ^ 3, s ^ -2, s ^ 0.5, (1 + abs(u)) ^ 5, 2 ^ tanh(u), s ^ 0, s ^ -1, x[2] ^ 7]
latent fns = [abs(u), exp(tanh(u)), log(s), sqrt(s), tanh(u), sigmoid(u), relu(u), softplus(u), sin(u), cos(u), square(u), sign(u)]
latent raw = [exp(u), log(u), sqrt(u), sigmoid(u), softplus(u), u / s, -u]
latent binary = [atan2(u, s), atan2(x[0], x[1]), min(u, z), max(u, q), atan2(u, u)]
latent clipped = clip(x * u, -1, 1.5)
latent clip_array = clip(m, x, 2)
latent reduced = [sum(m), mean(m), max(m), min(m), norm(m), sum(x * v), norm(x)]
latent by_axis0 = sum(m, axis = 0)
latent by_axis1 = max(m, axis = 1)
latent by_last = mean(m, axis = -1) + norm(m, axis = 1) + min(m, axis = 1)
latent picked = [m[1, 2], m[-1, 0], x[-1], m[0, K - 1]]
latent window = m[:, 1:3]
latent row = m[0]
latent chosen = if u > 0 then x else -x
latent masked = where(m > 0, m, x * 2)
latent flags = (x > 0 and not (x < -1)) or x == 0.5
latent compared = [u >= s, u <= s, u != s, u == s, u < s]
latent replaced = nan_to_num(u / s, nan = 0, posinf = 1, neginf = -1)
latent finite = isfinite(u)
latent net = mlp(x, s; hidden = [4, 3], out = 2, activation = tanh)
latent net1 = mlp(m; hidden = [5], activation = relu)
latent guarded = if s > 1 then log(s - 1) else 0

action a : real[3] in [-1, 1] = arith * 0.5 + sum(net) + by_axis0 * 0.1
action b : real >= 0 = net1 + reduced[0] + sum(picked) ~ normal(std = 0.1)
action c : real <= 0.5 = powers[0] - fns[3] + K + guarded + sum(window) + sum(row)
action d : real = chosen[0] * u + sum(masked) + sum(clipped) + sum(clip_array) + binary[0] + by_last[1]
action e : real[2] in [-2, 3] = where(flags[0:2], replaced, by_axis1) + sum(raw[0:2]) + powers[8]
'''


def ulps_of_scale(c: np.ndarray, j: np.ndarray) -> np.ndarray:
    """|c - j| in ulps of max(|j|, 1) (float32); 0 where both are NaN or they are equal."""
    c = c.astype(np.float64)
    j = j.astype(np.float64)
    scale = np.spacing(np.maximum(np.abs(j), 1).astype(np.float32)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        d = np.abs(c - j) / scale
    same = (c == j) | (np.isnan(c) & np.isnan(j))
    return np.where(same, 0.0, np.where(np.isnan(d), np.inf, d))


def rows_for(tp, rng: np.random.Generator, n: int = 256) -> np.ndarray:
    """`n` random rows inside the declared ranges (unbounded: normal, sd 3), then edge rows:
    each element in turn NaN, +inf, -inf, its bounds, 0, -0, 1e30, -1e30, the rest random."""
    los, his = [], []
    for o in tp.obs:
        lo, hi = (np.full(o.type.size, o.lo), np.full(o.type.size, o.hi)) if o.bounds is None else \
            (np.asarray(o.bounds[0], float), np.asarray(o.bounds[1], float))
        los.append(lo)
        his.append(hi)
    lo = np.concatenate(los) if los else np.zeros(0)
    hi = np.concatenate(his) if his else np.zeros(0)
    bounded = np.isfinite(lo) & np.isfinite(hi)
    base = np.where(bounded, rng.uniform(np.where(bounded, lo, 0), np.where(bounded, hi, 1), (n, lo.size)),
                    rng.normal(np.where(np.isfinite(lo), lo + 3, np.where(np.isfinite(hi), hi - 3, 0)), 3,
                               (n, lo.size)))
    edges = []
    for k in range(lo.size):
        for v in (math.nan, math.inf, -math.inf, lo[k], hi[k], 0.0, -0.0, 1e30, -1e30):
            if math.isfinite(v) or math.isnan(v) or v in (math.inf, -math.inf):
                row = base[rng.integers(n)].copy()
                row[k] = v
                edges.append(row)
    return np.concatenate([base, np.asarray(edges).reshape(-1, lo.size)]).astype(np.float32)


def jax_rows(tp, policy, params, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The JAX lowering's actions and latents on `rows`, flattened to the C rows' layout."""
    obs, at = {}, 0
    for o in tp.obs:
        obs[o.name] = rows[:, at:at + o.type.size].reshape((len(rows),) + o.type.shape)
        at += o.type.size
    with np.errstate(over="ignore"):  # a constant beyond float32 (tests/golden/77_float32_overflow.pol)
        acts, lats = jax.jit(jax.vmap(policy.apply, in_axes=(None, 0)))(params, obs)
    flat = lambda d, group: np.concatenate(  # noqa: E731
        [np.asarray(d[x.name], np.float32).reshape(len(rows), -1) for x in group] or [np.zeros((len(rows), 0))], 1)
    return flat(acts, tp.actions), flat(lats, tp.latents)


class Case:
    """One program: its typed tree, lowering, params, the C policy and both outputs on its rows."""

    def __init__(self, tp, policy, params, cpolicy, rows):
        self.tp, self.policy, self.params, self.c, self.rows = tp, policy, params, cpolicy, rows
        self.jax_act, self.jax_lat = jax_rows(tp, policy, params, rows)
        self.c_act, self.c_lat = cpolicy.step_batch(rows)


def make_params(tp, rng: np.random.Generator) -> dict:
    """Unconstrained params: the declared initial values, and Gaussian mlp layers (drawn with
    NumPy: `policy.init` would compile flax's initialisers for every program)."""
    params = {w.name: np.asarray(np.broadcast_to(transforms.unconstrain(np.asarray(w.init, np.float64), w.lo, w.hi,
                                                                        np), w.type.shape), np.float32)
              for w in tp.weights}
    for key, variables in reference.random_mlp_params(tp, rng).items():
        params[key] = {name: {k: np.asarray(v, np.float32) for k, v in layer.items()}
                       for name, layer in variables["params"].items()}
    return params


def build_cases(programs, workdir) -> dict:
    items = []
    rng = np.random.default_rng(0)
    for label, tp in programs:
        policy = lower(tp)
        params = make_params(tp, rng)
        items.append((label, tp, policy, params, weight_values(tp, params, "the test's init", policy)))
    _, cpolicies = build_many([(tp, w, f"p{i}_{tp.name}") for i, (_, tp, _, _, w) in enumerate(items)],
                              str(workdir))
    return {label: Case(tp, policy, params, cp, rows_for(tp, rng))
            for (label, tp, policy, params, _), cp in zip(items, cpolicies)}


EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*", "*.pol")))
GOLDENS = sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "*.pol")))


def corpus() -> list[tuple[str, object]]:
    """Every example program, and every golden program that checks without an error."""
    out = []
    for path in EXAMPLES + GOLDENS:
        try:
            tp = load(path, analyze=False).typed
        except PolError:
            continue
        if tp.states:  # memory: another C API, with a state argument (test_memory_examples.py)
            continue
        out.append((os.path.relpath(path, ROOT), tp))
    return out



@pytest.fixture(scope="module")
def every_op(tmp_path_factory):
    tp = loads(EVERY_OP, "every_op.pol", analyze=False).typed
    return build_cases([("every_op", tp)], tmp_path_factory.mktemp("c_every_op"))["every_op"]


@pytest.fixture(scope="module")
def corpus_cases(tmp_path_factory):
    return build_cases(corpus(), tmp_path_factory.mktemp("c_corpus"))


def assert_agrees(case: Case, tolerance: float) -> None:
    tp = case.tp
    for (c_all, j_all, group) in ((case.c_act, case.jax_act, tp.actions), (case.c_lat, case.jax_lat, tp.latents)):
        at = 0
        for d in group:
            c, j = c_all[:, at:at + d.type.size], j_all[:, at:at + d.type.size]
            at += d.type.size
            bad = np.flatnonzero((np.isnan(c) != np.isnan(j)).any(1))
            assert bad.size == 0, f"{d.name}: NaN in one back end only, rows {bad[:5]}: c {c[bad[:3]]} jax {j[bad[:3]]}"
            if d.type.base == "bool":
                assert (c == j).all(), f"{d.name}: bools differ"
                continue
            inf = np.isinf(c) | np.isinf(j)
            assert (c[inf] == j[inf]).all(), f"{d.name}: infinities differ"
            err = ulps_of_scale(c, j)
            worst = np.unravel_index(np.argmax(err), err.shape)
            assert err.max() <= tolerance, (f"{d.name}: {err.max():.1f} ulps apart at row {worst[0]} "
                                            f"(c {c[worst]!r}, jax {j[worst]!r})")
            if getattr(d, "lo", None) is not None and hasattr(d, "std"):  # an action: its clipping branch
                for end in (d.lo, d.hi):
                    if math.isfinite(end):
                        e = np.float32(end)
                        assert ((c == e) == (j == e)).all(), f"{d.name}: clipped to {end} in one back end only"


def test_every_op_agrees_with_jax(every_op):
    assert_agrees(every_op, EVERY_OP_TOLERANCE)


def test_every_op_hits_the_edges(every_op):
    """The rows reach what the test claims to check: NaN and inf outputs, both clipping branches."""
    assert np.isnan(every_op.jax_lat).any() and np.isinf(every_op.jax_lat).any()
    act = every_op.jax_act
    assert (act == -1).any() and (act == 1).any() and (act == 0).any()  # a's bounds, b's lower bound


def test_batch_blocks_and_single_rows_agree_bitwise(every_op):
    """The batch loop's blocks of 16 rows (the step inline, observations and weights in locals)
    and its rows left over (the step function) compute the same bits; so do the runs with and
    without the latents. A NaN is compared as NaN, not by its bits: where two NaNs meet (NaN +
    NaN) x86 returns the first operand's, and which one is first is the compiler's choice (C
    leaves NaN signs and payloads unspecified; so does Pol: the JAX comparison uses isnan)."""
    rows = every_op.rows
    assert len(rows) % 16 != 0 and len(rows) > 16  # both paths run
    one = [every_op.c.step_batch(rows[i:i + 1]) for i in range(len(rows))]
    single_act = np.concatenate([a for a, _ in one])
    single_lat = np.concatenate([lat for _, lat in one])
    act_only, no_lat = every_op.c.step_batch(rows, latents=False)
    assert no_lat is None
    for got, want in ((every_op.c_act, single_act), (every_op.c_lat, single_lat), (act_only, single_act)):
        assert (np.isnan(got) == np.isnan(want)).all()
        assert np.where(np.isnan(got), 0, got).tobytes() == np.where(np.isnan(want), 0, want).tobytes()


@pytest.mark.slow
def test_corpus_agrees_with_jax(corpus_cases):
    """Every example and every valid golden program (one compiler run, one jit each)."""
    failures = []
    for label, case in corpus_cases.items():
        try:
            assert_agrees(case, TOLERANCE)
        except AssertionError as e:
            failures.append(f"{label}: {e}")
    assert not failures, "\n".join(failures)
    labels = list(corpus_cases)
    memoryless = [p for p in EXAMPLES if not load(p, analyze=False).typed.states]  # memory: its own C API
    assert sum(label.startswith("examples") for label in labels) == len(memoryless)
    assert sum(label.startswith("tests") for label in labels) >= 10


def test_literal_reads_back_exactly():
    for v in (0.1, 1 / 3, 3.0, 1e-45, 3.4028234e38, -2.5e-8, 16777217.0):
        text = literal(v)
        assert text.endswith("f") and ("." in text or "e" in text)
        assert np.float32(float(text[:-1])) == np.float32(v)
    assert (literal(math.inf), literal(-math.inf), literal(math.nan)) == ("INFINITY", "-INFINITY", "NAN")


# ---- the command and the C API ------------------------------------------------------------

PENDULUM = os.path.join(ROOT, "examples", "pendulum", "initial.pol")

DRIVER = r'''#include <stdio.h>
#include "pend.h"

int main(void) {
    pendulum_obs obs = {.cos_th = 0.6f, .sin_th = -0.8f, .th_dot = 2.5f};
    pendulum_action act;
    pendulum_latents lat;
    pendulum_step(&obs, &act, &lat);
    float rows[PENDULUM_OBS_SIZE] = {0.6f, -0.8f, 2.5f}, acts[PENDULUM_ACTION_SIZE], lats[PENDULUM_LATENTS_SIZE];
    pendulum_step_batch(NULL, 1, rows, acts, lats);
    pendulum_action again;
    pendulum_step_with(&pendulum_default_weights, &obs, &again, NULL);
    printf("%.9g %.9g %.9g %.9g\n", (double)act.torque, (double)acts[0], (double)again.torque, (double)lat.energy);
    return 0;
}
'''


def test_compile_writes_c_and_header_that_a_c_program_calls(tmp_path, capsys):
    """`polc compile -o pend.c --params P`: both files, the params file's weights baked in, the
    struct entry points and the batch one agreeing, from a C program built with the flags."""
    from polc.cli import main
    from polc.runtime.io.params import load_params

    out = tmp_path / "pend.c"
    params = os.path.join(ROOT, "examples", "pendulum", "fit.params")
    assert main(["compile", PENDULUM, "-o", str(out), "--params", params]) == 0
    assert "wrote" in capsys.readouterr().err
    text = out.read_text()
    assert '#include "pend.h"' in text and "#ifndef POLC_PEND_H_" in (tmp_path / "pend.h").read_text()
    tp = load(PENDULUM, analyze=False).typed
    policy = lower(tp)
    values = policy.constrain(load_params(params, policy))
    assert f".kp = {literal(values['kp'])}," in text  # the fitted value, as apply computes with it
    assert '/* latent energy = square(th_dot) / 6 + 5 * cos_th "kinetic plus potential energy" */' in text
    (tmp_path / "main.c").write_text(DRIVER)
    exe = tmp_path / "main"
    subprocess.run([c_compiler(), *CFLAGS, "-o", str(exe), str(tmp_path / "main.c"), str(out), "-lm"], check=True)
    torque, batch_torque, with_torque, energy = map(float, subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True).stdout.split())
    assert torque == batch_torque == with_torque
    obs = {"cos_th": np.float32(0.6), "sin_th": np.float32(-0.8), "th_dot": np.float32(2.5)}
    acts, lats = policy.apply(load_params(params, policy), obs)
    assert abs(torque - float(acts["torque"])) <= TOLERANCE * 2 ** -23
    assert abs(energy - float(lats["energy"])) <= TOLERANCE * 2 ** -23 * max(1.0, abs(energy))


@pytest.mark.parametrize("argv, message", [
    (["-o", "x.py", "--params", "p.params"], "polc: --params bakes weights into C output only (-o X.c)"),
    (["--emit", "c"], "polc: C output is two files (X.c and X.h): name the .c file with -o."),
    (["-o", "x.c", "--params", "missing.params"], "polc: cannot read 'missing.params': no such file."),
    (["-o", "my policy.c"], "polc: cannot write 'my policy.c': the .c file includes its header by name"),
])
def test_compile_c_usage_errors(tmp_path, monkeypatch, capsys, argv, message):
    from polc.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["compile", PENDULUM, *argv]) == 2
    assert capsys.readouterr().err.startswith(message)
    assert not (tmp_path / "x.c").exists()


def test_compile_c_with_params_of_another_program(tmp_path, capsys):
    from polc.cli import main

    mlp_params = os.path.join(ROOT, "examples", "pendulum", "mlp.params")
    assert main(["compile", PENDULUM, "-o", str(tmp_path / "x.c"), "--params", mlp_params]) == 2
    err = capsys.readouterr().err
    assert "fitted for a different structure" in err and 'weight "kp" (real) is missing from the file' in err
    assert not (tmp_path / "x.c").exists()


MATRICES = """policy matrices
obs pos : real[2, 3] in [-1, 1]
obs vel : real[2] in [-2, 2]
weight gain : real[2, 3] = [[1, 2, 3], [4, 5, -6]]
weight damp : real[2] = [0.5, -1]
latent push = sum(gain * pos)
latent drag = sum(damp * vel)
latent big = push > drag
action force : real in [-1, 1] = push - drag
"""


def test_batch_loop_reads_matrix_observations_and_weights(tmp_path):
    """The batch loop's locals for 2-d observations (a row pointer cast to rows of 3) and
    2-d weights (the member itself) read the right elements: C agrees with JAX on 256 + edge
    rows, through the blocks and the rows left over."""
    case = build_cases([("matrices", loads(MATRICES, "matrices.pol", analyze=False).typed)], tmp_path)["matrices"]
    src = emit_c(case.tp, weight_values(case.tp, case.params, "test", case.policy), "m.h").c
    assert "const float (*pos)[3] = (const float (*)[3])(o);" in src and "const float (*gain)[3] = w->gain;" in src
    assert_agrees(case, EVERY_OP_TOLERANCE)


CLIPS = """policy clips
obs u : real "unbounded"
obs x : real[2] in [-3, 3]
action inside : real in [-1, 1] = clip(u, -1, 1) "already in its range: clipped once"
action narrower : real[2] in [0, 1] = clip(x * u, 0.25, 0.75)
action at_zero : real in [0, 2] = clip(-u, 0, 1)
action wider : real in [-1, 1] = clip(u, -2, 2) "wider than its range: clipped again"
action neg_zero : real in [-1, 0] = clip(u, -1, -0) "a -0 bound: clipped again (maximum(-0, 0) is 0)"
action plain : real in [-1, 1] = u * 0.5
"""


def test_an_action_clipped_within_its_range_is_clipped_once(tmp_path, monkeypatch):
    """`action a in [lo, hi] = clip(x, a, b)` with lo <= a <= b <= hi: the range's clip would
    change no bit, so it is left out of the C (two comparisons fewer per action, in the step and
    the batch loop); a wider clip, a -0 bound and a plain expression keep it. The outputs are
    bit for bit those of the C with every range clip kept (on random and edge rows: NaN, +-inf,
    the bounds, 0 and -0), and agree with JAX in every clipping branch."""
    import polc.backend._c_expr as c_expr

    (tmp_path / "once").mkdir()
    (tmp_path / "twice").mkdir()
    case = build_cases([("clips", loads(CLIPS, "clips.pol", analyze=False).typed)], tmp_path / "once")["clips"]
    src = emit_c(case.tp, weight_values(case.tp, case.params, "test", case.policy), "clips.h").c
    assert "const float inside = pol_min(pol_max(obs->u, -1.0f), 1.0f);" in src
    assert "narrower[1] = pol_min(pol_max(obs->x_[1] * obs->u, 0.25f), 0.75f);" in src
    assert "const float at_zero = pol_min(pol_max(-obs->u, 0.0f), 1.0f);" in src
    assert "const float wider = pol_min(pol_max(pol_min(pol_max(obs->u, -2.0f), 2.0f), -1.0f), 1.0f);" in src
    assert "const float neg_zero = pol_min(pol_max(pol_min(pol_max(obs->u, -1.0f), -0.0f), -1.0f), 0.0f);" in src
    assert "const float plain = pol_min(pol_max(obs->u * 0.5f, -1.0f), 1.0f);" in src
    assert_agrees(case, 0)

    monkeypatch.setattr(c_expr, "_clipped_within", lambda e, lo, hi: False)
    _, (twice,) = build_many([(case.tp, weight_values(case.tp, case.params, "test", case.policy), "twice")],
                             str(tmp_path / "twice"))
    act, lat = twice.step_batch(case.rows)
    assert act.tobytes() == case.c_act.tobytes() and lat.tobytes() == case.c_lat.tobytes()


HELPER_PAIRS = r'''#include <math.h>
#include <stdio.h>
#include <string.h>
%s
%s
/* the three-test form the helpers had: x if NaN, else y if NaN, else the larger / smaller */
static float ref_max(float x, float y) { return x != x ? x : y != y ? y : x > y ? x : y; }
static float ref_min(float x, float y) { return x != x ? x : y != y ? y : x < y ? x : y; }
static unsigned bits(float f) { unsigned u; memcpy(&u, &f, sizeof u); return u; }
int main(void) {
    const float v[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-45f, -1e-45f,
                       1.17549435e-38f, 3.40282347e38f, -3.40282347e38f};
    int n = (int)(sizeof v / sizeof v[0]), differ = 0;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            differ += (bits(pol_max(v[i], v[j])) != bits(ref_max(v[i], v[j])))
                      + (bits(pol_min(v[i], v[j])) != bits(ref_min(v[i], v[j])));
    printf("%%d %%d\n", n * n, differ);
    return 0;
}
'''


def test_max_and_min_helpers_give_the_bits_of_the_three_test_form(tmp_path):
    """pol_max / pol_min test only x for NaN (`x > y ? x : y` is y already when y is NaN): on
    every pair of NaN (both signs), +-inf, +-0, +-1, denormals and the extremes they return the
    bits the three-test form returned, signed zeros and NaN signs included."""
    from polc.backend._c_expr import HELPERS

    (tmp_path / "pairs.c").write_text(HELPER_PAIRS % (HELPERS["max"], HELPERS["min"]))
    exe = tmp_path / "pairs"
    subprocess.run([c_compiler(), *[f for f in CFLAGS if f != "-fPIC"], "-o", str(exe), str(tmp_path / "pairs.c"),
                    "-lm"], check=True)
    pairs, differ = map(int, subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert (pairs, differ) == (196, 0)


def test_batch_loop_reads_literal_bounds_from_locals(tmp_path):
    """In the batch loop the literal operands of max, min, relu and clip (and of an action's
    range) are locals, read once through a volatile lvalue, so that GCC compiles the comparisons to
    maxss/minss rather than to branches (docs/deploying.md, "Speed and size"); the step function
    keeps the literals. Names are fresh (a Pol latent `lit_0` keeps its own), and C agrees with
    JAX through the blocks and the rows left over."""
    text = ("policy lits\nobs u : real\nobs v : real[2] in [-1, 1]\nlatent lit_0 = relu(u) + 1e-5\n"
            "latent low = min(u, -2.5) + max(v[0], 1e30) + max(v[1], -INFINITY_)\n"
            "const INFINITY_ = 1e40\n"
            "action steer : real in [-1, 1] = clip(u, -0.5, 0.5)\naction gas : real in [0, 2] = lit_0 + low\n")
    case = build_cases([("lits", loads(text, "lits.pol", analyze=False).typed)], tmp_path)["lits"]
    src = emit_c(case.tp, weight_values(case.tp, case.params, "test", case.policy), "lits.h").c
    step, batch = src.split("void lits_step_batch(")
    assert "static const float literals[] = {0.0f, -2.5f, 1e+30f, -INFINITY, -0.5f, 0.5f, 2.0f};" in batch
    assert ("    const float lit_0_ = *(const volatile float *)&literals[0];\n"
            "    const float lit_m2_5 = *(const volatile float *)&literals[1];") in batch
    assert "const float lit_0 = pol_max(u, lit_0_) + 1e-05f;" in batch
    assert "const float steer = pol_min(pol_max(u, lit_m0_5), lit_0_5);" in batch
    assert "const float gas = pol_min(pol_max(lit_0 + low, lit_0_), lit_2);" in batch
    assert "const float lit_0 = pol_max(obs->u, 0.0f) + 1e-05f;" in step and "literals" not in step
    assert_agrees(case, 0)


def test_baked_weights_are_the_values_the_jitted_apply_computes(tmp_path):
    """weight_values constrains under jit, as the jitted apply does: eagerly, XLA rounds the
    transform of `w0 in [-1, 2] = 0.25` to 0.25 and the jitted apply to 0.24999997, and
    sign(w0 - 0.25) was 0 in C and -1 in JAX (a random program found it)."""
    text = ("policy signs\nobs o : real\nweight w0 : real in [-1, 2] = 0.25\nlatent s = sign(w0 - 0.25)\n"
            "action steer : real in [-2, 2] = o * 0.5 + s\n")
    case = build_cases([("signs", loads(text, "signs.pol", analyze=False).typed)], tmp_path)["signs"]
    assert_agrees(case, 0)
    assert (case.c_lat == case.jax_lat).all()


def test_tanh_gives_the_bits_of_xla(tmp_path):
    """pol_tanh is XLA's CPU tanh (a rational in the clamped x, Horner with fmaf): bit for bit
    jax.jit(jnp.tanh) on a sweep over all float32 bit patterns (NaNs, infinities, denormals,
    both zeros included), on random inputs and at the approximation's edges; glibc's tanhf was
    up to 4 ulps away (83% equal on the same sweep)."""
    tp = loads("policy th\nobs u : real\nlatent t = tanh(u)\naction steer : real = u\n", "th.pol",
               analyze=False).typed
    (cp,) = build_many([(tp, weight_values(tp, {}, "none"), "th")], str(tmp_path))[1]
    x = np.concatenate([np.arange(0, 2 ** 32, 9973, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        np.random.default_rng(0).uniform(-10, 10, 100_000).astype(np.float32),
                        np.array([0.0004, -0.0004, 0.00039999998, 7.99881172, -7.99881172, 8, -9, 1e-45],
                                 np.float32)])
    c = cp.step_batch(x[:, None])[1][:, 0]
    j = np.asarray(jax.jit(jax.numpy.tanh)(x))
    differ = np.flatnonzero((c.view(np.uint32) != j.view(np.uint32)) & ~(np.isnan(c) & np.isnan(j)))
    assert differ.size == 0, f"{differ.size} of {x.size} differ, e.g. x {x[differ[:3]]}: c {c[differ[:3]]} xla {j[differ[:3]]}"


def test_names_that_clash_with_c_are_renamed():
    """A Pol name that is a C keyword or a <math.h> macro gets a trailing underscore."""
    tp = loads('policy p\nobs int : real\nobs NAN : real\nlatent float = int + NAN\n'
               'action double : real in [-1, 1] = float\n', "clash.pol", analyze=False).typed
    src = emit_c(tp, weight_values(tp, {}, "none"))
    assert "const float float_ = obs->int_ + obs->NAN_;" in src.c
    assert "float double_;  /* in [-1, 1] */" in src.h


# ---- random programs ------------------------------------------------------------------------

@pytest.mark.slow
@settings(max_examples=examples(10), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=programs())
def test_random_programs_agree_with_jax(text):
    """test_differential's random programs (every op, function, reduction, index form,
    if/else, vector literal, mlp) through the C back end: one compiler run and one jit each."""
    tp = loads(text, "random.pol", analyze=False).typed
    with tempfile.TemporaryDirectory() as work:
        case = build_cases([("random", tp)], work)["random"]
        assert_agrees(case, TOLERANCE)


# ---- rollouts with the C back end (polc eval --backend c) ------------------------------------

def test_rollouts_with_the_c_backend_follow_jax():
    """The same episodes with the C step as with the jitted one: every traced column within the
    tolerance, at params other than the baked-in ones (the weights struct passed at run time)."""
    from polc.runtime.envs import toy
    from polc.runtime.trace.rollout import RolloutConfig, rollout

    policy = loads(toy.reach_policy(), "reach.pol", analyze=False).compile()
    params = {k: v + 0.3 for k, v in policy.init(jax.random.PRNGKey(0)).items()}
    seeds = [10_000, 10_001, 10_002]
    episodes: dict = {"jax": [], "c": []}
    for backend, out in episodes.items():
        rollout(policy, params, toy.SPEC, seeds, RolloutConfig(n_envs=2, backend=backend), out.append)
    for j, c in zip(*episodes.values()):
        assert (j.seed, j.length) == (c.seed, c.length) and abs(j.ret - c.ret) <= 1e-4 * max(1.0, abs(j.ret))
        assert set(j.columns) == set(c.columns)
        for name, value in j.columns.items():
            if name.startswith(("latent.", "mean.", "action.")):
                err = ulps_of_scale(np.asarray(c.columns[name], np.float32), np.asarray(value, np.float32))
                assert err.max() <= TOLERANCE, f"{name}: {err.max()} ulps"
    with pytest.raises(ValueError, match="the C back end computes the mean actions only"):
        rollout(policy, params, toy.SPEC, seeds, RolloutConfig(backend="c", sample=True))


def test_eval_backend_c_refuses_sampling(capsys):
    from polc.cli import main

    assert main(["eval", PENDULUM, "--env", os.path.join(ROOT, "examples", "pendulum", "env.toml"),
                 "--backend", "c", "--sample", "--episodes", "1"]) == 2
    assert "polc: --backend c computes the mean actions only; it cannot --sample." in capsys.readouterr().err

"""The C back end: a checked program as dependency-free C99 (`polc compile F.pol -o policy.c`).

    emit_c(tp, weights, header) -> CSource(c, h)    the policy as a .c file and its .h
    weight_values(tp, params)   -> Weights          the float32 values `lower(tp).apply` computes with

The generated code needs `<math.h>` only (and the freestanding `<stddef.h>` for `size_t`):
no heap, no global mutable state, float32 arithmetic throughout (`f` literals and the
`f` functions of libm; it builds with `-std=c99 -pedantic -Wall -Wextra -Wdouble-promotion -Werror`).

It computes what `lower(tp).apply` computes (the clipped mean actions and the latents),
op for op, with XLA's semantics where C's would differ:
    max, min, clip, relu   NaN in, NaN out (`jnp.maximum` propagates NaN; C's fmaxf does not)
    x ^ k, integer k       lax.integer_pow: binary exponentiation by multiplication, 1 / x^-k
    softplus               jnp.logaddexp(x, 0): max(x, 0) + log1p(exp(-|x|)), x itself where x is NaN
    sigmoid                1 / (1 + exp(-x))
    sign                   -1, 1, or x itself (0, -0 and NaN)
    nan_to_num             NaN, then +inf, then -inf replaced, as jnp.nan_to_num does
    reductions             left to right over the elements in C order (mean: the sum / n)
    mlp                    flax Dense: y = (x @ kernel) + bias, the dot accumulated from 0 in input order
    tanh                   XLA's own rational approximation, bit for bit (`pol_tanh`, with fmaf)
The last bits can differ from XLA's where XLA's CPU code uses its own approximations (exp,
log and the logistic are not libm's there: up to 2 ulps, benchmarks/bench_c.py) or
another summation order (its dot): the tests bound that in ulps (tests/compiler/backend/test_emit_c.py,
docs/deploying.md). `c_expr` writes the expressions; this module the files.

Every array is unrolled element by element: Pol programs are small, and the code then
reads like the source (one statement per scalar, the latent's name on the left). A
reduction or an mlp is computed once, into a temporary, before the statement that reads it.

The batch entry point has the same statements inline, once more (`_batch`): rows in blocks
of 16, the observations and weights read into locals of their own names, `restrict` rows,
no call per row; the rows left over go through the step function. The literal operands of
max, min and clip are locals there too, read once through a volatile lvalue (`_literals`):
with the literals in place GCC compiles each clip to conditional jumps, which mispredict on
rows that cross the bounds; with locals, to maxss/minss (1.4x at 65536 rows, the same bits).
GCC 12 does not vectorise the loop across rows (the rows' 60 floats are one interleaved load
group it has no vector type for). docs/deploying.md, "Speed and size", has the measurements.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from ..check import typed as T
from ._c_expr import HELPERS, Emitter, Names, comment_text, dims, indices, literal, sub
from ..check.typed import TypedProgram
from ..util.text import bounds

@dataclass(frozen=True)
class Weights:
    """The values baked into the C code: each weight's float32 CONSTRAINED value (declared
    shape) by name, and each mlp block's Dense layers [(kernel (in, out), bias (out,)), ...]
    by key; `origin` says where they came from, for the file's header comment."""

    values: Mapping[str, np.ndarray]
    mlps: Mapping[str, tuple[tuple[np.ndarray, np.ndarray], ...]]
    origin: str


@dataclass(frozen=True)
class CSource:
    c: str  # the .c file
    h: str  # the .h file it includes


def weight_values(tp: TypedProgram, params: Mapping[str, Any], origin: str, policy: Any = None) -> Weights:
    """The float32 values `lower(tp).apply(params, .)` computes with: `constrain` of the
    unconstrained `params` (the grouped transforms `apply` uses), and the mlp blocks' Dense
    layers. `policy` is `lower(tp)` when the caller has it. Imports jax."""
    import jax

    from .lower import all_mlps, lower

    policy = policy or lower(tp)
    values = {k: np.asarray(v, np.float32) for k, v in jax.jit(policy.constrain)(params).items()}
    mlps = {}
    for key in all_mlps(tp):
        layers = params[key]
        mlps[key] = tuple((np.asarray(layers[f"Dense_{i}"]["kernel"], np.float32),
                           np.asarray(layers[f"Dense_{i}"]["bias"], np.float32)) for i in range(len(layers)))
    return Weights(values, mlps, origin)


# ---- the files ------------------------------------------------------------------------------


def _field(ctype: str, name: str, shape: tuple[int, ...], *notes: Optional[str]) -> str:
    text = "; ".join(comment_text(n) for n in notes if n)
    return f"    {ctype} {name}{dims(shape)};" + (f"  /* {text} */" if text else "")


def _struct(type_name: str, what: str, fields: list[str]) -> list[str]:
    return [f"/* {what} */", "typedef struct {", *(fields or ["    char unused_;  /* C99 has no empty struct */"]),
            f"}} {type_name};", ""]


def _initializer(a: np.ndarray) -> str:
    if a.ndim == 0:
        return literal(a)
    return "{" + ", ".join(_initializer(x) for x in a) + "}"


def _source_text(tp: TypedProgram, span) -> str:
    lines = tp.source.splitlines()[span.line - 1: span.end_line]
    return comment_text(" ".join(line.strip() for line in lines))


def _flat_names(tp: TypedProgram, names: Names, group, prefix: str) -> list[tuple[str, str, str]]:
    """(C access path, element comment, C type) of every element of `group`, in the batch
    layout: declarations in order, each flattened in C (row-major) order."""
    out = []
    for d in group:
        for idx in indices(d.type.shape):
            out.append((f"{prefix}{names.c[d.name]}{sub(idx)}", f"{d.name}{sub(idx)}",
                        "int" if d.type.base == T.BOOL else "float"))
    return out


def _guard(header: str) -> str:
    """The include guard of `header`: POLC_ + its name in capitals (a name may start with a digit)."""
    return "POLC_" + "".join(c if c.isascii() and c.isalnum() else "_" for c in header).upper() + "_"


def emit_c(tp: TypedProgram, weights: Weights, header: str = "policy.h", prefix: Optional[str] = None) -> CSource:
    """The policy as C99: a .c file that includes `header`, and the header (see the module
    docstring; docs/deploying.md shows the API). Every global name starts with `prefix`
    (default: the policy's name), so several policies link into one program. A program with
    memory (states) gets a `<p>_state` struct, `<p>_init(s)` and a state argument on every step
    function, which reads the state and writes the next one in place (docs/deploying.md); a
    program without states keeps exactly the memoryless API."""
    names = Names(tp)
    p = prefix or tp.name
    P = p.upper()
    obs_t, act_t, lat_t, w_t = p + "_obs", p + "_action", p + "_latents", p + "_weights"
    mlps = sorted(tp.mlps, key=lambda m: m.key)
    mlp_names: dict[str, str] = {}
    for m in mlps:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in m.key)
        layers = len(m.hidden) + 1
        while any(f"{base}_{part}{i}" in names.taken for part in ("kernel", "bias") for i in range(layers)):
            base += "_"
        names.taken |= {f"{base}_{part}{i}" for part in ("kernel", "bias") for i in range(layers)}
        mlp_names[m.key] = base

    batch_names = copy.deepcopy(names)  # the batch loop's body gets the same temporaries' names
    em = Emitter(tp, names, mlp_names)
    body = _body(tp, em)
    nexts = {st.name: names.fresh("next_" + names.c[st.name]) for st in tp.states}
    for st in tp.states:  # every next value from the old ones, then written back at the end
        body.append("")
        body.append(f"/* {_source_text(tp, st.span)} */")
        em.lines = []
        em.next_state(st, nexts[st.name])
        body += em.lines
    batch_em = Emitter(tp, batch_names, mlp_names, locals_=True)
    batch_body = _body(tp, batch_em)

    # ---- the header
    sha = hashlib.sha256(tp.source.encode("utf-8")).hexdigest()
    title = f"{p}: {comment_text(tp.doc)}" if tp.doc else p
    stem = header.rsplit(".", 1)[0]
    head = [f"/* {title}",
            " *",
            f" * Generated by polc from {comment_text(tp.file)} (sha256 {sha}).",
            f" * Do not edit: change the .pol and regenerate with `polc compile {comment_text(tp.file)} -o {stem}.c`.",
            " * C99, float32; needs <math.h> only (link with -lm). No heap, no global mutable state.",
            " */"]
    obs_fields = [_field("float", names.c[o.name], o.type.shape, o.doc, bounds(o.lo, o.hi)) for o in tp.obs]
    act_fields = [_field("float", names.c[a.name], a.type.shape, a.doc, bounds(a.lo, a.hi)) for a in tp.actions]
    lat_fields = [_field("int" if v.type.base == T.BOOL else "float", names.c[v.name], v.type.shape, v.doc)
                  for v in (*tp.latents, *tp.states)]  # a state: its value at the start of the step
    state_t = p + "_state"
    state_fields = [_field("int" if v.type.base == T.BOOL else "float", names.c[v.name], v.type.shape, v.doc,
                           bounds(v.lo, v.hi) if v.type.base == T.REAL else None) for v in tp.states]
    w_fields = [_field("float", names.c[w.name], w.type.shape, w.doc, bounds(w.lo, w.hi)) for w in tp.weights]
    for m in mlps:
        sizes = [m.in_size, *m.hidden, m.out or 1]
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            w_fields.append(_field("float", f"{mlp_names[m.key]}_kernel{i}", (n_in * n_out,),
                                   f'mlp "{m.key}" Dense_{i} kernel, ({n_in}, {n_out}) row-major'))
            w_fields.append(_field("float", f"{mlp_names[m.key]}_bias{i}", (n_out,), f'mlp "{m.key}" Dense_{i} bias'))
    obs_flat = _flat_names(tp, names, tp.obs, "")
    act_flat = _flat_names(tp, names, tp.actions, "")
    lat_flat = _flat_names(tp, names, (*tp.latents, *tp.states), "")

    def layout(flat) -> str:
        return ", ".join(c for _, c, _ in flat) or "(none)"

    h = head + [
        f"#ifndef {_guard(header)}", f"#define {_guard(header)}", "",
        "#include <stddef.h>", "",
        "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
        *_struct(obs_t, "The observations, as declared (ranges are what the policy assumes, not checked).",
                 obs_fields),
        *_struct(act_t, "The actions: each its mean, clipped to its declared range.", act_fields),
        *_struct(lat_t, "The latents, for tracing (bools are 0 or 1).", lat_fields),
        *_struct(w_t, "The weights' constrained values (what the program computes with) and the mlp blocks.",
                 w_fields),
        "/* The rows of the batch entry point: floats, one declaration after another, each flattened",
        " * in C (row-major) order.", f" * obs row:     {layout(obs_flat)}",
        f" * action row:  {layout(act_flat)}", f" * latents row: {layout(lat_flat)} */",
        f"#define {P}_OBS_SIZE {len(obs_flat)}", f"#define {P}_ACTION_SIZE {len(act_flat)}",
        f"#define {P}_LATENTS_SIZE {len(lat_flat)}", "",
        f"/* The weights baked in: {comment_text(weights.origin)}. */",
        f"extern const {w_t} {p}_default_weights;", "",
        *(_state_api(p, P, state_t, state_fields, obs_t, act_t, lat_t, w_t) if tp.states else [
        f"/* One step with the baked-in weights: obs -> act (and the latents when lat is not NULL). */",
        f"void {p}_step(const {obs_t} *obs, {act_t} *act, {lat_t} *lat);", "",
        f"/* One step with the weights `w`. */",
        f"void {p}_step_with(const {w_t} *w, const {obs_t} *obs, {act_t} *act, {lat_t} *lat);", "",
        f"/* n steps: obs is n rows of {P}_OBS_SIZE floats, act n rows of {P}_ACTION_SIZE, lat (or NULL)",
        f" * n rows of {P}_LATENTS_SIZE; w NULL means {p}_default_weights. */",
        f"void {p}_step_batch(const {w_t} *w, size_t n, const float *obs, float *act, float *lat);", ""]),
        "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {_guard(header)} */", ""]

    # ---- the .c file
    defaults = []
    for w in tp.weights:
        defaults.append(f"    .{names.c[w.name]} = {_initializer(np.asarray(weights.values[w.name], np.float32))},")
    for m in mlps:
        for i, (kernel, bias) in enumerate(weights.mlps[m.key]):
            defaults.append(f"    .{mlp_names[m.key]}_kernel{i} = {_initializer(np.ravel(kernel))},")
            defaults.append(f"    .{mlp_names[m.key]}_bias{i} = {_initializer(np.ravel(bias))},")
    if not defaults:
        defaults = ["    .unused_ = 0,"]
    helpers = [HELPERS[k] for k in HELPERS if k in em.helpers | batch_em.helpers]
    outs = [f"    act->{names.c[a.name]}{s} = {names.c[a.name]}{s};"
            for a in tp.actions for s in map(sub, indices(a.type.shape))]
    lats = [f"        lat->{names.c[v.name]}{s} = {names.c[v.name]}{s};"
            for v in tp.latents for s in map(sub, indices(v.type.shape))]
    lats += [f"        lat->{names.c[v.name]}{s} = s->{names.c[v.name]}{s};"
             for v in tp.states for s in map(sub, indices(v.type.shape))]
    writes = [f"    s->{names.c[v.name]}{s} = {nexts[v.name]}{s};"
              for v in tp.states for s in map(sub, indices(v.type.shape))]
    if tp.states:
        c = _stateful_c(tp, p, P, head, header, helpers, defaults, body, outs, lats, writes, names,
                        state_t, obs_t, act_t, lat_t, w_t, obs_flat, act_flat, lat_flat)
        return CSource("\n".join(c) + "\n", "\n".join(h))
    c = head + ["", "#include <math.h>", "", f'#include "{header}"', "", *sum(([x, ""] for x in helpers), []),
                f"const {w_t} {p}_default_weights = {{", *defaults, "};", "",
                f"static inline void {p}_eval(const {w_t} *w, const {obs_t} *obs, {act_t} *act, {lat_t} *lat) {{",
                "    (void)w;", "    (void)obs;",
                *(("    " + line) if line else "" for line in body), "",
                *outs, *(["    if (lat != NULL) {", *lats, "    }"] if lats else ["    (void)lat;"]), "}", "",
                f"void {p}_step(const {obs_t} *obs, {act_t} *act, {lat_t} *lat) {{",
                f"    {p}_eval(&{p}_default_weights, obs, act, lat);", "}", "",
                f"void {p}_step_with(const {w_t} *w, const {obs_t} *obs, {act_t} *act, {lat_t} *lat) {{",
                f"    {p}_eval(w, obs, act, lat);", "}", "",
                *_batch(tp, names, p, P, obs_t, act_t, lat_t, w_t, batch_body, obs_flat, act_flat, lat_flat,
                        _literals(batch_em))]
    return CSource("\n".join(c) + "\n", "\n".join(h))


def _state_api(p: str, P: str, state_t: str, state_fields: list[str], obs_t: str, act_t: str, lat_t: str,
               w_t: str) -> list[str]:
    """The header's declarations for a program with memory."""
    return [
        *_struct(state_t, "The memory carried from one step to the next (bools are 0 or 1).", state_fields),
        f"/* Set every state to its declared initial value: call at the start of each episode. */",
        f"void {p}_init({state_t} *s);", "",
        f"/* One step with the baked-in weights: (s, obs) -> act (and the latents, the states' values at the",
        f" * start of the step included, when lat is not NULL); s is then the next step's state. */",
        f"void {p}_step({state_t} *s, const {obs_t} *obs, {act_t} *act, {lat_t} *lat);", "",
        f"/* One step with the weights `w`. */",
        f"void {p}_step_with(const {w_t} *w, {state_t} *s, const {obs_t} *obs, {act_t} *act, {lat_t} *lat);", "",
        f"/* One step of n environments: s is n states (each advanced), obs n rows of {P}_OBS_SIZE floats,",
        f" * act n rows of {P}_ACTION_SIZE, lat (or NULL) n rows of {P}_LATENTS_SIZE; w NULL means",
        f" * {p}_default_weights. */",
        f"void {p}_step_batch(const {w_t} *w, size_t n, {state_t} *s, const float *obs, float *act, float *lat);",
        ""]


def _stateful_c(tp, p, P, head, header, helpers, defaults, body, outs, lats, writes, names, state_t, obs_t,
                act_t, lat_t, w_t, obs_flat, act_flat, lat_flat) -> list[str]:
    """The .c file of a program with memory (the header is built by the caller)."""
    inits = [f"    s->{names.c[st.name]}{i} = {literal(v) if st.type.base == T.REAL else ('1' if v else '0')};"
             for st in tp.states for i, v in _elements(st)]
    batch = _batch_rows(p, P, obs_t, act_t, lat_t, w_t, obs_flat, act_flat, lat_flat)
    batch = [line.replace(f"size_t n, const float *obs", f"size_t n, {state_t} *s, const float *obs")
             .replace(f"{p}_eval(w, &ob", f"{p}_eval(w, s + k, &ob") for line in batch]
    c = head + ["", "#include <math.h>", "", f'#include "{header}"', "", *sum(([x, ""] for x in helpers), []),
                f"const {w_t} {p}_default_weights = {{", *defaults, "};", "",
                f"void {p}_init({state_t} *s) {{", *inits, "}", "",
                f"static inline void {p}_eval(const {w_t} *w, {state_t} *s, const {obs_t} *obs, {act_t} *act, "
                f"{lat_t} *lat) {{",
                "    (void)w;", "    (void)obs;",
                *(("    " + line) if line else "" for line in body), "",
                *outs, *(["    if (lat != NULL) {", *lats, "    }"] if lats else ["    (void)lat;"]), *writes, "}", "",
                f"void {p}_step({state_t} *s, const {obs_t} *obs, {act_t} *act, {lat_t} *lat) {{",
                f"    {p}_eval(&{p}_default_weights, s, obs, act, lat);", "}", "",
                f"void {p}_step_with(const {w_t} *w, {state_t} *s, const {obs_t} *obs, {act_t} *act, {lat_t} *lat) {{",
                f"    {p}_eval(w, s, obs, act, lat);", "}", "",
                *batch]
    return c


def _elements(st: T.State):
    """(C subscript, value) of every element of a state's initial value."""
    v = np.broadcast_to(np.asarray(st.init), st.type.shape)
    return [(sub(idx), v[idx].item()) for idx in indices(st.type.shape)]


def _batch_rows(p: str, P: str, obs_t: str, act_t: str, lat_t: str, w_t: str, obs_flat, act_flat, lat_flat) -> list[str]:
    """The batch loop of a program with memory: each row copied into the structs and stepped
    with its own state (the blocked loop of `_batch` is for programs without memory)."""
    return [
        f"void {p}_step_batch(const {w_t} *w, size_t n, const float *obs, float *act, float *lat) {{",
        f"    if (w == NULL) w = &{p}_default_weights;",
        *_row_loop(p, P, obs_t, act_t, lat_t, obs_flat, act_flat, lat_flat, "0"),
        "}",
    ]


def _row_loop(p: str, P: str, obs_t: str, act_t: str, lat_t: str, obs_flat, act_flat, lat_flat,
              start: str) -> list[str]:
    """The rows from `start` to n, one by one, each copied into the structs and stepped by
    `{p}_eval`: every row of a program with memory, the rows the blocks leave over otherwise."""
    load = [f"        ob.{path} = o[{i}];" for i, (path, _, _) in enumerate(obs_flat)]
    store = [f"        a[{i}] = ac.{path};" for i, (path, _, _) in enumerate(act_flat)]
    store_lat = [f"            l[{i}] = {'(float)' if t == 'int' else ''}la.{path};"
                 for i, (path, _, t) in enumerate(lat_flat)]
    return [
        f"    for (size_t k = {start}; k < n; ++k) {{",
        f"        const float *o = obs + k * {P}_OBS_SIZE;",
        f"        float *a = act + k * {P}_ACTION_SIZE;",
        f"        {obs_t} ob;",
        f"        {act_t} ac;",
        *(load or ["        ob.unused_ = 0;", "        (void)o;"]),
        "        if (lat == NULL) {",
        f"            {p}_eval(w, &ob, &ac, NULL);",
        "        } else {",
        f"            {lat_t} la;",
        f"            float *l = lat + k * {P}_LATENTS_SIZE;",
        f"            {p}_eval(w, &ob, &ac, &la);",
        *(store_lat or ["            (void)l;"]),
        "        }",
        *(store or ["        (void)a;"]),
        "    }",
    ]


def _body(tp: TypedProgram, em: Emitter) -> list[str]:
    """The statements of one step, each declaration under its source line as a comment."""
    body: list[str] = []
    for node in tp.nodes:
        body.append("")
        text = _source_text(tp, node.span)
        if node.doc and comment_text(node.doc) not in text:
            text += f' "{comment_text(node.doc)}"'
        body.append(f"/* {text} */")
        em.lines = []
        em.node(node)
        body += em.lines
    return body


def _local(name: str, shape: tuple[int, ...], scalar: str, pointer: str) -> str:
    """The local `name` of an observation or a weight: its value `scalar` when it has no shape,
    else `pointer` (a float pointer into the row, or the weight's member `w->...`) read as an
    array of `shape`."""
    if not shape:
        return f"const float {name} = {scalar};"
    if len(shape) == 1:
        return f"const float *{name} = {pointer};"
    rest = dims(shape[1:])
    if pointer.startswith("w->"):  # an array member: it decays to a pointer to its first row
        return f"const float (*{name}){rest} = {pointer};"
    return f"const float (*{name}){rest} = (const float (*){rest})({pointer});"


def _literals(em: Emitter) -> list[str]:
    """The batch loop's locals for the literal operands of max, min and clip (`Emitter.bound`)."""
    if not em.bounds:
        return []
    array = em.names.fresh("literals")
    return ["    /* The literal operands of max, min and clip, read once through a volatile lvalue: held in",
            "     * locals, GCC compiles those comparisons to maxss/minss; written as literals it turns them",
            "     * into branches, which mispredict wherever the rows cross the bounds (docs/deploying.md). */",
            f"    static const float {array}[] = {{{', '.join(em.bounds)}}};",
            *(f"    const float {name} = *(const volatile float *)&{array}[{i}];"
              for i, name in enumerate(em.bounds.values()))]


def _batch(tp: TypedProgram, names: Names, p: str, P: str, obs_t: str, act_t: str, lat_t: str, w_t: str,
           body: list[str], obs_flat, act_flat, lat_flat, literals: list[str]) -> list[str]:
    """The batch loop. Rows go in blocks of {P}_BLOCK, each a loop of that fixed length over its
    rows with the step's statements inline, the observations and weights read into locals of
    their own names and the pointers `restrict` (the rows of obs, act and lat do not overlap);
    with `lat` NULL, every row's latents go to one local row. The rows left over
    (n mod {P}_BLOCK) go one by one through the step function, with the same bits."""
    text = "\n".join(line for line in body if not line.startswith("/*"))  # the code, not its comments
    used = lambda name: re.search(rf"(?<![\w.>]){re.escape(name)}\b", text) is not None  # noqa: E731
    weights = []
    for x in tp.weights:
        name, shape = names.c[x.name], x.type.shape
        if used(name):
            weights.append(f"    {_local(name, shape, f'w->{name}', f'w->{name}')}")
    obs_locals, offset = [], 0
    for ob in tp.obs:
        if used(names.c[ob.name]):
            row = f"o + {offset}" if offset else "o"
            obs_locals.append(f"            {_local(names.c[ob.name], ob.type.shape, f'o[{offset}]', row)}")
        offset += ob.type.size
    stores = [f"            a[{i}] = {path};" for i, (path, _, _) in enumerate(act_flat)]
    stores += [f"            l[{i}] = {'(float)' if t == 'int' else ''}{path};"
               for i, (path, _, t) in enumerate(lat_flat)]
    block = [
        f"    for (; k0 + {P}_BLOCK <= n; k0 += {P}_BLOCK) {{",
        *([f"        float *lat_rows = lat != NULL ? lat + k0 * {P}_LATENTS_SIZE : lat_block;"] if lat_flat else []),
        f"        for (int j = 0; j < {P}_BLOCK; ++j) {{",
        *([f"            const float *o = obs + (k0 + j) * {P}_OBS_SIZE;"] if obs_locals else []),
        *([f"            float *a = act + (k0 + j) * {P}_ACTION_SIZE;"] if act_flat else []),
        *(["            float *l = lat_rows + j * lat_stride;"] if lat_flat else []),
        *obs_locals,
        *(("            " + line) if line else "" for line in body),
        "",
        *stores,
        "        }",
        "    }",
    ]
    return [
        f"/* Rows per block of the batch loop (the rows left over go one by one). */",
        f"#define {P}_BLOCK 16",
        "",
        f"void {p}_step_batch(const {w_t} *w, size_t n, const float *restrict obs, float *restrict act,",
        f"{' ' * len(f'void {p}_step_batch(')}float *restrict lat) {{",
        *([f"    float lat_block[{P}_LATENTS_SIZE];  /* when lat is NULL, every row's latents go here */",
           f"    const size_t lat_stride = lat != NULL ? {P}_LATENTS_SIZE : 0;"] if lat_flat else []),
        "    size_t k0 = 0;",
        f"    if (w == NULL) w = &{p}_default_weights;",
        *(["    /* the weights, read once */", *weights] if weights else []),
        *literals,
        *block,
        *_row_loop(p, P, obs_t, act_t, lat_t, obs_flat, act_flat, lat_flat, "k0"),
        "}",
    ]


__all__ = ["CSource", "Weights", "emit_c", "weight_values"]

"""The C back end's expressions: one element of a typed expression as C99 text (`Emitter`),
the C names of the source's names (`Names`), float32 literals, and the helpers the emitted
code calls (NaN-propagating max and min, sign, softplus, the Dense layer). `emit_c` puts
them together into files; the semantics they follow are listed in its docstring."""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, Mapping, Optional

import numpy as np

from ..check import typed as T
from ..messages import ice
from ..check.typed import TypedProgram

_C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
    "_Bool", "_Complex", "_Imaginary", "bool", "true", "false", "asm", "typeof",
    # C++ keywords, so the header also compiles as C++
    "class", "delete", "new", "this", "template", "typename", "namespace", "operator", "private",
    "protected", "public", "virtual", "friend", "throw", "try", "catch", "using", "explicit", "mutable",
}
# What <math.h> and <stddef.h> define as macros (glibc, also outside strict C99) or the code calls.
_C_LIBRARY = {
    "INFINITY", "NAN", "HUGE_VAL", "HUGE_VALF", "HUGE_VALL", "FP_NAN", "FP_INFINITE", "FP_ZERO",
    "FP_SUBNORMAL", "FP_NORMAL", "FP_ILOGB0", "FP_ILOGBNAN", "FP_FAST_FMA", "FP_FAST_FMAF", "MATH_ERRNO",
    "MATH_ERREXCEPT", "math_errhandling", "fpclassify", "isfinite", "isinf", "isnan", "isnormal", "signbit",
    "isgreater", "isgreaterequal", "isless", "islessequal", "islessgreater", "isunordered",
    "M_E", "M_LOG2E", "M_LOG10E", "M_LN2", "M_LN10", "M_PI", "M_PI_2", "M_PI_4", "M_1_PI", "M_2_PI",
    "M_2_SQRTPI", "M_SQRT2", "M_SQRT1_2", "NULL", "size_t", "offsetof", "ptrdiff_t", "wchar_t",
    "expf", "logf", "log1pf", "sqrtf", "tanhf", "sinf", "cosf", "atan2f", "powf", "fabsf",
    # the generated functions' own parameters and locals
    "obs", "act", "lat", "w", "n", "k", "i", "j", "o", "a", "l", "s", "x", "y", "kernel", "bias",
    "n_in", "n_out", "k0", "lat_block", "lat_rows", "lat_stride",
}
RESERVED = _C_KEYWORDS | _C_LIBRARY

# The helpers, each emitted only when used (static inline: no warning when unused).
HELPERS = {
    # `x > y ? x : y` is already y when y is NaN, so only x needs the test: one comparison and
    # one test where three were, the same value for every input (SSE's maxss is exactly m)
    "max": ("/* jnp.maximum: NaN if either is NaN (C's fmaxf would return the other) */\n"
            "static inline float pol_max(float x, float y) { const float m = x > y ? x : y; return x != x ? x : m; }"),
    "min": ("/* jnp.minimum: NaN if either is NaN */\n"
            "static inline float pol_min(float x, float y) { const float m = x < y ? x : y; return x != x ? x : m; }"),
    "tanh": ("/* jnp.tanh as XLA's CPU code computes it (jaxlib 0.9): x itself where |x| < 0.0004 (NaN too),\n"
             " * else a 13/6 odd/even rational in x clamped to +-7.99881172, Horner with fused multiply-adds;\n"
             " * the same bits as XLA's on every input tried (docs/deploying.md), where glibc's tanhf is up to\n"
             " * 4 ulps away. fmaf is exact by definition: a libm call unless the target has FMA (-mfma). */\n"
             "static inline float pol_tanh(float x) {\n"
             "    if (!(fabsf(x) >= 0.0004f)) return x;\n"
             "    const float c = x < -7.99881172f ? -7.99881172f : x > 7.99881172f ? 7.99881172f : x;\n"
             "    const float c2 = c * c;\n"
             "    float p = -2.76076847742355e-16f;\n"
             "    p = fmaf(c2, p, 2.00018790482477e-13f);\n"
             "    p = fmaf(c2, p, -8.60467152213735e-11f);\n"
             "    p = fmaf(c2, p, 5.12229709037114e-08f);\n"
             "    p = fmaf(c2, p, 1.48572235717979e-05f);\n"
             "    p = fmaf(c2, p, 6.37261928875436e-04f);\n"
             "    p = fmaf(c2, p, 4.89352455891786e-03f);\n"
             "    float q = 1.19825839466702e-06f;\n"
             "    q = fmaf(c2, q, 1.18534705686654e-04f);\n"
             "    q = fmaf(c2, q, 2.26843463243900e-03f);\n"
             "    q = fmaf(c2, q, 4.89352518554385e-03f);\n"
             "    return (c * p) / q;\n}"),
    "sign": ("/* jnp.sign: -1 or 1, else x itself (0, -0, NaN) */\n"
             "static inline float pol_sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }"),
    "sigmoid": "static inline float pol_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }",
    "softplus": ("/* jax.nn.softplus = jnp.logaddexp(x, 0) */\n"
                 "static inline float pol_softplus(float x) {\n"
                 "    return x != x ? x : (x > 0.0f ? x : 0.0f) + log1pf(expf(-fabsf(x)));\n}"),
    "nan_to_num": ("/* jnp.nan_to_num with the replacements given */\n"
                   "static inline float pol_nan_to_num(float x, float nan, float posinf, float neginf) {\n"
                   "    return x != x ? nan : x == INFINITY ? posinf : x == -INFINITY ? neginf : x;\n}"),
    "square": "static inline float pol_square(float x) { return x * x; }",
    "dense": ("/* flax.linen.Dense: y = x @ kernel + bias; kernel is (n_in, n_out), row-major */\n"
              "static inline void pol_dense(int n_in, int n_out, const float *x, const float *kernel,\n"
              "                             const float *bias, float *y) {\n"
              "    for (int j = 0; j < n_out; ++j) {\n"
              "        float s = 0.0f;\n"
              "        for (int i = 0; i < n_in; ++i) s += x[i] * kernel[i * n_out + j];\n"
              "        y[j] = s + bias[j];\n"
              "    }\n}"),
}

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
          "gt": ">", "ge": ">=", "and": "&&", "or": "||"}
_LIBM = {"abs": "fabsf", "exp": "expf", "log": "logf", "sqrt": "sqrtf", "sin": "sinf",
         "cos": "cosf", "atan2": "atan2f"}
_HELPED = {"sigmoid": "sigmoid", "softplus": "softplus", "sign": "sign", "min": "min", "max": "max",
           "tanh": "tanh"}


def literal(v: Any) -> str:
    """A float32 C literal that reads back as float32(v) exactly (the shortest such decimal);
    beyond float32's range, an infinity (as JAX rounds a Python float)."""
    with np.errstate(over="ignore"):
        x = np.float32(v)
    if np.isnan(x):
        return "NAN"
    if np.isinf(x):
        return "INFINITY" if x > 0 else "-INFINITY"
    s = str(x)
    if "." not in s and "e" not in s:
        s += ".0"
    return s + "f"


def comment_text(text: str) -> str:
    """`text` safe inside a /* */ comment, on one line."""
    line = " ".join(text.split())
    line = "".join(c if 0x20 <= ord(c) != 0x7f else " " for c in line)
    return line.replace("*/", "* /").replace("/*", "/ *")


def dims(shape: tuple[int, ...]) -> str:
    return "".join(f"[{d}]" for d in shape)


def indices(shape: tuple[int, ...]):
    return itertools.product(*(range(d) for d in shape))


def sub(idx: tuple[int, ...]) -> str:
    return "".join(f"[{i}]" for i in idx)


def _broadcast_index(idx: tuple[int, ...], shape: tuple[int, ...], to: tuple[int, ...]) -> tuple[int, ...]:
    """The element of an operand of `shape` that NumPy broadcasting pairs with element `idx` of `to`."""
    tail = idx[len(to) - len(shape):]
    return tuple(0 if d == 1 else i for i, d in zip(tail, shape))


def _strip(s: str) -> str:
    """Drop one pair of outer parentheses that encloses the whole expression."""
    if not (s.startswith("(") and s.endswith(")")):
        return s
    depth = 0
    for pos, c in enumerate(s):
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and pos < len(s) - 1:
            return s
    return s[1:-1]


class Names:
    """C names for the source's names: the same name, with a trailing `_` where it would clash
    with C (a keyword, a <math.h> macro, a local of the generated code) or a name taken."""

    def __init__(self, tp: TypedProgram):
        self.taken = set(RESERVED)
        self.c: dict[str, str] = {}
        for group in (tp.obs, tp.weights, tp.latents, tp.actions, tp.states):
            for d in group:
                self.c[d.name] = self.fresh(d.name)

    def fresh(self, name: str) -> str:
        out = name
        while out in self.taken:
            out += "_"
        self.taken.add(out)
        return out


class Emitter:
    """Writes the statements of one program's step function (see the module docstring)."""

    def __init__(self, tp: TypedProgram, names: Names, mlp_names: Mapping[str, str], locals_: bool = False):
        self.tp = tp
        # False: observations and weights are read through the step's `obs` and `w` pointers;
        # True: through locals of their own names (the batch loop reads them into those first),
        # and the literal operands of max, min and clip through locals too (`bound`).
        self.locals_ = locals_
        self.bounds: dict[str, str] = {}  # a literal operand of max/min/clip -> its local (`bound`)
        self.names = names
        self.mlp_names = mlp_names
        self.helpers: set[str] = set()
        self.temps: dict[int, str] = {}  # id of a Reduce/Mlp node -> its temporary
        self.keep: list[T.TExpr] = []  # the nodes behind `temps`' ids, kept alive
        self.lines: list[str] = []

    def bound(self, text: str) -> str:
        """An operand of max, min or clip: itself, or in the batch loop, when it is a literal, the
        local that holds it (emit_c's batch loop declares them, read once through a volatile lvalue:
        with a literal there GCC compiles the comparison to a branch, with a local to maxss or
        minss; docs/deploying.md, "Speed and size"). The same value either way."""
        if not self.locals_ or not _LITERAL.match(text):
            return text
        if text not in self.bounds:
            self.bounds[text] = self.names.fresh(_literal_name(text))
        return self.bounds[text]

    # ---- one element of an expression -----------------------------------------------------

    def el(self, e: T.TExpr, idx: tuple[int, ...]) -> str:
        method = getattr(self, "el_" + type(e).__name__, None)
        if method is None:
            raise ice(f"no C emission for {type(e).__name__}")
        return method(e, idx)

    def operand(self, x: T.TExpr, idx: tuple[int, ...], shape: tuple[int, ...]) -> str:
        return self.el(x, _broadcast_index(idx, x.type.shape, shape))

    def el_Const(self, e: T.Const, idx):
        v = e.value
        for i in idx:
            v = v[i]
        if e.type.base == T.BOOL:
            return "1" if v else "0"
        return literal(v)

    def el_Ref(self, e: T.Ref, idx):
        name = self.names.c[e.name]
        if e.kind == "obs" and not self.locals_:
            return f"obs->{name}{sub(idx)}"
        if e.kind == "weight" and not self.locals_:
            return f"w->{name}{sub(idx)}"
        if e.kind == "state":  # its value at the start of the step; the next one is written at the end
            return f"s->{name}{sub(idx)}"
        return f"{name}{sub(idx)}"

    def el_Unary(self, e: T.Unary, idx):
        x = self.operand(e.x, idx, e.type.shape)
        return f"(-{x})" if e.op == "neg" else f"(!{x})"

    def el_Binary(self, e: T.Binary, idx):
        shape = e.type.shape
        left = self.operand(e.l, idx, shape)
        if e.op == "pow":
            n = _int_exponent(e.r)
            if n is not None:
                return _integer_pow(left, n, self.square)
            return f"powf({_strip(left)}, {_strip(self.operand(e.r, idx, shape))})"
        return f"({left} {_INFIX[e.op]} {self.operand(e.r, idx, shape)})"

    def el_Select(self, e: T.Select, idx):
        shape = e.type.shape
        c, a, b = (self.operand(x, idx, shape) for x in (e.cond, e.a, e.b))
        return f"({c} ? {a} : {b})"

    def el_Apply(self, e: T.Apply, idx):
        args = [_strip(self.operand(x, idx, e.type.shape)) for x in e.args]
        fn = e.fn
        if fn in _LIBM:
            return f"{_LIBM[fn]}({', '.join(args)})"
        if fn in _HELPED:
            self.helpers.add(_HELPED[fn])
            if fn in ("min", "max"):
                args = [self.bound(a) for a in args]
            return f"pol_{_HELPED[fn]}({', '.join(args)})"
        if fn == "relu":
            self.helpers.add("max")
            return f"pol_max({args[0]}, {self.bound('0.0f')})"
        if fn == "square":
            return self.square(args[0])
        if fn == "clip":
            self.helpers |= {"max", "min"}
            return f"pol_min(pol_max({args[0]}, {self.bound(args[1])}), {self.bound(args[2])})"
        if fn == "isfinite":
            return f"isfinite({args[0]})"
        if fn == "nan_to_num":
            self.helpers.add("nan_to_num")
            return f"pol_nan_to_num({', '.join(args)})"
        raise ice(f"no C emission for function {fn}")

    def square(self, x: str) -> str:
        """x * x, through a helper where `x` is not a plain name (it is then written once)."""
        if _atomic(x):
            return f"({x} * {x})"
        self.helpers.add("square")
        return f"pol_square({_strip(x)})"

    def el_Reduce(self, e: T.Reduce, idx):
        return self.temps[id(e)] + sub(idx)

    def el_Mlp(self, e: T.Mlp, idx):
        return self.temps[id(e)] + sub(idx)

    def el_Index(self, e: T.Index, idx):
        inner, rest = [], list(idx)
        for item in e.items:
            inner.append(item if isinstance(item, int) else item[0] + rest.pop(0))
        return self.el(e.x, tuple(inner) + tuple(rest))

    def el_Stack(self, e: T.Stack, idx):
        return self.el(e.items[idx[0]], idx[1:])

    # ---- temporaries: reductions and mlps, computed once before their reader ---------------

    def materialise(self, e: T.TExpr, owner: str) -> None:
        for c in T.children(e):
            self.materialise(c, owner)
        if isinstance(e, T.Reduce):
            self.reduction(e, owner)
        elif isinstance(e, T.Mlp):
            self.mlp(e, owner)

    def temp(self, e: T.TExpr, owner: str, what: str) -> str:
        name = self.names.fresh(f"{owner}_{what}")
        self.temps[id(e)] = name
        self.keep.append(e)
        return name

    def reduction(self, e: T.Reduce, owner: str, name: Optional[str] = None) -> None:
        name = name or self.temp(e, owner, e.fn)
        xs = e.x.type.shape
        out = e.type.shape
        values = []
        for idx in indices(out):
            if e.axis is None:
                terms = [self.el(e.x, i) for i in indices(xs)]
            else:
                terms = [self.el(e.x, idx[:e.axis] + (j,) + idx[e.axis:]) for j in range(xs[e.axis])]
            values.append((idx, self.fold(e.fn, terms)))
        if not out:
            self.lines.append(f"const float {name} = {_strip(values[0][1])};")
        else:
            self.lines.append(f"float {name}{dims(out)};")
            self.lines += [f"{name}{sub(idx)} = {_strip(v)};" for idx, v in values]

    def fold(self, fn: str, terms: list[str]) -> str:
        """`terms` combined left to right: ((t0 + t1) + t2) ..."""
        if fn == "norm":
            terms = [self.square(_strip(t)) for t in terms]
        if fn in ("max", "min"):
            self.helpers.add(fn)
        acc = terms[0]
        for t in terms[1:]:
            acc = f"pol_{fn}({_strip(acc)}, {_strip(t)})" if fn in ("max", "min") else f"({acc} + {t})"
        if fn == "mean":
            return f"({acc} / {literal(len(terms))})"
        if fn == "norm":
            return f"sqrtf({_strip(acc)})"
        return acc

    def mlp(self, e: T.Mlp, owner: str) -> None:
        self.helpers.add("dense")
        name = self.temp(e, owner, "mlp")
        key = self.mlp_names[e.key]
        inputs = [self.el(x, i) for x in e.inputs for i in indices(x.type.shape)]
        self.lines.append(f"float {name}_in[{len(inputs)}];")
        self.lines += [f"{name}_in[{i}] = {_strip(v)};" for i, v in enumerate(inputs)]
        sizes = [e.in_size, *e.hidden, e.out or 1]
        x = f"{name}_in"
        for layer, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            y = f"{name}_out" if layer == len(sizes) - 2 else f"{name}_h{layer}"
            self.lines.append(f"float {y}[{n_out}];")
            self.lines.append(f"pol_dense({n_in}, {n_out}, {x}, w->{key}_kernel{layer}, w->{key}_bias{layer}, {y});")
            if layer < len(sizes) - 2:
                if e.activation == "tanh":
                    self.helpers.add("tanh")
                    f = f"pol_tanh({y}[j])"
                else:
                    self.helpers.add("max")
                    f = f"pol_max({y}[j], {self.bound('0.0f')})"
                self.lines.append(f"for (int j = 0; j < {n_out}; ++j) {y}[j] = {f};")
            x = y
        if e.out == 0:
            self.lines.append(f"const float {name}_value = {name}_out[0];")
            self.temps[id(e)] = f"{name}_value"
        else:
            self.temps[id(e)] = f"{name}_out"

    # ---- a declaration ------------------------------------------------------------------

    def next_state(self, st: T.State, name: str) -> None:
        """A state's next value into the local `name` (written back once every state's is computed)."""
        self.materialise(st.update, name)
        self.assign(name, st.update, st.type, clipped=st.type.base == T.REAL, lo=st.lo, hi=st.hi)

    def node(self, node) -> None:
        name = self.names.c[node.name]
        e = node.expr
        if isinstance(node, T.Latent) and isinstance(e, T.Reduce) and e.type.shape == node.type.shape:
            # `latent x = mean(...)`: the reduction is computed under the latent's own name
            for c in T.children(e):
                self.materialise(c, name)
            self.reduction(e, name, name)
            return
        self.materialise(e, name)
        clipped = isinstance(node, T.Action)
        self.assign(name, e, node.type, clipped=clipped, lo=node.lo if clipped else -math.inf,
                    hi=node.hi if clipped else math.inf)

    def assign(self, name: str, e: T.TExpr, typ: T.Type, clipped: bool, lo: float, hi: float) -> None:
        """The local `name` = `e` element by element, clipped to [lo, hi] when `clipped` and an end is
        bounded (an action's range, a real state's): a const scalar or an array of `typ`'s shape."""
        ctype = "int" if typ.base == T.BOOL else "float"
        shape = typ.shape
        values = []
        clipped = clipped and (lo > -math.inf or hi < math.inf) and not _clipped_within(e, lo, hi)
        for idx in indices(shape):
            v = _strip(self.operand(e, idx, shape))
            if clipped:
                v = self.clip(v, lo, hi)
            values.append((idx, v))
        if not shape:
            self.lines.append(f"const {ctype} {name} = {values[0][1]};")
        else:
            self.lines.append(f"{ctype} {name}{dims(shape)};")
            self.lines += [f"{name}{sub(idx)} = {v};" for idx, v in values]

    def clip(self, v: str, lo: float, hi: float) -> str:
        """jnp.clip(v, lo, hi) = minimum(maximum(v, lo), hi), either end left out when open."""
        if lo > -math.inf:
            self.helpers.add("max")
            v = f"pol_max({v}, {self.bound(literal(lo))})"
        if hi < math.inf:
            self.helpers.add("min")
            v = f"pol_min({v}, {self.bound(literal(hi))})"
        return v


def _atomic(s: str) -> bool:
    """Whether `s` can be repeated cheaply and without parentheses (a name, a member, a literal)."""
    return all(c.isalnum() or c in "_[]->." for c in s)


_LITERAL = re.compile(r"-?([0-9]+(\.[0-9]*)?(e[-+]?[0-9]+)?f|INFINITY)$")  # what `literal` writes, NAN aside


def _literal_name(text: str) -> str:
    """The batch loop's local for a literal: lit_0_1 for 0.1f, lit_m1 for -1.0f, lit_1em05 for
    1e-05f, lit_inf for INFINITY."""
    body = text.rstrip("f").replace("INFINITY", "inf")
    body = body[:-2] if body.endswith(".0") else body
    return "lit_" + body.replace("-", "m").replace("+", "").replace(".", "_")


def _number(e: T.TExpr) -> Optional[float]:
    """The value of a real scalar literal, negated or not (`-1`), else None."""
    if isinstance(e, T.Unary) and e.op == "neg":
        v = _number(e.x)
        return None if v is None else -v
    if isinstance(e, T.Const) and not e.type.shape and not isinstance(e.value, bool):
        return float(e.value)
    return None


def _clipped_within(e: T.TExpr, lo: float, hi: float) -> bool:
    """Whether `e` is `clip(x, a, b)` with literal bounds lo <= a <= b <= hi: every value it takes
    is NaN or in [a, b], so clipping it again to [lo, hi] changes no bit and is left out (an
    action `clip(cmd, -1, 1)` declared in [-1, 1]). A zero bound with its sign bit set is not
    taken: maximum(-0, 0) is 0, so the second clip could flip a zero's sign."""
    if not (isinstance(e, T.Apply) and e.fn == "clip" and len(e.args) == 3):
        return False
    a, b = _number(e.args[1]), _number(e.args[2])
    if a is None or b is None or any(v == 0 and math.copysign(1.0, v) < 0 for v in (a, b, lo, hi)):
        return False
    return lo <= a <= b <= hi


def _int_exponent(e: T.TExpr) -> Optional[int]:
    """The exponent `lower.int_exponent` lowers to integer_pow (same rule; no jax import here)."""
    if isinstance(e, T.Const) and not e.type.shape and not isinstance(e.value, bool):
        v = float(e.value)
        if v.is_integer() and abs(v) <= 64:
            return int(v)
    return None


def _integer_pow(x: str, n: int, square) -> str:
    """lax.integer_pow's multiplications: x^3 = x * (x * x), x^-2 = 1 / (x * x), x^0 = 1."""
    if n == 0:
        return "1.0f"
    y, acc, cur = abs(n), None, x
    while y > 0:
        if y & 1:
            acc = cur if acc is None else f"({acc} * {cur})"
        y >>= 1
        if y > 0:
            cur = square(cur)
    return f"(1.0f / {acc})" if n < 0 else acc

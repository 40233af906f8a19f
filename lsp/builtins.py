"""What completion and hover say about Pol's builtin functions and keywords.

The names come from the compiler (`polc.check.expr.FUNCTIONS`, the grammar's
reserved words); the signatures and one-line docs are written here, once, from
docs/language.md's table. tests/lsp/test_lsp.py keeps the two in step: a builtin
the checker accepts without a signature here fails it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Function:
    name: str
    signature: str
    doc: str


def _elementwise(name: str, what: str) -> Function:
    return Function(name, f"{name}(x)", f"elementwise {what}")


FUNCTIONS: dict[str, Function] = {f.name: f for f in (
    _elementwise("abs", "absolute value"),
    _elementwise("exp", "exponential"),
    _elementwise("log", "natural logarithm (needs x > 0)"),
    _elementwise("sqrt", "square root (needs x >= 0)"),
    _elementwise("tanh", "hyperbolic tangent, in (-1, 1)"),
    _elementwise("sigmoid", "logistic function 1 / (1 + exp(-x)), in (0, 1)"),
    _elementwise("relu", "max(x, 0)"),
    _elementwise("softplus", "log(1 + exp(x)), positive"),
    _elementwise("sin", "sine"),
    _elementwise("cos", "cosine"),
    _elementwise("square", "x * x"),
    _elementwise("sign", "-1, 0 or 1"),
    Function("atan2", "atan2(y, x)", "elementwise angle of (x, y), broadcasting"),
    Function("min", "min(a, b) | min(x) | min(x, axis = k)",
             "elementwise minimum of two arguments; with one, the reduction over all elements or one axis"),
    Function("max", "max(a, b) | max(x) | max(x, axis = k)",
             "elementwise maximum of two arguments; with one, the reduction over all elements or one axis"),
    Function("clip", "clip(x, lo, hi)", "elementwise clip of x to [lo, hi], broadcasting"),
    Function("where", "where(c, a, b)", "the same as `if c then a else b`, elementwise"),
    Function("sum", "sum(x) | sum(x, axis = k)", "sum over all elements, or over one axis"),
    Function("mean", "mean(x) | mean(x, axis = k)", "mean over all elements, or over one axis"),
    Function("norm", "norm(x) | norm(x, axis = k)", "Euclidean norm over all elements, or over one axis"),
    Function("isfinite", "isfinite(x)", "elementwise: true where x is neither nan nor +-inf (a bool)"),
    Function("nan_to_num", "nan_to_num(x; nan = 0, posinf = nan, neginf = nan)",
             "x with nan, +inf and -inf replaced by constants (the infinities by `nan`'s value unless given)"),
    Function("mlp", "mlp(x, ...; hidden = [64, 64], out = n, activation = tanh | relu)",
             "a learned neural block: inputs flattened and concatenated, Dense layers of the hidden sizes, "
             "a linear output of size n (a scalar when `out` is omitted)"),
)}

# The grammar's reserved words (grammar/pol.lark, NAME), with what each begins or means.
KEYWORDS: dict[str, str] = {
    "policy": "names the program: `policy NAME \"doc\"`",
    "obs": "an observation: `obs NAME : real[n] in [lo, hi] \"doc\"`",
    "weight": "a trainable weight: `weight NAME : real >= 0 = 0.5 \"doc\"`",
    "latent": "a named intermediate value: `latent NAME = EXPR \"doc\"`",
    "action": "an output: `action NAME : real in [lo, hi] = EXPR ~ normal(std = EXPR)`",
    "expect": "an intent the analysis proves or refutes: `expect y decreasing in x`, `expect y >= 0`",
    "const": "a named constant, usable in shapes, indices and expressions: `const lookahead = 6`",
    "in": "a range `in [lo, hi]`, or the variable of a monotonicity intent",
    "if": "`if c then a else b`",
    "then": "`if c then a else b`",
    "else": "`if c then a else b`",
    "and": "logical and of two bools",
    "or": "logical or of two bools",
    "not": "logical negation of a bool",
    "true": "the bool constant",
    "false": "the bool constant",
    "real": "the real type, `real` or `real[n, m]`",
    "bool": "the bool type",
    "inf": "infinity, in a bound",
    "increasing": "a monotonicity intent: `expect y increasing in x`",
    "decreasing": "a monotonicity intent: `expect y decreasing in x`",
}
